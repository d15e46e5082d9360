/* Kernels of the chunking core, in C, with no rule of their own: each is the Python function named
 * below, which is the reference (tests/core/test_packer_native.py holds them equal on generated input
 * and the corpora) and the fallback when this module is not built.
 *
 *   scan          findings._scan: move positions over a class of characters toward a bound, and
 *                 report those stopped by a character of another class
 *   after_last    findings._after_last: where the run after the last occurrence of a character
 *                 begins (a line's start), reported by the class of its first character
 *   containing    findings._containing: which intervals contain which points
 *   token_starts  units.TiktokenTokenizer.token_starts
 *   token_index   units.token_index: how many of a sorted int64 array lie below each position
 *   non_ascii_run packer.non_ascii_run: where the first run of so many non-ASCII code points starts
 *
 * The findings' rules (what a clean chunk start or end is, which cut splits a group) are in
 * chunking/findings.py; the character classes are a table Python builds (findings._class_table).
 * The greedy packer that lived here is gone: boundaries are chosen by the segmenter
 * (chunking/segmenter.py, its optimiser in chunking/_segment.c) and ``fixed`` is packed by
 * ``Packer._spans`` in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A list of ints (at < 0), or the field `at` of a list of tuples, as C integers (NULL with an exception
 * set on failure; free with PyMem_Free). */
static Py_ssize_t *to_array(PyObject *list, Py_ssize_t at, Py_ssize_t *n)
{
    *n = PyList_GET_SIZE(list);
    Py_ssize_t *out = PyMem_Malloc((*n > 0 ? *n : 1) * sizeof(Py_ssize_t));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (at >= 0) {
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) <= at) {
                PyErr_SetString(PyExc_TypeError, "points must be tuples holding the field");
                PyMem_Free(out);
                return NULL;
            }
            item = PyTuple_GET_ITEM(item, at);
        }
        out[i] = PyLong_AsSsize_t(item);
        if (out[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

static int append_int(PyObject *list, Py_ssize_t value)
{
    PyObject *number = PyLong_FromSsize_t(value);
    if (number == NULL)
        return -1;
    int status = PyList_Append(list, number);
    Py_DECREF(number);
    return status;
}

/* -- scan (findings._scan) ------------------------------------------------------------------------ */

/* The class of code point c in the table (0 past its end). */
#define CLASS(c) ((Py_ssize_t)(c) < size ? classes[(c)] : 0)

/* Move p toward bound while the character passed has ((class & mask) != 0) == over. */
#define MOVE(NAME, TYPE)                                                                                          \
    static Py_ssize_t NAME(const void *data, Py_ssize_t p, Py_ssize_t bound, const unsigned char *classes,        \
                           Py_ssize_t size, int mask, int over, int backward)                                     \
    {                                                                                                             \
        const TYPE *text = data;                                                                                  \
        if (backward) {                                                                                           \
            while (p > bound && ((CLASS(text[p - 1]) & mask) != 0) == over)                                       \
                p--;                                                                                              \
        } else {                                                                                                  \
            while (p < bound && ((CLASS(text[p]) & mask) != 0) == over)                                           \
                p++;                                                                                              \
        }                                                                                                         \
        return p;                                                                                                 \
    }
MOVE(move_ucs1, Py_UCS1)
MOVE(move_ucs2, Py_UCS2)
MOVE(move_ucs4, Py_UCS4)

/* scan(text, records, field, reach, table, mask, over, backward, test, want) -> [k, stop, ...]: each
 * records[k][field] moved toward a bound `reach` away (clipped to the text) while the character passed
 * has bool(class & mask) == over (backward: the character before the position); (k, stop) is reported
 * when the character that stopped the move (none, at the bound: class 0) has bool(class & test) ==
 * want; the pairs are flat (ints only: nothing for the garbage collector). */
/* records[k][field] as a position of the text (0..length), or -1 with an exception set. */
static int record_position(PyObject *record, Py_ssize_t field, Py_ssize_t length, Py_ssize_t *out)
{
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) <= field) {
        PyErr_SetString(PyExc_TypeError, "records must be tuples holding the field");
        return -1;
    }
    Py_ssize_t p = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, field));
    if (p == -1 && PyErr_Occurred())
        return -1;
    if (p < 0 || p > length) {
        PyErr_SetString(PyExc_IndexError, "a position lies outside the text");
        return -1;
    }
    *out = p;
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    PyObject *text, *records;
    Py_ssize_t field, reach;
    Py_buffer table;
    int mask, over, backward, test, want;
    if (!PyArg_ParseTuple(args, "UO!nny*ippip", &text, &PyList_Type, &records, &field, &reach, &table, &mask,
                          &over, &backward, &test, &want))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto done;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), size = table.len, n = PyList_GET_SIZE(records);
    const unsigned char *classes = table.buf;
    if (reach < 0 || field < 0) {
        PyErr_SetString(PyExc_ValueError, "field and reach must not be negative");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *record = PyList_GET_ITEM(records, k);
        Py_ssize_t p;
        if (record_position(record, field, length, &p) < 0)
            goto fail;
        Py_ssize_t bound = backward ? (p - reach > 0 ? p - reach : 0) : (reach < length - p ? p + reach : length);
        switch (kind) { /* the same loop for each width of the text's code units */
        case PyUnicode_1BYTE_KIND:
            p = move_ucs1(data, p, bound, classes, size, mask, over, backward);
            break;
        case PyUnicode_2BYTE_KIND:
            p = move_ucs2(data, p, bound, classes, size, mask, over, backward);
            break;
        default:
            p = move_ucs4(data, p, bound, classes, size, mask, over, backward);
        }
        int seen = 0; /* the class of the character that stopped the move */
        if (backward && p > bound)
            seen = CLASS(PyUnicode_READ(kind, data, p - 1));
        else if (!backward && p < bound)
            seen = CLASS(PyUnicode_READ(kind, data, p));
        if (((seen & test) != 0) == want && (append_int(out, k) < 0 || append_int(out, p) < 0))
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&table);
    return out;
}

