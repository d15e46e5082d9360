"""Concatenate Parquet files of one schema into one plain Parquet file without re-encoding them.

Worker processes write their batches as Parquet part files (compressed in parallel, on every
core); the run then publishes one ``chunks.parquet``. Decoding and re-encoding the parts there would
cost the flow process what the workers saved, so the parts are joined the way parquet-mr's
``ParquetFileWriter.appendFile`` does: their column chunks (pages, already compressed) are copied
byte for byte, and one footer lists every part's row groups with their offsets moved by where the
part's data now starts. The result is an ordinary Parquet file (row groups in part order) that
pyarrow, DuckDB, Polars and pandas read as any other.

The footer is Thrift's compact protocol; ``_decode``/``_encode`` read and write it generically (a
value tree that encodes back to the same bytes), and only the offset fields are changed. Parts with
a page index or bloom filters (structures outside the footer that hold absolute offsets too) are
refused: chunkyard writes neither.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

MAGIC = b"PAR1"

# Thrift compact types.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)

# Field ids of parquet.thrift used here.
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE, _CM_BLOOM = 9, 10, 11, 14


class ParquetConcatError(ValueError):
    pass


# A decoded struct: a list of [field id, type, value]; a list value: [element type, [values]];
# a map value: [key type, value type, [(key, value)]].


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _put_varint(out: bytearray, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _read_value(data: bytes, pos: int, kind: int, in_container: bool = False):
    if kind in (_TRUE, _FALSE):
        if in_container:  # a bool element of a list is a byte of its own
            return data[pos] == _TRUE, pos + 1
        return kind == _TRUE, pos
    if kind == _BYTE:
        return struct.unpack_from("b", data, pos)[0], pos + 1
    if kind in (_I16, _I32, _I64):
        raw, pos = _varint(data, pos)
        return _unzigzag(raw), pos
    if kind == _DOUBLE:
        return struct.unpack_from("<d", data, pos)[0], pos + 8
    if kind == _BINARY:
        size, pos = _varint(data, pos)
        return bytes(data[pos : pos + size]), pos + size
    if kind in (_LIST, _SET):
        header = data[pos]
        pos += 1
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        items = []
        for _ in range(size):
            item, pos = _read_value(data, pos, element, in_container=True)
            items.append(item)
        return [element, items], pos
    if kind == _MAP:
        size, pos = _varint(data, pos)
        if not size:
            return [0, 0, []], pos
        types = data[pos]
        pos += 1
        key_type, value_type = types >> 4, types & 0x0F
        pairs = []
        for _ in range(size):
            key, pos = _read_value(data, pos, key_type, in_container=True)
            value, pos = _read_value(data, pos, value_type, in_container=True)
            pairs.append((key, value))
        return [key_type, value_type, pairs], pos
    if kind == _STRUCT:
        return _read_struct(data, pos)
    raise ParquetConcatError(f"unknown Thrift compact type {kind} at byte {pos} of the footer")


def _read_struct(data: bytes, pos: int) -> tuple[list, int]:
    fields: list = []
    last = 0
    while True:
        header = data[pos]
        pos += 1
        if header == 0:
            return fields, pos
        delta, kind = header >> 4, header & 0x0F
        if delta:
            field_id = last + delta
        else:
            raw, pos = _varint(data, pos)
            field_id = _unzigzag(raw)
        value, pos = _read_value(data, pos, kind)
        fields.append([field_id, kind, value])
        last = field_id


def _write_value(out: bytearray, kind: int, value, in_container: bool = False) -> None:
    if kind in (_TRUE, _FALSE):
        if in_container:
            out.append(_TRUE if value else _FALSE)
        return  # a struct field's bool is in its header
    if kind == _BYTE:
        out += struct.pack("b", value)
    elif kind in (_I16, _I32, _I64):
        _put_varint(out, _zigzag(value))
    elif kind == _DOUBLE:
        out += struct.pack("<d", value)
    elif kind == _BINARY:
        _put_varint(out, len(value))
        out += value
    elif kind in (_LIST, _SET):
        element, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | element)
        else:
            out.append(0xF0 | element)
            _put_varint(out, len(items))
        for item in items:
            _write_value(out, element, item, in_container=True)
    elif kind == _MAP:
        key_type, value_type, pairs = value
        _put_varint(out, len(pairs))
        if pairs:
            out.append((key_type << 4) | value_type)
            for key, item in pairs:
                _write_value(out, key_type, key, in_container=True)
                _write_value(out, value_type, item, in_container=True)
    elif kind == _STRUCT:
        _write_struct(out, value)
    else:
        raise ParquetConcatError(f"unknown Thrift compact type {kind}")


def _write_struct(out: bytearray, fields: list) -> None:
    last = 0
    for field_id, kind, value in fields:
        header_kind = (_TRUE if value else _FALSE) if kind in (_TRUE, _FALSE) else kind
        delta = field_id - last
        if 0 < delta <= 15:
            out.append((delta << 4) | header_kind)
        else:
            out.append(header_kind)
            _put_varint(out, _zigzag(field_id))
        _write_value(out, kind, value)
        last = field_id
    out.append(0)


def decode_footer(footer: bytes) -> list:
    fields, end = _read_struct(footer, 0)
    if end != len(footer):
        raise ParquetConcatError(f"the footer has {len(footer) - end} bytes after its end")
    return fields


def encode_footer(fields: list) -> bytes:
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


def _field(fields: list, field_id: int) -> list | None:
    for item in fields:
        if item[0] == field_id:
            return item
    return None


def _shift(fields: list, field_id: int, delta: int) -> None:
    item = _field(fields, field_id)
    if item is not None:
        item[2] += delta


def _read_part(path: Path) -> tuple[int, list]:
    """(where the part's footer starts, its decoded footer)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size < 12:
            raise ParquetConcatError(f"{path}: {size} bytes is too short for a Parquet file")
        handle.seek(size - 8)
        tail = handle.read(8)
        if tail[4:] != MAGIC:
            raise ParquetConcatError(f"{path}: not a Parquet file (no PAR1 at its end)")
        (length,) = struct.unpack("<I", tail[:4])
        footer_start = size - 8 - length
        handle.seek(0)
        if handle.read(4) != MAGIC or footer_start < 4:
            raise ParquetConcatError(f"{path}: not a Parquet file (bad header or footer length)")
        handle.seek(footer_start)
        return footer_start, decode_footer(handle.read(length))


def _moved_row_groups(path: Path, footer: list, delta: int) -> list:
    row_groups = _field(footer, _FILE_ROW_GROUPS)
    groups = row_groups[2][1] if row_groups else []
    for group in groups:
        _shift(group, _RG_FILE_OFFSET, delta)
        for column in _field(group, _RG_COLUMNS)[2][1]:
            if _field(column, _CC_OFFSET_INDEX) or _field(column, _CC_COLUMN_INDEX):
                raise ParquetConcatError(f"{path}: has a page index, which concat_parquet cannot move")
            _shift(column, _CC_FILE_OFFSET, delta)
            meta = _field(column, _CC_META)
            if meta is None:
                raise ParquetConcatError(f"{path}: a column chunk without metadata (encrypted?)")
            if _field(meta[2], _CM_BLOOM):
                raise ParquetConcatError(f"{path}: has bloom filters, which concat_parquet cannot move")
            for field_id in (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE):
                _shift(meta[2], field_id, delta)
    return groups


def concat_parquet(parts: Sequence[Path], target: Path) -> int:
    """Write ``target``: the rows of ``parts`` in order, in one Parquet file. Returns its row count.

    Every part must have the same schema (Parquet's and Arrow's, as one writer configuration gives);
    a part that differs is named in the error. At least one part is needed.
    """
    if not parts:
        raise ParquetConcatError("concat_parquet needs at least one part")
    first_schema: bytes | None = None
    footer_out: list | None = None
    groups_out: list = []
    num_rows = 0
    with open(target, "wb") as out:
        out.write(MAGIC)
        for path in parts:
            footer_start, footer = _read_part(Path(path))
            schema = encode_footer([item for item in footer if item[0] in (2, 5, 7)])
            if first_schema is None:
                first_schema, footer_out = schema, footer
            elif schema != first_schema:
                raise ParquetConcatError(f"{path}: its schema differs from {parts[0]}'s")
            delta = out.tell() - 4  # the part's data began at byte 4
            groups_out.extend(_moved_row_groups(Path(path), footer, delta))
            num_rows += _field(footer, _FILE_NUM_ROWS)[2]
            with open(path, "rb") as source:
                _copy_range(source, out, 4, footer_start - 4)
        assert footer_out is not None
        for ordinal, group in enumerate(groups_out):
            item = _field(group, _RG_ORDINAL)
            if item is not None:
                item[2] = ordinal
        merged = [list(item) for item in footer_out]
        _field(merged, _FILE_NUM_ROWS)[2] = num_rows
        row_groups = _field(merged, _FILE_ROW_GROUPS)
        if row_groups is None:
            merged.append([_FILE_ROW_GROUPS, _LIST, [_STRUCT, groups_out]])
            merged.sort(key=lambda item: item[0])
        else:
            row_groups[2] = [_STRUCT, groups_out]
        footer_bytes = encode_footer(merged)
        out.write(footer_bytes)
        out.write(struct.pack("<I", len(footer_bytes)))
        out.write(MAGIC)
    return num_rows


def _copy_range(source, out, offset: int, length: int) -> None:
    """Copy ``length`` bytes from ``offset`` of ``source`` to the end of ``out`` (in the kernel when it can)."""
    out.flush()
    copied = 0
    copy_file_range = getattr(os, "copy_file_range", None)
    if copy_file_range is not None:
        try:
            while copied < length:
                n = copy_file_range(source.fileno(), out.fileno(), length - copied, offset + copied)
                if n == 0:
                    break
                copied += n
        except OSError:
            pass  # not supported between these filesystems: copy through Python below
        out.seek(0, os.SEEK_END)
    source.seek(offset + copied)
    while copied < length:
        block = source.read(min(8 << 20, length - copied))
        if not block:
            raise ParquetConcatError(f"{source.name}: ended before its footer")
        out.write(block)
        copied += len(block)
