"""Where datasets live: a local folder (``pathlib.Path``) or a folder on any filesystem pyarrow opens.

``output.path`` may be a URI (``s3://bucket/prefix``, ``gs://...``, ``hdfs://...``, ``file:///abs``) opened
with ``pyarrow.fs.FileSystem.from_uri``; a scheme pyarrow does not know is tried through fsspec
(``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``) when fsspec knows it. ``file://`` URIs and plain paths
stay ``pathlib.Path`` objects, so local datasets keep their staging-and-rename publishing.

A ``StoragePath`` offers the few ``pathlib`` operations the dataset code uses (``/``, ``name``,
``parent``, ``is_dir``, ``is_file``, ``iterdir``, ``read_text``), so snapshot lookup is one code for
both. Endpoint and region travel in the URI's query string
(``s3://bucket/out?endpoint_override=127.0.0.1:9000&scheme=http``, ``?region=eu-west-1``); credentials
in the usual ``AWS_*`` variables (pyarrow refuses them in an S3 URI). ``str()`` of a ``StoragePath``
leaves the query out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from chunkyard.chunking.errors import DatasetError, DatasetPathError

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_uri(value: str | Path) -> bool:
    """Whether ``value`` is written as ``scheme://...`` (a one-letter scheme would be a Windows drive)."""
    match = _URI.match(str(value)) if isinstance(value, str) else None
    return bool(match) and len(match.group(1)) > 1


class StoragePath:
    """A file or folder on a non-local pyarrow filesystem, with the pathlib operations datasets need."""

    def __init__(self, filesystem: pafs.FileSystem, path: str, scheme: str):
        self.filesystem = filesystem
        self.path = path.rstrip("/")
        self.scheme = scheme

    # -- pathlib-like surface -------------------------------------------------------------------
    def __truediv__(self, name: str) -> StoragePath:
        return StoragePath(self.filesystem, f"{self.path}/{name}", self.scheme)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> StoragePath:
        head = self.path.rsplit("/", 1)[0] if "/" in self.path else self.path
        return StoragePath(self.filesystem, head, self.scheme)

    def _info(self) -> pafs.FileInfo:
        try:
            return self.filesystem.get_file_info(self.path)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{self}: cannot reach: {exc}") from None

    def exists(self) -> bool:
        return self._info().type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self._info().type == pafs.FileType.Directory

    def is_file(self) -> bool:
        return self._info().type == pafs.FileType.File

    def iterdir(self) -> list[StoragePath]:
        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{self}: cannot list: {exc}") from None
        return [StoragePath(self.filesystem, info.path, self.scheme) for info in infos]

    def read_bytes(self) -> bytes:
        with self.filesystem.open_input_stream(self.path) as handle:
            return handle.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        """One object written whole: on an object store it appears complete or not at all."""
        with self.filesystem.open_output_stream(self.path) as handle:
            handle.write(data)

    def delete_tree(self) -> None:
        try:
            self.filesystem.delete_dir(self.path)
        except FileNotFoundError:
            pass

    def files(self) -> list[pafs.FileInfo]:
        """Every file below this folder, with its size and (where the filesystem keeps one) mtime."""
        selector = pafs.FileSelector(self.path, recursive=True, allow_not_found=True)
        return [info for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.File]

    # -- identity ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        return f"{self.scheme}://{self.path}"

    def __repr__(self) -> str:
        return f"StoragePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, StoragePath)
            and other.path == self.path
            and other.scheme == self.scheme
            and other.filesystem.equals(self.filesystem)
        )

    def __hash__(self) -> int:
        return hash((self.scheme, self.path))


Location = Path | StoragePath


def location(value: str | Path | StoragePath) -> Location:
    """A local ``Path`` for a path or ``file://`` URI, a ``StoragePath`` for any other URI."""
    if isinstance(value, (Path, StoragePath)):
        return value
    if not is_uri(value):
        return Path(value)
    scheme = value.split("://", 1)[0].lower()
    try:
        filesystem, path = pafs.FileSystem.from_uri(_bounded(value, scheme))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if "Unrecognized filesystem type" not in str(exc) and "not supported" not in str(exc):
            raise DatasetError(f"{_shown(value)}: cannot open: {exc}") from None
        filesystem, path = _fsspec(value, scheme)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{_shown(value)}: cannot open: {exc}") from None
    if isinstance(filesystem, pafs.LocalFileSystem):
        return Path(path)
    return StoragePath(filesystem, path, scheme)


# How long the GCS client retries before an operation fails. Its own default is 15 minutes, so an
# unreachable or unauthenticated bucket looked like a hung run; ``?retry_limit_seconds=N`` overrides it.
GCS_RETRY_LIMIT_SECONDS = 60


def _bounded(value: str, scheme: str) -> str:
    """``value`` with a retry limit for GCS when the URI sets none (other schemes fail on their own)."""
    if scheme not in ("gs", "gcs") or "retry_limit_seconds=" in urlsplit(value).query:
        return value
    return f"{value}{'&' if urlsplit(value).query else '?'}retry_limit_seconds={GCS_RETRY_LIMIT_SECONDS}"


def _fsspec(value: str, scheme: str) -> tuple[pafs.FileSystem, str]:
    """A scheme pyarrow lacks, through fsspec when fsspec (and the scheme's package) is installed."""
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError:
        fsspec = None
    if fsspec is None or scheme not in fsspec.available_protocols():
        raise DatasetError(
            f"{_shown(value)}: unknown filesystem {scheme!r}: use a local path, file://, s3://, "
            "gs://, hdfs:// or abfs:// (or install fsspec and the package for this scheme)"
        )
    try:
        filesystem, path = url_to_fs(value)
    except (ImportError, ValueError, OSError) as exc:
        raise DatasetError(f"{_shown(value)}: cannot open through fsspec: {exc}") from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem)), path


def _shown(value: str) -> str:
    """A URI without its query string (which may hold credentials)."""
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.scheme else value


def parquet_file(path: Location) -> pq.ParquetFile:
    if isinstance(path, StoragePath):
        return pq.ParquetFile(path.filesystem.open_input_file(path.path))
    return pq.ParquetFile(path)


def read_parquet(path: Location | list[Location], **options: Any) -> pa.Table:
    """One Parquet file, or several of one schema read as one table (their rows in list order)."""
    if isinstance(path, list):
        if path and isinstance(path[0], StoragePath):
            return pq.read_table([p.path for p in path], filesystem=path[0].filesystem, **options)
        return pq.read_table([str(p) for p in path], **options)
    if isinstance(path, StoragePath):
        return pq.read_table(path.path, filesystem=path.filesystem, **options)
    return pq.read_table(path, **options)


def parquet_writer(path: Location, schema: pa.Schema, compression: str) -> pq.ParquetWriter:
    if isinstance(path, StoragePath):
        try:  # the first request that writes: a missing bucket, a denied write, ... surface here
            return pq.ParquetWriter(path.path, schema, filesystem=path.filesystem, compression=compression)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{path}: cannot write: {exc}") from None
    return pq.ParquetWriter(path, schema, compression=compression)


def require_local(path: str | Path | StoragePath, what: str) -> Path:
    """``path`` as a local ``Path``, or a clear error for a command that needs a local dataset."""
    found = location(path) if not isinstance(path, Path) else path
    if isinstance(found, StoragePath):
        raise DatasetPathError(
            f"{what}: {found} is not a local folder; this command works on local datasets "
            "only (copy the dataset to this machine first, e.g. `aws s3 sync`; `chunkyard run`, "
            "`diff` and `export` also read datasets on object stores)"
        )
    return found