/* -- after_last (findings._after_last) ------------------------------------------------------------ */

/* after_last(text, records, field, reach, char, table, test, want) -> [k, start, ...]: the position after
 * the last `char` within `reach` before each records[k][field] (the bound when there is none), reported
 * when a character follows it before records[k][field] and that character's class has bool(class & test)
 * == want; flat pairs, as scan's. */
static PyObject *after_last(PyObject *self, PyObject *args)
{
    PyObject *text, *records;
    Py_ssize_t field, reach;
    int ch, test, want;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "UO!nnCy*ip", &text, &PyList_Type, &records, &field, &reach, &ch, &table, &test,
                          &want))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto done;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), size = table.len, n = PyList_GET_SIZE(records);
    const unsigned char *classes = table.buf;
    if (reach < 0 || field < 0) {
        PyErr_SetString(PyExc_ValueError, "field and reach must not be negative");
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *record = PyList_GET_ITEM(records, k);
        Py_ssize_t end;
        if (record_position(record, field, length, &end) < 0)
            goto fail;
        Py_ssize_t low = end - reach > 0 ? end - reach : 0;
        Py_ssize_t found = low < end ? PyUnicode_FindChar(text, (Py_UCS4)ch, low, end, -1) : -1;
        if (found == -2)
            goto fail;
        Py_ssize_t start = found >= 0 ? found + 1 : low;
        if (start < end && ((CLASS(PyUnicode_READ(kind, data, start)) & test) != 0) == want
                && (append_int(out, k) < 0 || append_int(out, start) < 0))
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&table);
    return out;
}

/* -- containing (findings._containing) ------------------------------------------------------------ */

typedef struct {
    Py_ssize_t value, index;
} Point;

static int compare_points(const void *a, const void *b) /* by value, then index: a stable order */
{
    const Point *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

typedef struct {
    Py_ssize_t point, record;
} Pair;

static int compare_pairs(const void *a, const void *b)
{
    const Pair *x = a, *y = b;
    if (x->point != y->point)
        return x->point < y->point ? -1 : 1;
    return x->record < y->record ? -1 : x->record > y->record;
}

/* containing(points, at, records, low, high) -> [i, j, ...]: the pairs (flat) with records[j][low] < p <
 * records[j][high] for p = points[i] (ints), or points[i][at] when at >= 0 (tuples), sorted; records are
 * tuples of ints at those fields. */
static PyObject *containing(PyObject *self, PyObject *args)
{
    PyObject *points_list, *records;
    Py_ssize_t at, low, high;
    if (!PyArg_ParseTuple(args, "O!nO!nn", &PyList_Type, &points_list, &at, &PyList_Type, &records, &low, &high))
        return NULL;
    Py_ssize_t n;
    Py_ssize_t *values = to_array(points_list, at, &n);
    if (values == NULL)
        return NULL;
    PyObject *out = NULL;
    Pair *pairs = NULL;
    Py_ssize_t n_pairs = 0, room = 16;
    Point *points = PyMem_Malloc((n > 0 ? n : 1) * sizeof(Point));
    pairs = PyMem_Malloc(room * sizeof(Pair));
    if (points == NULL || pairs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        points[i].value = values[i];
        points[i].index = i;
    }
    qsort(points, (size_t)n, sizeof(Point), compare_points);
    Py_ssize_t m = PyList_GET_SIZE(records);
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *record = PyList_GET_ITEM(records, j);
        if (!PyTuple_Check(record) || low < 0 || high < 0 || PyTuple_GET_SIZE(record) <= low
                || PyTuple_GET_SIZE(record) <= high) {
            PyErr_SetString(PyExc_TypeError, "records must be tuples holding the low and high fields");
            goto done;
        }
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, low));
        Py_ssize_t b = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, high));
        if ((a == -1 || b == -1) && PyErr_Occurred())
            goto done;
        /* the first point above a, then the points below b */
        Py_ssize_t lo = 0, hi = n;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (points[mid].value <= a)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (Py_ssize_t k = lo; k < n && points[k].value < b; k++) {
            if (n_pairs == room) {
                room *= 2;
                Pair *grown = PyMem_Realloc(pairs, room * sizeof(Pair));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                pairs = grown;
            }
            pairs[n_pairs].point = points[k].index;
            pairs[n_pairs].record = j;
            n_pairs++;
        }
    }
    qsort(pairs, (size_t)n_pairs, sizeof(Pair), compare_pairs);
    out = PyList_New(2 * n_pairs);
    if (out == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n_pairs; k++) {
        PyObject *i = PyLong_FromSsize_t(pairs[k].point), *j = PyLong_FromSsize_t(pairs[k].record);
        if (i == NULL || j == NULL) {
            Py_XDECREF(i);
            Py_XDECREF(j);
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, 2 * k, i);
        PyList_SET_ITEM(out, 2 * k + 1, j);
    }
done:
    PyMem_Free(values);
    PyMem_Free(points);
    PyMem_Free(pairs);
    return out;
}

/* -- token starts (units.TiktokenTokenizer.token_starts) ---------------------------------------- */

/* token_starts(text, ids, byte_lengths) -> bytes of int64: the character offset at which each token
 * starts, a token that starts inside a character's UTF-8 bytes counting from that character.
 * ids: the token ids (a list of ints); byte_lengths: int64 buffer, the UTF-8 length of each id. */
/* The character offsets of the tokens: one loop per string kind (the kind is not read per character).
 * A character's UTF-8 width is 1 below 0x80, 2 below 0x800, 3 below 0x10000, else 4; the character
 * holding byte `byte` is found by walking forward from the one holding the previous token's start. */
#define TOKEN_STARTS(NAME, TYPE)                                                                                  \
    static int NAME(const void *data, Py_ssize_t length, PyObject *ids, const long long *length_of,              \
                    Py_ssize_t n_lengths, long long *result)                                                      \
    {                                                                                                             \
        const TYPE *text = data;                                                                                  \
        Py_ssize_t n = PyList_GET_SIZE(ids), character = 0;                                                       \
        long long byte = 0, character_byte = 0;                                                                   \
        for (Py_ssize_t k = 0; k < n; k++) {                                                                      \
            long id = PyLong_AsLong(PyList_GET_ITEM(ids, k));                                                     \
            if (id == -1 && PyErr_Occurred())                                                                     \
                return -1;                                                                                        \
            if (id < 0 || id >= n_lengths) {                                                                      \
                PyErr_SetString(PyExc_ValueError, "a token id has no byte length");                               \
                return -1;                                                                                        \
            }                                                                                                     \
            while (character < length) {                                                                          \
                Py_UCS4 c = text[character];                                                                      \
                int width = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;                                   \
                if (character_byte + width > byte)                                                                \
                    break;                                                                                        \
                character_byte += width;                                                                          \
                character++;                                                                                      \
            }                                                                                                     \
            result[k] = character;                                                                                \
            byte += length_of[id];                                                                                \
        }                                                                                                         \
        return 0;                                                                                                 \
    }
TOKEN_STARTS(token_starts_ucs1, Py_UCS1)
TOKEN_STARTS(token_starts_ucs2, Py_UCS2)
TOKEN_STARTS(token_starts_ucs4, Py_UCS4)

static PyObject *token_starts(PyObject *self, PyObject *args)
{
    PyObject *text, *ids;
    Py_buffer lengths;
    if (!PyArg_ParseTuple(args, "UO!y*", &text, &PyList_Type, &ids, &lengths))
        return NULL;
    PyObject *out = NULL;
    if (lengths.len % 8) {
        PyErr_SetString(PyExc_TypeError, "byte_lengths must be an int64 buffer");
        goto done;
    }
    const long long *length_of = lengths.buf;
    Py_ssize_t n_lengths = lengths.len / 8, n = PyList_GET_SIZE(ids);
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        goto done;
    long long *result = (long long *)PyBytes_AS_STRING(out);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int status;
    if (PyUnicode_IS_ASCII(text)) { /* a byte is a character */
        long long byte = 0;
        status = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            long id = PyLong_AsLong(PyList_GET_ITEM(ids, k));
            if (id == -1 && PyErr_Occurred()) {
                status = -1;
                break;
            }
            if (id < 0 || id >= n_lengths) {
                PyErr_SetString(PyExc_ValueError, "a token id has no byte length");
                status = -1;
                break;
            }
            result[k] = byte;
            byte += length_of[id];
        }
    } else if (kind == PyUnicode_1BYTE_KIND) {
        status = token_starts_ucs1(data, length, ids, length_of, n_lengths, result);
    } else if (kind == PyUnicode_2BYTE_KIND) {
        status = token_starts_ucs2(data, length, ids, length_of, n_lengths, result);
    } else {
        status = token_starts_ucs4(data, length, ids, length_of, n_lengths, result);
    }
    if (status == 0)
        goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&lengths);
    return out;
}

/* -- token index (units.token_index) ------------------------------------------------------------ */

/* The first index in [lo, n) whose value is not below x (every value before lo is below x): galloping
 * from lo, then halving, so that sorted queries cost the log of the distance between them. */
static Py_ssize_t lower_bound(const long long *starts, Py_ssize_t n, long long x, Py_ssize_t lo)
{
    Py_ssize_t step = 1, hi = lo;
    while (hi < n && starts[hi] < x) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > n)
        hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (starts[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* token_index(starts, query) -> int or [int]: bisect_left of the query (an int, or each int of a list)
 * in starts (bytes of sorted int64). */
static PyObject *token_index(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "token_index(starts: bytes, query: int | list[int])");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (size % 8) {
        PyErr_SetString(PyExc_TypeError, "starts must be bytes of int64");
        return NULL;
    }
    const long long *starts = (const long long *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = size / 8;
    PyObject *query = args[1];
    if (PyLong_Check(query)) {
        long long x = PyLong_AsLongLong(query);
        if (x == -1 && PyErr_Occurred())
            return NULL;
        return PyLong_FromSsize_t(lower_bound(starts, n, x, 0));
    }
    if (!PyList_Check(query)) {
        PyErr_SetString(PyExc_TypeError, "the query must be an int or a list of ints");
        return NULL;
    }
    Py_ssize_t m = PyList_GET_SIZE(query);
    PyObject *out = PyList_New(m);
    if (out == NULL)
        return NULL;
    long long previous = 0;
    Py_ssize_t found = 0; /* the answer for the query before: where a query not below it starts looking */
    for (Py_ssize_t k = 0; k < m; k++) {
        long long x = PyLong_AsLongLong(PyList_GET_ITEM(query, k));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        found = lower_bound(starts, n, x, k > 0 && x >= previous ? found : 0);
        previous = x;
        PyObject *index = PyLong_FromSsize_t(found);
        if (index == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, index);
    }
    return out;
}

/* -- non_ascii_run (packer.non_ascii_run) -------------------------------------------------------- */

/* The first run in chars[start:end) (a TYPE array), returned from the kernel; with MASK (a uint64 of
 * 8 / sizeof(TYPE) code units with their bits above 0x7f set, 0: none), a word of code units all ASCII is
 * passed over at once while no run is open. */
#define FIRST_RUN(TYPE, MASK)                                                                            \
    do {                                                                                                 \
        const TYPE *chars = data;                                                                        \
        const Py_ssize_t per_word = (Py_ssize_t)(8 / sizeof(TYPE));                                      \
        Py_ssize_t run = 0;                                                                              \
        for (Py_ssize_t i = start; i < end;) {                                                           \
            if ((MASK) != 0 && run == 0 && i + per_word <= end) {                                        \
                uint64_t word;                                                                           \
                memcpy(&word, chars + i, 8);                                                             \
                if ((word & (uint64_t)(MASK)) == 0) {                                                    \
                    i += per_word;                                                                       \
                    continue;                                                                            \
                }                                                                                        \
            }                                                                                            \
            if (chars[i] > 0x7f) {                                                                       \
                if (++run >= least)                                                                      \
                    return PyLong_FromSsize_t(i - least + 1);                                            \
            } else {                                                                                     \
                run = 0;                                                                                 \
            }                                                                                            \
            i++;                                                                                         \
        }                                                                                                \
    } while (0)

/* non_ascii_run(text, start, end, least) -> int: where the first run of at least `least` (>= 1)
 * consecutive code points above U+007F in text[start:end] begins, or -1 (0 <= start, end <= len(text)). */
static PyObject *non_ascii_run(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t start, end, least;
    if (!PyArg_ParseTuple(args, "Unnn", &text, &start, &end, &least))
        return NULL;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (least < 1 || start < 0 || end > length) {
        PyErr_SetString(PyExc_ValueError, "non_ascii_run: least >= 1 and 0 <= start, end <= len(text)");
        return NULL;
    }
    const void *data = PyUnicode_DATA(text);
    if (!PyUnicode_IS_ASCII(text)) {
        switch (PyUnicode_KIND(text)) {
        case PyUnicode_1BYTE_KIND:
            FIRST_RUN(Py_UCS1, 0x8080808080808080ULL);
            break;
        case PyUnicode_2BYTE_KIND:
            FIRST_RUN(Py_UCS2, 0xFF80FF80FF80FF80ULL);
            break;
        default:
            FIRST_RUN(Py_UCS4, 0);
        }
    }
    return PyLong_FromLong(-1);
}

static PyMethodDef methods[] = {
    {"token_index", (PyCFunction)(void (*)(void))token_index, METH_FASTCALL,
     "token_index(starts, query) -> int or [int]: bisect_left in bytes of sorted int64; see units.token_index"},
    {"token_starts", token_starts, METH_VARARGS,
     "token_starts(text, ids, byte_lengths) -> bytes of int64 character offsets; see chunking/units.py"},
    {"scan", scan, METH_VARARGS,
     "scan(text, records, field, reach, table, mask, over, backward, test, want) -> [k, stop, ...]; "
     "see findings._scan"},
    {"after_last", after_last, METH_VARARGS,
     "after_last(text, records, field, reach, char, table, test, want) -> [k, start, ...]; "
     "see findings._after_last"},
    {"containing", containing, METH_VARARGS,
     "containing(points, at, records, low, high) -> [i, j, ...]; see findings._containing"},
    {"non_ascii_run", non_ascii_run, METH_VARARGS,
     "non_ascii_run(text, start, end, least) -> int; see packer.non_ascii_run"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "chunkyard.chunking._pack", "Kernels of chunking over arrays, in C (no rules).", -1, methods,
};

PyMODINIT_FUNC PyInit__pack(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", CHUNKYARD_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
