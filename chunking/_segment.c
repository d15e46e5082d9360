/* The global segmenter's kernels in C: segmenter.best_predecessors, cut_candidates, trim_ends,
 * lookup, skip_spaces, class_ends, class_positions, wide_gaps,
 * window_extra, line_heads, merge_levels, first_in_ranges, text_spans, live_spans, fit_sizes and
 * capped_intervals (chunking/segmenter.py), which stay the reference and the fallback
 * (tests/core/test_segmenter.py holds each pair equal). Generic work over integer arrays and the
 * text's characters (white space, code point ranges and character classes the Python reads from the
 * levels' patterns) with no rule of their own: every price, interval, score and class is computed in
 * Python and passed in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef long long i64;

static const i64 UNREACHABLE = (i64)1 << 62;

/* A Python sequence of ints as a new C array (NULL and an exception on failure). */
/* The value of an exact int of one digit (any position or size here: below 2**30) without the call to
 * PyLong_AsLongLong (a tenth of converting the kernels' arrays), by the unstable API of Python 3.12 and
 * later or the digit itself before; 0 for anything else, which PyLong_AsLongLong converts. */
static inline int compact_int(PyObject *object, i64 *value)
{
    if (!PyLong_CheckExact(object))
        return 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Long_IsCompact((PyLongObject *)object))
        return 0;
    *value = (i64)PyUnstable_Long_CompactValue((PyLongObject *)object);
    return 1;
#else
    Py_ssize_t size = Py_SIZE(object);
    if (size < -1 || size > 1)
        return 0;
    *value = size * (i64)((PyLongObject *)object)->ob_digit[0];
    return 1;
#endif
}

static i64 *as_array(PyObject *seq, Py_ssize_t n, const char *name)
{
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL)
        return NULL;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: expected %zd values", name, n);
        return NULL;
    }
    i64 *out = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (compact_int(items[k], &out[k]))
            continue;
        out[k] = PyLong_AsLongLong(items[k]);
        if (out[k] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    return out;
}

static PyObject *best_predecessors(PyObject *self, PyObject *args)
{
    PyObject *objects[8];
    long long max_allowance, min_size, chunk_price, price_no_overlap, price_undersized, price_over_budget;
    if (!PyArg_ParseTuple(args, "OOOOOOOOLLLLLL", &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4], &objects[5], &objects[6], &objects[7], &max_allowance, &min_size,
                          &chunk_price, &price_no_overlap, &price_undersized, &price_over_budget))
        return NULL;
    static const char *NAMES[] = {"heads", "tails", "prices", "inside_head", "inside_tail", "floors", "allowances",
                                  "fulls"};
    Py_ssize_t n = PySequence_Size(objects[0]);
    if (n < 0)
        return NULL;
    i64 *a[8] = {NULL};
    i64 *best = NULL, *previous = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < 8; k++)
        if ((a[k] = as_array(objects[k], n, NAMES[k])) == NULL)
            goto done;
    best = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    previous = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (best == NULL || previous == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    i64 *heads = a[0], *tails = a[1], *prices = a[2], *inside_head = a[3], *inside_tail = a[4], *floors = a[5],
        *allowances = a[6], *fulls = a[7];
    for (Py_ssize_t j = 0; j < n; j++) {
        best[j] = UNREACHABLE;
        previous[j] = -1;
    }
    if (n > 0)
        best[0] = 0;
    for (Py_ssize_t j = 1; j < n; j++) {
        i64 tail = tails[j], inside = inside_tail[j], floor = floors[j];
        i64 here = chunk_price + prices[j];
        i64 chosen = -1, cost = UNREACHABLE;
        for (Py_ssize_t i = j - 1; i >= floor; i--) {
            i64 size = tail - heads[i];
            if (size > max_allowance)
                break;
            if (best[i] < UNREACHABLE && (size <= allowances[i] || size <= fulls[i])) {
                i64 total = best[i] + here + inside - inside_head[i];
                if (size > allowances[i])
                    total += price_no_overlap;
                if (size < min_size)
                    total += price_undersized;
                if (total < cost) {
                    chosen = i;
                    cost = total;
                }
            }
        }
        if (chosen < 0 && j - 1 >= floor && best[j - 1] < UNREACHABLE) {
            chosen = j - 1;
            cost = best[j - 1] + here + price_over_budget;
        }
        best[j] = cost;
        previous[j] = chosen;
    }
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *value = PyLong_FromLongLong(previous[j]);
        if (value == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, value);
    }
done:
    for (int k = 0; k < 8; k++)
        PyMem_Free(a[k]);
    PyMem_Free(best);
    PyMem_Free(previous);
    return result;
}


/* The first index k with a[k] >= x (a sorted). */
static Py_ssize_t lower_bound(const i64 *a, Py_ssize_t n, i64 x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first index k with a[k] > x (a sorted). */
static Py_ssize_t upper_bound(const i64 *a, Py_ssize_t n, i64 x)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* UCS-2 searches for one code unit, four at a time: a word of four code units holds `ch` when the word
 * XOR four copies of it has a zero lane (the classic test, exact for "some lane is zero"); the lane is
 * then found one by one. The first position in [pos, high) holding ch (high when none), and the last in
 * [from, to) (-1 when none). */
static const uint64_t LANES_ONE = 0x0001000100010001ULL, LANES_HIGH = 0x8000800080008000ULL;

static inline int has_ucs2(const Py_UCS2 *chars, i64 at, uint64_t pattern)
{
    uint64_t word;
    memcpy(&word, chars + at, 8);
    word ^= pattern;
    return ((word - LANES_ONE) & ~word & LANES_HIGH) != 0;
}

static i64 find_ucs2(const Py_UCS2 *chars, i64 pos, i64 high, Py_UCS2 ch)
{
    uint64_t pattern = LANES_ONE * ch;
    while (pos + 4 <= high && !has_ucs2(chars, pos, pattern))
        pos += 4;
    while (pos < high && chars[pos] != ch)
        pos++;
    return pos;
}

static i64 rfind_ucs2(const Py_UCS2 *chars, i64 from, i64 to, Py_UCS2 ch)
{
    uint64_t pattern = LANES_ONE * ch;
    while (to - 4 >= from && !has_ucs2(chars, to - 4, pattern))
        to -= 4;
    for (i64 x = to - 1; x >= from; x--)
        if (chars[x] == ch)
            return x;
    return -1;
}

static PyObject *list_of(const i64 *values, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *value = PyLong_FromLongLong(values[k]);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, value);
    }
    return out;
}

/* A tuple of count new lists, the k-th of arrays[k][0..sizes[k]); NULL and an exception on failure. */
static PyObject *tuple_of_lists(int count, const i64 *const arrays[], const Py_ssize_t sizes[])
{
    PyObject *out = PyTuple_New(count);
    if (out == NULL)
        return NULL;
    for (int k = 0; k < count; k++) {
        PyObject *list = list_of(arrays[k], sizes[k]);
        if (list == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, list);
    }
    return out;
}

/* The tuple (list of a[0..na), list of b[0..nb)). */
static PyObject *pair_of_lists(const i64 *a, Py_ssize_t na, const i64 *b, Py_ssize_t nb)
{
    const i64 *arrays[2] = {a, b};
    const Py_ssize_t sizes[2] = {na, nb};
    return tuple_of_lists(2, arrays, sizes);
}

/* Moving positions back over white space (not below a fixed low): a walk that reaches the position
 * the previous walk started from takes that walk's answer, so positions in order inside one long run
 * of white space cost the run once, not once each. raw -1: no walk yet. */
typedef struct {
    i64 raw, trimmed;
} TrimMemo;

static i64 trim_back(int kind, const void *data, i64 pos, i64 low, TrimMemo *memo)
{
    i64 raw = pos;
    while (pos > low) {
        if (pos == memo->raw) {
            pos = memo->trimmed;
            break;
        }
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, pos - 1)))
            break;
        pos--;
    }
    memo->raw = raw;
    memo->trimmed = pos;
    return pos;
}

/* Moving positions on over white space up to a bound: [raw, reached) is known to be white space, so a
 * walk from a position inside it starts at reached (or the bound, if lower). raw -1: no walk yet. */
typedef struct {
    i64 raw, reached;
} SkipMemo;

static i64 skip_forward(int kind, const void *data, i64 pos, i64 bound, SkipMemo *memo)
{
    i64 first = pos;
    if (pos < bound && memo->raw >= 0 && memo->raw <= pos && pos < memo->reached)
        first = memo->reached < bound ? memo->reached : bound;
    while (first < bound && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, first)))
        first++;
    memo->raw = pos;
    memo->reached = first;
    return first;
}

/* Whether text[a:b] holds a character str.isspace() rejects. */
static int has_text(int kind, const void *data, Py_ssize_t length, i64 a, i64 b)
{
    if (a < 0)
        a = 0;
    if (b > length)
        b = length;
    for (i64 k = a; k < b; k++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, k)))
            return 1;
    return 0;
}

/* cut_candidates(text, positions, scores, extra, score_prices, intervals, forbidden, free_score, end) */
static PyObject *cut_candidates(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[6];
    long long free_score, end;
    if (!PyArg_ParseTuple(args, "UOOOOOOLL", &text, &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4], &objects[5], &free_score, &end))
        return NULL;
    static const char *NAMES[] = {"positions", "scores", "extra", "score_prices", "intervals", "forbidden"};
    Py_ssize_t sizes[6];
    for (int k = 0; k < 6; k++)
        if ((sizes[k] = PySequence_Size(objects[k])) < 0)
            return NULL;
    Py_ssize_t n = sizes[0];
    if (sizes[1] != n || sizes[2] != n || sizes[3] < 1 || sizes[4] % 3 || sizes[5] % 2) {
        PyErr_SetString(PyExc_ValueError, "cut_candidates: inconsistent array sizes");
        return NULL;
    }
    i64 *a[6] = {NULL};
    i64 *add = NULL, *ban = NULL, *cuts = NULL, *prices = NULL, *kept = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < 6; k++)
        if ((a[k] = as_array(objects[k], sizes[k], NAMES[k])) == NULL)
            goto done;
    add = PyMem_Calloc((size_t)n + 1, sizeof(i64));
    ban = PyMem_Calloc((size_t)n + 1, sizeof(i64));
    cuts = PyMem_Malloc(sizeof(i64) * ((size_t)n + 1));
    prices = PyMem_Malloc(sizeof(i64) * ((size_t)n + 1));
    kept = PyMem_Malloc(sizeof(i64) * ((size_t)n + 1));
    if (add == NULL || ban == NULL || cuts == NULL || prices == NULL || kept == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const i64 *positions = a[0], *scores = a[1], *extra = a[2], *score_prices = a[3];
    for (Py_ssize_t k = 0; k < sizes[4]; k += 3) {
        Py_ssize_t lo = lower_bound(positions, n, a[4][k]), hi = lower_bound(positions, n, a[4][k + 1]);
        if (lo < hi) {
            add[lo] += a[4][k + 2];
            add[hi] -= a[4][k + 2];
        }
    }
    for (Py_ssize_t k = 0; k < sizes[5]; k += 2) {
        Py_ssize_t lo = lower_bound(positions, n, a[5][k]), hi = lower_bound(positions, n, a[5][k + 1]);
        if (lo < hi) {
            ban[lo] += 1;
            ban[hi] -= 1;
        }
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), top = sizes[3] - 1, m = 0;
    i64 running = 0, banned = 0, clean = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        running += add[k];
        banned += ban[k];
        i64 pos = positions[k], score = scores[k], price;
        if (score >= free_score || pos >= end)
            price = 0;
        else if (banned)
            continue;
        else
            price = score_prices[score < 0 ? 0 : score > top ? top : score] + extra[k] + running;
        /* [cuts[m - 1], clean) is white space already read: a long run of candidates is read once. */
        if (m > 0 && !has_text(kind, data, length, clean, pos)) {
            clean = pos;
            if (kept[m - 1] >= free_score || (score < free_score && price > prices[m - 1]))
                continue;
            cuts[m - 1] = pos;
            prices[m - 1] = price;
            kept[m - 1] = score;
            continue;
        }
        clean = pos;
        cuts[m] = pos;
        prices[m] = price;
        kept[m] = score;
        m++;
    }
    if (m == 0 || cuts[m - 1] != end) {
        cuts[m] = end;
        prices[m] = 0;
        kept[m] = 1000;
        m++;
    }
    const i64 *lists[3] = {cuts, prices, kept};
    const Py_ssize_t lengths[3] = {m, m, m};
    result = tuple_of_lists(3, lists, lengths);
done:
    for (int k = 0; k < 6; k++)
        PyMem_Free(a[k]);
    PyMem_Free(add);
    PyMem_Free(ban);
    PyMem_Free(cuts);
    PyMem_Free(prices);
    PyMem_Free(kept);
    return result;
}

/* trim_ends(text, positions, low) */
static PyObject *trim_ends(PyObject *self, PyObject *args)
{
    PyObject *text, *seq;
    long long low;
    if (!PyArg_ParseTuple(args, "UOL", &text, &seq, &low))
        return NULL;
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0)
        return NULL;
    i64 *positions = as_array(seq, n, "positions");
    if (positions == NULL)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    TrimMemo trim = {-1, 0};
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 pos = positions[k];
        if (pos > length) {
            PyMem_Free(positions);
            PyErr_SetString(PyExc_IndexError, "trim_ends: a position past the text");
            return NULL;
        }
        pos = trim_back(kind, data, pos, low, &trim);
        positions[k] = pos;
    }
    PyObject *out = list_of(positions, n);
    PyMem_Free(positions);
    return out;
}

/* lookup(keys, values, queries, right); values None: the index itself */
static PyObject *lookup(PyObject *self, PyObject *args)
{
    PyObject *objects[3];
    int right;
    if (!PyArg_ParseTuple(args, "OOOp", &objects[0], &objects[1], &objects[2], &right))
        return NULL;
    Py_ssize_t n_keys = PySequence_Size(objects[0]), n_queries = PySequence_Size(objects[2]);
    if (n_keys < 0 || n_queries < 0)
        return NULL;
    i64 *keys = as_array(objects[0], n_keys, "keys"), *values = NULL, *queries = NULL;
    PyObject *out = NULL;
    if (keys == NULL)
        goto done;
    if (objects[1] != Py_None && (values = as_array(objects[1], n_keys + 1, "values")) == NULL)
        goto done;
    if ((queries = as_array(objects[2], n_queries, "queries")) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n_queries; k++) {
        Py_ssize_t at = right ? upper_bound(keys, n_keys, queries[k]) : lower_bound(keys, n_keys, queries[k]);
        queries[k] = values != NULL ? values[at] : at;
    }
    out = list_of(queries, n_queries);
done:
    PyMem_Free(keys);
    PyMem_Free(values);
    PyMem_Free(queries);
    return out;
}

/* first_in_ranges(text, ranges, start, end): the first index in [start, end) whose code point lies in
 * one of the ranges (flat pairs lo, hi, inclusive), else -1. */
static PyObject *first_in_ranges(PyObject *self, PyObject *args)
{
    PyObject *text, *seq;
    long long start, end;
    if (!PyArg_ParseTuple(args, "UOLL", &text, &seq, &start, &end))
        return NULL;
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0)
        return NULL;
    if (n % 2) {
        PyErr_SetString(PyExc_ValueError, "first_in_ranges: ranges are pairs");
        return NULL;
    }
    i64 *ranges = as_array(seq, n, "ranges");
    if (ranges == NULL)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    i64 widest = kind == PyUnicode_1BYTE_KIND ? 0xFF : kind == PyUnicode_2BYTE_KIND ? 0xFFFF : 0x10FFFF;
    /* Only the ranges this text's characters can reach. */
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k < n; k += 2)
        if (ranges[k] <= widest && ranges[k] <= ranges[k + 1]) {
            ranges[m++] = ranges[k];
            ranges[m++] = ranges[k + 1];
        }
    if (start < 0)
        start = 0;
    if (end > length)
        end = length;
    i64 found = -1, points = 0;
    for (Py_ssize_t r = 0; r < m; r += 2)
        points += (ranges[r + 1] < widest ? ranges[r + 1] : widest) - ranges[r] + 1;
    if (kind == PyUnicode_1BYTE_KIND && points <= 8 && start < end) {
        /* A few code points in a one-byte text: memchr for each, the first found. */
        const Py_UCS1 *bytes = data;
        i64 stop = end;
        for (Py_ssize_t r = 0; r < m; r += 2)
            for (i64 code = ranges[r]; code <= ranges[r + 1] && code <= widest; code++) {
                const Py_UCS1 *at = memchr(bytes + start, (int)code, (size_t)(stop - start));
                if (at != NULL) {
                    stop = at - bytes;
                    found = stop;
                }
            }
    } else if (m == 2 || m == 4) {
        /* One or two ranges: a loop per character width, each range one unsigned comparison. */
        Py_UCS4 lo0 = (Py_UCS4)ranges[0], span0 = (Py_UCS4)(ranges[1] - ranges[0]);
        Py_UCS4 lo1 = m == 4 ? (Py_UCS4)ranges[2] : lo0, span1 = m == 4 ? (Py_UCS4)(ranges[3] - ranges[2]) : span0;
#define FIND_IN_RANGES(TYPE)                                                                       \
    do {                                                                                           \
        const TYPE *chars = data;                                                                  \
        i64 k = start;                                                                             \
        /* Blocks of 64 without a hit are passed over (a loop the compiler vectorises). */         \
        for (; k + 64 <= end; k += 64) {                                                           \
            int any = 0;                                                                           \
            for (int x = 0; x < 64; x++) {                                                         \
                Py_UCS4 code = chars[k + x];                                                       \
                any |= (code - lo0 <= span0) | (code - lo1 <= span1);                              \
            }                                                                                      \
            if (any)                                                                               \
                break;                                                                             \
        }                                                                                          \
        for (; k < end; k++) {                                                                     \
            Py_UCS4 code = chars[k];                                                               \
            if (code - lo0 <= span0 || code - lo1 <= span1) {                                      \
                found = k;                                                                         \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)
        if (kind == PyUnicode_1BYTE_KIND)
            FIND_IN_RANGES(Py_UCS1);
        else if (kind == PyUnicode_2BYTE_KIND)
            FIND_IN_RANGES(Py_UCS2);
        else
            FIND_IN_RANGES(Py_UCS4);
#undef FIND_IN_RANGES
    } else {
        /* Blocks of 64 whose characters all lie below the lowest range are passed over (a loop the
         * compiler vectorises); the characters of any other block are compared with the ranges. */
        Py_UCS4 lowest = m > 0 ? (Py_UCS4)ranges[0] : 0;
        for (Py_ssize_t r = 2; r < m; r += 2)
            if ((Py_UCS4)ranges[r] < lowest)
                lowest = (Py_UCS4)ranges[r];
#define FIND_ABOVE(TYPE)                                                                           \
    do {                                                                                           \
        const TYPE *chars = data;                                                                  \
        i64 k = start;                                                                             \
        while (k < end && found < 0) {                                                             \
            if (k + 64 <= end) {                                                                   \
                int any = 0;                                                                       \
                for (int x = 0; x < 64; x++)                                                       \
                    any |= chars[k + x] >= lowest;                                                 \
                if (!any) {                                                                        \
                    k += 64;                                                                       \
                    continue;                                                                      \
                }                                                                                  \
            }                                                                                      \
            for (i64 stop = k + 64 < end ? k + 64 : end; k < stop; k++) {                         \
                Py_UCS4 code = chars[k];                                                           \
                Py_ssize_t r = 0;                                                                  \
                while (r < m && !(code >= ranges[r] && code <= ranges[r + 1]))                     \
                    r += 2;                                                                        \
                if (r < m) {                                                                       \
                    found = k;                                                                     \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)
        if (m > 0 && kind == PyUnicode_1BYTE_KIND)
            FIND_ABOVE(Py_UCS1);
        else if (m > 0 && kind == PyUnicode_2BYTE_KIND)
            FIND_ABOVE(Py_UCS2);
        else if (m > 0)
            FIND_ABOVE(Py_UCS4);
#undef FIND_ABOVE
    }
    PyMem_Free(ranges);
    return PyLong_FromLongLong(found);
}

/* Whether a grapheme cluster boundary at pos is settled by the characters around it alone (as
 * Packer._is_cluster_boundary's first test: the text's ends, or ASCII on both sides not after a CR). */
static int settled(int kind, const void *data, Py_ssize_t length, i64 pos)
{
    if (pos <= 0 || pos >= length)
        return 1;
    Py_UCS4 here = PyUnicode_READ(kind, data, pos), before = PyUnicode_READ(kind, data, pos - 1);
    return here < 0x7f && before < 0x7f && before != '\r';
}

/* skip_spaces(text, positions, limit, max_indent, plain, verify_indent) -> (starts, unsure); limit is one
 * int or one per position. */
static PyObject *skip_spaces(PyObject *self, PyObject *args)
{
    PyObject *text, *seq, *limit_object;
    long long max_indent;
    int plain, verify_indent;
    if (!PyArg_ParseTuple(args, "UOOLpp", &text, &seq, &limit_object, &max_indent, &plain, &verify_indent))
        return NULL;
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0)
        return NULL;
    i64 one_limit = 0, *limits = NULL;
    if (PyLong_Check(limit_object)) {
        one_limit = PyLong_AsLongLong(limit_object);
        if (one_limit == -1 && PyErr_Occurred())
            return NULL;
    } else if ((limits = as_array(limit_object, n, "limits")) == NULL)
        return NULL;
    i64 *positions = as_array(seq, n, "positions");
    i64 *unsure = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (positions == NULL || unsure == NULL) {
        PyMem_Free(positions);
        PyMem_Free(unsure);
        PyMem_Free(limits);
        return positions == NULL ? NULL : PyErr_NoMemory();
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), m = 0;
    SkipMemo skip = {-1, 0};
    i64 run_first = -1, run_newline = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 pos = positions[k], first = pos, start, limit = limits != NULL ? limits[k] : one_limit;
        i64 bound = limit < length ? limit : length;
        if (pos < 0) {
            PyMem_Free(positions);
            PyMem_Free(unsure);
            PyMem_Free(limits);
            PyErr_SetString(PyExc_IndexError, "skip_spaces: a negative position");
            return NULL;
        }
        first = skip_forward(kind, data, pos, bound, &skip);
        if (first >= limit || first >= length) {
            start = pos > limit ? pos : limit;
            if (first < limit) { /* the text ends before the limit: only white space */
                start = first;
                unsure[m++] = k;
            }
        } else if (!plain && !settled(kind, data, length, first)) {
            start = first;
            unsure[m++] = k;
        } else if (first == pos) {
            start = pos;
        } else {
            /* The last line feed of the white space before first, found once per first: text[pos:first]
             * is white space, so the last line feed in it is that one when it is at or after pos. */
            if (first != run_first) {
                run_first = first;
                run_newline = -1;
                for (i64 x = first - 1; x >= 0; x--) {
                    Py_UCS4 c = PyUnicode_READ(kind, data, x);
                    if (c == '\n') {
                        run_newline = x;
                        break;
                    }
                    if (!Py_UNICODE_ISSPACE(c))
                        break;
                }
            }
            i64 line_start = run_newline >= pos ? run_newline + 1 : -1;
            if (line_start < 0)
                line_start = pos == 0 || PyUnicode_READ(kind, data, pos - 1) == '\n' ? pos : first;
            start = line_start < first && first - line_start <= max_indent ? line_start : first;
            if (start < first && verify_indent)
                unsure[m++] = k;
        }
        positions[k] = start;
    }
    PyObject *result = pair_of_lists(positions, n, unsure, m);
    PyMem_Free(positions);
    PyMem_Free(unsure);
    PyMem_Free(limits);
    return result;
}

/* A level's pattern as data (segmenter.level_spec): items in order, each a character class repeated
 * min..max times (max -1: unbounded), matched greedily; the class is negate, then terms (kind, lo, hi):
 * kind 0 the code points lo..hi, 1 white space (str.isspace, re's \s), 2 not white space. */
typedef struct {
    i64 min, max, negate, nterms;
    const i64 *terms;
    unsigned char ascii[128]; /* in_class + 1 of each ASCII character read so far in this call (0: not yet; ``clear_ascii``) */
} Item;

/* Whether c is in the item's class, by its terms. */
static int class_terms(const Item *item, Py_UCS4 c)
{
    int inside = 0;
    for (i64 t = 0; t < item->nterms && !inside; t++) {
        i64 kind = item->terms[3 * t], lo = item->terms[3 * t + 1], hi = item->terms[3 * t + 2];
        if (kind == 0)
            inside = c >= lo && c <= hi;
        else if (kind == 1)
            inside = Py_UNICODE_ISSPACE(c);
        else
            inside = !Py_UNICODE_ISSPACE(c);
    }
    return item->negate ? !inside : inside;
}

/* The item's ASCII memo, empty (filled as characters are met: a call reads each once). */
static void clear_ascii(Item *item)
{
    memset(item->ascii, 0, sizeof item->ascii);
}

static inline int in_class(Item *item, Py_UCS4 c)
{
    if (c >= 128)
        return class_terms(item, c);
    unsigned char *memo = &item->ascii[c];
    if (*memo == 0)
        *memo = (unsigned char)(class_terms(item, c) + 1);
    return *memo - 1;
}

/* The end of the match at pos (no later than end), or -1. */
static i64 match_at(int kind, const void *data, Item *items, Py_ssize_t n_items, i64 pos, i64 end)
{
    for (Py_ssize_t k = 0; k < n_items; k++) {
        i64 count = 0;
        while ((items[k].max < 0 || count < items[k].max) && pos < end &&
               in_class(&items[k], PyUnicode_READ(kind, data, pos))) {
            pos++;
            count++;
        }
        if (count < items[k].min)
            return -1;
    }
    return pos;
}

/* match_at for positions in order (class_positions tries every character of a run): when the first
 * item repeats without a bound, a match from inside the run the last one's first item took, leaving it at
 * least its minimum, takes the same way from the run's end, so its answer is that match's. from -1: none. */
typedef struct {
    i64 from, run_end, end, result;
} MatchMemo;

static i64 match_memo(int kind, const void *data, Item *items, Py_ssize_t n_items, i64 pos, i64 end,
                      MatchMemo *memo)
{
    if (n_items == 0 || items[0].max >= 0)
        return match_at(kind, data, items, n_items, pos, end);
    if (memo->from >= 0 && memo->end == end && memo->from <= pos && pos <= memo->run_end &&
        memo->run_end - pos >= items[0].min)
        return memo->result;
    i64 run_end = pos;
    while (run_end < end && in_class(&items[0], PyUnicode_READ(kind, data, run_end)))
        run_end++;
    i64 result = run_end - pos < items[0].min ? -1 : match_at(kind, data, items + 1, n_items - 1, run_end, end);
    memo->from = pos;
    memo->run_end = run_end;
    memo->end = end;
    memo->result = result;
    return result;
}

/* The items of a spec (n_items, then per item min, max, negate, nterms, terms...), pointing into spec: a
 * new array (*out, *n_items), or -1 and an exception. */
static int read_items(const i64 *spec, Py_ssize_t size, const char *name, Item **out, Py_ssize_t *n_items)
{
    *out = NULL;
    *n_items = size > 0 ? (Py_ssize_t)spec[0] : 0;
    if (*n_items < 0 || (size > 0 && *n_items == 0)) {
        PyErr_Format(PyExc_ValueError, "%s: a spec without items", name);
        return -1;
    }
    Item *items = PyMem_Malloc(sizeof(Item) * (size_t)(*n_items > 0 ? *n_items : 1));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t at = 1;
    for (Py_ssize_t k = 0; k < *n_items; k++) {
        if (at + 4 > size) {
            PyMem_Free(items);
            PyErr_Format(PyExc_ValueError, "%s: a short spec", name);
            return -1;
        }
        items[k].min = spec[at];
        items[k].max = spec[at + 1];
        items[k].negate = spec[at + 2];
        items[k].nterms = spec[at + 3];
        items[k].terms = spec + at + 4;
        at += 4 + 3 * items[k].nterms;
        if (at > size || items[k].nterms < 0) {
            PyMem_Free(items);
            PyErr_Format(PyExc_ValueError, "%s: a short spec", name);
            return -1;
        }
        clear_ascii(&items[k]);
    }
    *out = items;
    return 0;
}

/* Whether x is in the sorted array a. */
static int contains(const i64 *a, Py_ssize_t n, i64 x)
{
    Py_ssize_t at = lower_bound(a, n, x);
    return at < n && a[at] == x;
}

/* class_ends(text, gaps, spec, taken, plain, step) -> (ends, unsure); an end is kept only step or more
 * after the one kept before it in its gap (the gap's low at first). */
static PyObject *class_ends(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[3];
    int plain;
    long long step;
    if (!PyArg_ParseTuple(args, "UOOOpL", &text, &objects[0], &objects[1], &objects[2], &plain, &step))
        return NULL;
    Py_ssize_t sizes[3];
    for (int k = 0; k < 3; k++)
        if ((sizes[k] = PySequence_Size(objects[k])) < 0)
            return NULL;
    if (sizes[0] % 2 || sizes[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "class_ends: gaps are pairs, spec is not empty");
        return NULL;
    }
    static const char *NAMES[] = {"gaps", "spec", "taken"};
    i64 *a[3] = {NULL};
    Item *items = NULL;
    i64 *ends = NULL, *unsure = NULL;
    Py_ssize_t n_ends = 0, n_unsure = 0, cap = 64;
    PyObject *result = NULL;
    for (int k = 0; k < 3; k++)
        if ((a[k] = as_array(objects[k], sizes[k], NAMES[k])) == NULL)
            goto done;
    const i64 *gaps = a[0], *spec = a[1], *taken = a[2];
    Py_ssize_t n_items;
    if (read_items(spec, sizes[1], "class_ends", &items, &n_items) < 0)
        goto done;
    if (items[0].min < 1) {
        PyErr_SetString(PyExc_ValueError, "class_ends: a spec that matches the empty string");
        goto done;
    }
    ends = PyMem_Malloc(sizeof(i64) * (size_t)cap);
    unsure = PyMem_Malloc(sizeof(i64) * (size_t)cap);
    if (ends == NULL || unsure == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    /* A first item that is one literal character: a match can only begin where it is. */
    int literal = items[0].nterms == 1 && !items[0].negate && items[0].terms[0] == 0 &&
                  items[0].terms[1] == items[0].terms[2];
    Py_UCS4 first = literal ? (Py_UCS4)items[0].terms[1] : 0;
    for (Py_ssize_t g = 0; g < sizes[0]; g += 2) {
        i64 low = gaps[g], high = gaps[g + 1] < length ? gaps[g + 1] : length, kept = low;
        i64 pos = low > 0 ? low - 1 : 0;
        while (pos < high) {
            if (literal) {
                if (kind == PyUnicode_1BYTE_KIND) {
                    const Py_UCS1 *bytes = data;
                    const Py_UCS1 *at = first > 0xFF ? NULL : memchr(bytes + pos, (int)first, (size_t)(high - pos));
                    pos = at == NULL ? high : at - bytes;
                } else if (kind == PyUnicode_2BYTE_KIND) {
                    pos = first > 0xFFFF ? high : find_ucs2(data, pos, high, (Py_UCS2)first);
                } else {
                    const Py_UCS4 *chars = data;
                    while (pos < high && chars[pos] != first)
                        pos++;
                }
                if (pos >= high)
                    break;
            }
            i64 end = match_at(kind, data, items, n_items, pos, high);
            if (end < 0) {
                pos++;
                continue;
            }
            if (low < end && end < high && end - kept >= step && !contains(taken, sizes[2], end)) {
                kept = end;
                if (n_ends == cap) {
                    cap *= 2;
                    i64 *grown = PyMem_Realloc(ends, sizeof(i64) * (size_t)cap);
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    ends = grown;
                    grown = PyMem_Realloc(unsure, sizeof(i64) * (size_t)cap);
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    unsure = grown;
                }
                if (!plain && !settled(kind, data, length, end))
                    unsure[n_unsure++] = n_ends;
                ends[n_ends++] = end;
            }
            pos = end > pos ? end : pos + 1;
        }
    }
    result = pair_of_lists(ends, n_ends, unsure, n_unsure);
done:
    for (int k = 0; k < 3; k++)
        PyMem_Free(a[k]);
    PyMem_Free(items);
    PyMem_Free(ends);
    PyMem_Free(unsure);
    return result;
}

/* wide_gaps(gaps, positions, scores, min_score, found, budget): inside each gap (low, high) (flat
 * pairs, sorted, disjoint), the points: the positions scored min_score or more and the found (both
 * sorted), with low and high; of each two consecutive points a, b, the pair when (b - a) * 4 > budget. */
static PyObject *wide_gaps(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    long long min_score, budget;
    if (!PyArg_ParseTuple(args, "OOOLOL", &objects[0], &objects[1], &objects[2], &min_score, &objects[3], &budget))
        return NULL;
    Py_ssize_t sizes[4];
    for (int k = 0; k < 4; k++)
        if ((sizes[k] = PySequence_Size(objects[k])) < 0)
            return NULL;
    if (sizes[0] % 2 || sizes[1] != sizes[2]) {
        PyErr_SetString(PyExc_ValueError, "wide_gaps: inconsistent array sizes");
        return NULL;
    }
    static const char *NAMES[] = {"gaps", "positions", "scores", "found"};
    i64 *a[4] = {NULL}, *out = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < 4; k++)
        if ((a[k] = as_array(objects[k], sizes[k], NAMES[k])) == NULL)
            goto done;
    const i64 *gaps = a[0], *positions = a[1], *scores = a[2], *found = a[3];
    Py_ssize_t n_pos = sizes[1], n_found = sizes[3], m = 0;
    out = PyMem_Malloc(sizeof(i64) * (size_t)(2 * (sizes[0] / 2 + n_pos + n_found) + 2));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t g = 0; g < sizes[0]; g += 2) {
        i64 low = gaps[g], high = gaps[g + 1], last = low;
        Py_ssize_t i = upper_bound(positions, n_pos, low), j = upper_bound(found, n_found, low);
        for (;;) {
            while (i < n_pos && positions[i] < high && scores[i] < min_score)
                i++;
            int more_pos = i < n_pos && positions[i] < high, more_found = j < n_found && found[j] < high;
            i64 point;
            if (more_pos && (!more_found || positions[i] <= found[j]))
                point = positions[i++];
            else if (more_found)
                point = found[j++];
            else
                point = high;
            if ((point - last) * 4 > budget) {
                out[m++] = last;
                out[m++] = point;
            }
            if (point == high && !more_pos && !more_found)
                break;
            last = point;
        }
    }
    result = list_of(out, m);
done:
    for (int k = 0; k < 4; k++)
        PyMem_Free(a[k]);
    PyMem_Free(out);
    return result;
}

/* class_positions(text, gaps, ranges, checked, spec) -> (positions, offsets): the indices of the
 * characters in the ranges (flat pairs lo, hi, inclusive) inside each gap's window [low - 1, high) (flat
 * pairs, in order), those also in the checked ranges only where the spec (segmenter.level_spec data,
 * matched greedily from the next character, within the window) matches; and where each gap's begin in
 * them (one more offset than gaps: the end). */
static PyObject *class_positions(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[4];
    if (!PyArg_ParseTuple(args, "UOOOO", &text, &objects[0], &objects[1], &objects[2], &objects[3]))
        return NULL;
    Py_ssize_t n_gaps = PySequence_Size(objects[0]), n_ranges = PySequence_Size(objects[1]);
    Py_ssize_t n_checked = PySequence_Size(objects[2]), n_spec = PySequence_Size(objects[3]);
    if (n_gaps < 0 || n_ranges < 0 || n_checked < 0 || n_spec < 0)
        return NULL;
    if (n_gaps % 2 || n_ranges % 2 || n_checked % 2 || (n_checked > 0 && n_spec == 0)) {
        PyErr_SetString(PyExc_ValueError, "class_positions: gaps and ranges are pairs, checked ones need a spec");
        return NULL;
    }
    i64 *gaps = as_array(objects[0], n_gaps, "gaps"), *ranges = NULL, *checked = NULL, *spec = NULL;
    i64 *out = NULL, *offsets = NULL;
    Item *items = NULL;
    Py_ssize_t n_items = 0;
    PyObject *result = NULL;
    Py_ssize_t m = 0, cap = 64;
    if (gaps == NULL || (ranges = as_array(objects[1], n_ranges, "ranges")) == NULL ||
        (checked = as_array(objects[2], n_checked, "checked")) == NULL ||
        (spec = as_array(objects[3], n_spec, "spec")) == NULL)
        goto done;
    if (read_items(spec, n_spec, "class_positions", &items, &n_items) < 0)
        goto done;
    out = PyMem_Malloc(sizeof(i64) * (size_t)cap);
    offsets = PyMem_Malloc(sizeof(i64) * (size_t)(n_gaps / 2 + 1));
    if (out == NULL || offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    /* The ASCII characters in the ranges, as a table (2: also checked); the ranges are read for the others. */
    unsigned char ascii[128] = {0};
    for (Py_ssize_t r = 0; r < n_ranges; r += 2)
        for (i64 code = ranges[r] > 0 ? ranges[r] : 0; code <= ranges[r + 1] && code < 128; code++)
            ascii[code] = 1;
    for (Py_ssize_t r = 0; r < n_checked; r += 2)
        for (i64 code = checked[r] > 0 ? checked[r] : 0; code <= checked[r + 1] && code < 128; code++)
            if (ascii[code])
                ascii[code] = 2;
    MatchMemo match = {-1, 0, 0, 0};
    for (Py_ssize_t g = 0; g < n_gaps; g += 2) {
        offsets[g / 2] = m;
        i64 low = gaps[g] > 0 ? gaps[g] - 1 : 0, high = gaps[g + 1] < length ? gaps[g + 1] : length;
        for (i64 k = low; k < high; k++) {
            Py_UCS4 code = PyUnicode_READ(kind, data, k);
            int found = 0;
            if (code < 128)
                found = ascii[code];
            else {
                for (Py_ssize_t r = 0; r < n_ranges && !found; r += 2)
                    found = code >= ranges[r] && code <= ranges[r + 1];
                for (Py_ssize_t r = 0; r < n_checked && found == 1; r += 2)
                    if (code >= checked[r] && code <= checked[r + 1])
                        found = 2;
            }
            if (!found || (found == 2 && match_memo(kind, data, items, n_items, k + 1, high, &match) < 0))
                continue;
            if (m == cap) {
                cap *= 2;
                i64 *grown = PyMem_Realloc(out, sizeof(i64) * (size_t)cap);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                out = grown;
            }
            out[m++] = k;
        }
    }
    offsets[n_gaps / 2] = m;
    result = pair_of_lists(out, m, offsets, n_gaps / 2 + 1);
done:
    PyMem_Free(gaps);
    PyMem_Free(ranges);
    PyMem_Free(checked);
    PyMem_Free(spec);
    PyMem_Free(items);
    PyMem_Free(out);
    PyMem_Free(offsets);
    return result;
}

/* window_extra(text, positions, scores, below, row_starts, row_reaches, low, width, memo, price, ending)
 *   -> (extra, missing): for each candidate scored below `below` and not inside a row (the reach of the
 * last row starting before it, when there is one, is at or before it), its position moved back over
 * white space (not below low) and the `width` characters before that looked up in the dict memo:
 * `price` when memo says False, 0 when True, and its index in missing when memo has no such key; `price`
 * without a look when those characters are some and the last is in no term of `ending` (class terms,
 * as a spec's; none: always look). */
/* The memo's truth for text[lo:hi]: 1 true, 0 false, -2 not in the memo, -1 an error (set). */
static int memo_truth(PyObject *text, PyObject *memo, i64 lo, i64 hi)
{
    PyObject *key = PyUnicode_Substring(text, lo, hi);
    if (key == NULL)
        return -1;
    PyObject *value = PyDict_GetItemWithError(memo, key);
    Py_DECREF(key);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : -2;
    return PyObject_IsTrue(value);
}

static PyObject *window_extra(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[5], *memo;
    long long below, low, width, price;
    if (!PyArg_ParseTuple(args, "UOOLOOLLO!LO", &text, &objects[0], &objects[1], &below, &objects[2], &objects[3],
                          &low, &width, &PyDict_Type, &memo, &price, &objects[4]))
        return NULL;
    Py_ssize_t n = PySequence_Size(objects[0]), n_rows = PySequence_Size(objects[2]);
    Py_ssize_t n_ending = PySequence_Size(objects[4]);
    if (n < 0 || n_rows < 0 || n_ending < 0)
        return NULL;
    if (n_ending % 3) {
        PyErr_SetString(PyExc_ValueError, "window_extra: ending terms are triples");
        return NULL;
    }
    i64 *positions = as_array(objects[0], n, "positions"), *scores = NULL, *row_starts = NULL, *row_reaches = NULL;
    i64 *extra = NULL, *missing = NULL, *ending = NULL;
    Py_ssize_t m = 0;
    PyObject *result = NULL;
    if (positions == NULL || (scores = as_array(objects[1], n, "scores")) == NULL ||
        (row_starts = as_array(objects[2], n_rows, "row_starts")) == NULL ||
        (row_reaches = as_array(objects[3], n_rows, "row_reaches")) == NULL ||
        (ending = as_array(objects[4], n_ending, "ending")) == NULL)
        goto done;
    Item last = {1, 1, 0, n_ending / 3, ending, {0}};
    clear_ascii(&last);
    extra = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(i64));
    missing = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (extra == NULL || missing == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    TrimMemo trim = {-1, 0};
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 pos = positions[k];
        if (scores[k] >= below)
            continue;
        if (pos < 0 || pos > length) {
            PyErr_SetString(PyExc_IndexError, "window_extra: a position outside the text");
            goto done;
        }
        Py_ssize_t row = lower_bound(row_starts, n_rows, pos);
        if (row > 0 && pos < row_reaches[row - 1])
            continue;
        pos = trim_back(kind, data, pos, low, &trim);
        if (n_ending > 0 && pos > 0 && width > 0 && !in_class(&last, PyUnicode_READ(kind, data, pos - 1))) {
            extra[k] = price;
            continue;
        }
        int truth = memo_truth(text, memo, pos > width ? pos - width : 0, pos);
        if (truth == -1)
            goto done;
        if (truth == -2) {
            missing[m++] = k;
            continue;
        }
        if (!truth)
            extra[k] = price;
    }
    result = pair_of_lists(extra, n, missing, m);
done:
    PyMem_Free(positions);
    PyMem_Free(scores);
    PyMem_Free(row_starts);
    PyMem_Free(row_reaches);
    PyMem_Free(extra);
    PyMem_Free(missing);
    PyMem_Free(ending);
    return result;
}

/* The last index in [from, to) holding a line feed, else -1. */
static i64 last_newline(int kind, const void *data, i64 from, i64 to)
{
    if (from >= to)
        return -1;
#ifdef __GLIBC__
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *bytes = data;
        const Py_UCS1 *at = memrchr(bytes + from, '\n', (size_t)(to - from));
        return at == NULL ? -1 : at - bytes;
    }
#endif
    if (kind == PyUnicode_2BYTE_KIND)
        return rfind_ucs2(data, from, to, '\n');
    for (i64 x = to - 1; x >= from; x--)
        if (PyUnicode_READ(kind, data, x) == '\n')
            return x;
    return -1;
}

/* line_heads(text, positions, scores, below, end, low, width, spec, memo) -> (hits, missing, trimmed):
 * the candidates scored below `below` and before `end` whose position, moved back over white space (not
 * below low) to t, ends a line the spec (matched greedily from the line's start, not past t) begins:
 * the last line of the window [max(0, t - width), t), where ^ holds (not a window starting inside its
 * line). Each such line's text up to t is looked up in the dict memo: hits, the indices where it says
 * true; missing, those it does not hold, with their t in trimmed. */
static PyObject *line_heads(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[3], *memo;
    long long below, end, low, width;
    if (!PyArg_ParseTuple(args, "UOOLLLLOO!", &text, &objects[0], &objects[1], &below, &end, &low, &width,
                          &objects[2], &PyDict_Type, &memo))
        return NULL;
    Py_ssize_t n = PySequence_Size(objects[0]), n_spec = PySequence_Size(objects[2]);
    if (n < 0 || n_spec < 0)
        return NULL;
    i64 *positions = as_array(objects[0], n, "positions"), *scores = NULL, *spec = NULL;
    i64 *hits = NULL, *missing = NULL, *trimmed = NULL;
    Item *items = NULL;
    Py_ssize_t n_items = 0, n_hits = 0, m = 0;
    PyObject *result = NULL;
    if (positions == NULL || (scores = as_array(objects[1], n, "scores")) == NULL ||
        (spec = as_array(objects[2], n_spec, "spec")) == NULL)
        goto done;
    if (read_items(spec, n_spec, "line_heads", &items, &n_items) < 0)
        goto done;
    hits = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    missing = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    trimmed = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (hits == NULL || missing == NULL || trimmed == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    /* The last line feed before `scanned` (-1: none): positions in order are each scanned once. */
    i64 scanned = 0, newline = -1;
    TrimMemo trim = {-1, 0};
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 pos = positions[k];
        if (scores[k] >= below || pos >= end)
            continue;
        if (pos < 0 || pos > length) {
            PyErr_SetString(PyExc_IndexError, "line_heads: a position outside the text");
            goto done;
        }
        pos = trim_back(kind, data, pos, low, &trim);
        i64 window = pos > width ? pos - width : 0, line;
        if (pos >= scanned) {
            i64 found = last_newline(kind, data, scanned > window ? scanned : window, pos);
            if (found >= 0)
                newline = found;
            else if (scanned < window)
                newline = -1; /* none in [window, pos), and those before window do not count */
            scanned = pos;
            line = newline >= window ? newline + 1 : -1;
        } else {
            i64 found = last_newline(kind, data, window, pos);
            line = found >= 0 ? found + 1 : -1;
        }
        if (line < 0) {
            if (window > 0 && PyUnicode_READ(kind, data, window - 1) != '\n')
                continue;
            line = window;
        }
        if (match_at(kind, data, items, n_items, line, pos) < 0)
            continue;
        int truth = memo_truth(text, memo, line, pos);
        if (truth == -1)
            goto done;
        if (truth == -2) {
            missing[m] = k;
            trimmed[m++] = pos;
            continue;
        }
        if (truth)
            hits[n_hits++] = k;
    }
    const i64 *lists[3] = {hits, missing, trimmed};
    const Py_ssize_t lengths[3] = {n_hits, m, m};
    result = tuple_of_lists(3, lists, lengths);
done:
    PyMem_Free(positions);
    PyMem_Free(scores);
    PyMem_Free(spec);
    PyMem_Free(items);
    PyMem_Free(hits);
    PyMem_Free(missing);
    PyMem_Free(trimmed);
    return result;
}

/* A candidate of merge_levels: its position's value, and the objects of its position and score. */
typedef struct {
    i64 pos;
    PyObject *pos_object, *score_object;
} Scored;

/* merge_levels(positions, scores, finds, find_scores) -> (positions, scores): the candidates, sorted:
 * positions (sorted; a position given twice takes its best score), then each list of finds (sorted) with
 * its score, replacing the score of a position found before. The lists hold the objects given (no new
 * integers). */
static PyObject *merge_levels(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objects[0], &objects[1], &objects[2], &objects[3]))
        return NULL;
    PyObject *fast[4] = {NULL};
    Scored *out = NULL, *next = NULL;
    PyObject *result = NULL, **mores = NULL; /* each list of finds, held until the lists are built */
    Py_ssize_t n_lists = 0;
    Py_ssize_t m = 0;
    static const char *NAMES[] = {"positions", "scores", "finds", "find_scores"};
    for (int k = 0; k < 4; k++)
        if ((fast[k] = PySequence_Fast(objects[k], NAMES[k])) == NULL)
            goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast[0]);
    n_lists = PySequence_Fast_GET_SIZE(fast[2]);
    if (PySequence_Fast_GET_SIZE(fast[1]) != n || PySequence_Fast_GET_SIZE(fast[3]) != n_lists) {
        PyErr_SetString(PyExc_ValueError, "merge_levels: inconsistent array sizes");
        goto done;
    }
    PyObject **positions = PySequence_Fast_ITEMS(fast[0]), **scores = PySequence_Fast_ITEMS(fast[1]);
    out = PyMem_Malloc(sizeof(Scored) * (size_t)(n > 0 ? n : 1));
    mores = PyMem_Calloc((size_t)(n_lists > 0 ? n_lists : 1), sizeof(PyObject *));
    if (out == NULL || mores == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    i64 best = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 pos = PyLong_AsLongLong(positions[k]), score = PyLong_AsLongLong(scores[k]);
        if ((pos == -1 || score == -1) && PyErr_Occurred())
            goto done;
        if (m > 0 && pos == out[m - 1].pos) {
            if (score > best) {
                best = score;
                out[m - 1].score_object = scores[k];
            }
            continue;
        }
        if (m > 0 && pos < out[m - 1].pos) {
            PyErr_SetString(PyExc_ValueError, "merge_levels: positions not sorted");
            goto done;
        }
        out[m++] = (Scored){pos, positions[k], scores[k]};
        best = score;
    }
    for (Py_ssize_t l = 0; l < n_lists; l++) {
        PyObject *more = mores[l] = PySequence_Fast(PySequence_Fast_GET_ITEM(fast[2], l), "finds");
        if (more == NULL)
            goto done;
        Py_ssize_t n_more = PySequence_Fast_GET_SIZE(more), a = 0, b = 0, w = 0;
        PyObject **items = PySequence_Fast_ITEMS(more), *score = PySequence_Fast_GET_ITEM(fast[3], l);
        next = PyMem_Malloc(sizeof(Scored) * (size_t)(m + n_more > 0 ? m + n_more : 1));
        if (next == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        i64 last = 0;
        while (a < m || b < n_more) {
            i64 pos = 0;
            if (b < n_more) {
                pos = PyLong_AsLongLong(items[b]);
                if (pos == -1 && PyErr_Occurred())
                    goto done;
                if (b > 0 && pos <= last) {
                    if (pos == last) {
                        b++;
                        continue;
                    }
                    PyErr_SetString(PyExc_ValueError, "merge_levels: finds not sorted");
                    goto done;
                }
            }
            if (b >= n_more || (a < m && out[a].pos < pos)) {
                next[w++] = out[a++];
                continue;
            }
            if (a < m && out[a].pos == pos)
                a++; /* the find's score replaces it */
            next[w++] = (Scored){pos, items[b++], score};
            last = pos;
        }
        PyMem_Free(out);
        out = next;
        next = NULL;
        m = w;
    }
    PyObject *pair[2] = {PyList_New(m), PyList_New(m)};
    if (pair[0] != NULL && pair[1] != NULL) {
        for (Py_ssize_t k = 0; k < m; k++) {
            Py_INCREF(out[k].pos_object);
            PyList_SET_ITEM(pair[0], k, out[k].pos_object);
            Py_INCREF(out[k].score_object);
            PyList_SET_ITEM(pair[1], k, out[k].score_object);
        }
        result = PyTuple_Pack(2, pair[0], pair[1]);
    }
    Py_XDECREF(pair[0]);
    Py_XDECREF(pair[1]);
done:
    for (Py_ssize_t l = 0; mores != NULL && l < n_lists; l++)
        Py_XDECREF(mores[l]);
    PyMem_Free(mores);
    for (int k = 0; k < 4; k++)
        Py_XDECREF(fast[k]);
    PyMem_Free(out);
    PyMem_Free(next);
    return result;
}

/* text_spans(text, positions, scores, min_score, more, start, end, price, budget, keys, values, plain) ->
 * (sure, asked): the spans between consecutive bounds (start, the positions scored min_score or more, more;
 * sorted, once each), each as its text [first, last) (first: the first non-space at or after its start,
 * up to end; last: its end moved back over white space, not below its start), kept when a position lies
 * strictly inside; sure: (first + 1, last, price) of each with last - first + values[bisect_right(keys,
 * first)] <= budget; asked instead: (start, stop, first, last) of each kept span when budget < 0, or,
 * unless plain, whose first is a grapheme boundary the characters do not settle (as skip_spaces). */
static PyObject *text_spans(PyObject *self, PyObject *args)
{
    PyObject *text, *objects[5];
    long long min_score, start, end, price, budget;
    int plain;
    if (!PyArg_ParseTuple(args, "UOOLOLLLLOOp", &text, &objects[0], &objects[1], &min_score, &objects[2], &start,
                          &end, &price, &budget, &objects[3], &objects[4], &plain))
        return NULL;
    Py_ssize_t sizes[5];
    for (int k = 0; k < 5; k++)
        if ((sizes[k] = PySequence_Size(objects[k])) < 0)
            return NULL;
    if (sizes[0] != sizes[1] || sizes[4] != sizes[3] + 1) {
        PyErr_SetString(PyExc_ValueError, "text_spans: inconsistent array sizes");
        return NULL;
    }
    static const char *NAMES[] = {"positions", "scores", "more", "keys", "values"};
    i64 *a[5] = {NULL}, *bounds = NULL, *sure = NULL, *asked = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < 5; k++)
        if ((a[k] = as_array(objects[k], sizes[k], NAMES[k])) == NULL)
            goto done;
    const i64 *positions = a[0], *scores = a[1], *more = a[2], *keys = a[3], *values = a[4];
    Py_ssize_t n = sizes[0], n_more = sizes[2], m = 0, n_sure = 0, n_asked = 0;
    bounds = PyMem_Malloc(sizeof(i64) * (size_t)(n + n_more + 1));
    sure = PyMem_Malloc(sizeof(i64) * (size_t)(3 * (n + n_more) + 1));
    asked = PyMem_Malloc(sizeof(i64) * (size_t)(4 * (n + n_more) + 1));
    if (bounds == NULL || sure == NULL || asked == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The bounds: three sorted streams merged, a value once. */
    Py_ssize_t i = 0, j = 0;
    int start_taken = 0;
    for (;;) {
        while (i < n && scores[i] < min_score)
            i++;
        int which = -1;
        i64 best = 0;
        if (i < n) {
            best = positions[i];
            which = 0;
        }
        if (j < n_more && (which < 0 || more[j] < best)) {
            best = more[j];
            which = 1;
        }
        if (!start_taken && (which < 0 || start < best)) {
            best = start;
            which = 2;
        }
        if (which < 0)
            break;
        if (which == 0)
            i++;
        else if (which == 1)
            j++;
        else
            start_taken = 1;
        if (m == 0 || bounds[m - 1] != best)
            bounds[m++] = best;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    i64 limit = end < length ? end : length;
    /* The bounds rise, so upper_bound(positions, low) and lower_bound(positions, high) only move on:
     * two cursors (after, before) instead of two searches per span. */
    Py_ssize_t after = 0, before = 0, inside = 0;
    SkipMemo skip = {-1, 0};
    for (Py_ssize_t k = 0; k + 1 < m; k++) {
        i64 low = bounds[k], high = bounds[k + 1];
        if (low < 0 || high > length) {
            PyErr_SetString(PyExc_IndexError, "text_spans: a bound outside the text");
            goto done;
        }
        while (after < n && positions[after] <= low)
            after++;
        if (before < after)
            before = after;
        while (before < n && positions[before] < high)
            before++;
        if (after >= before)
            continue; /* no position strictly inside [low, high): none inside its text either */
        i64 first = low, last = high;
        first = skip_forward(kind, data, first, limit, &skip);
        if (first >= end)
            first = low > end ? low : end;
        while (last > low && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, last - 1)))
            last--;
        /* The same two bounds at first (at or after low) and last (at or before high). */
        if (inside < after)
            inside = after; /* first rises with low, so inside only moves on too */
        Py_ssize_t below = before;
        while (inside < n && positions[inside] <= first)
            inside++;
        while (below > 0 && positions[below - 1] >= last)
            below--;
        if (inside >= below)
            continue;
        if (budget < 0 || (!plain && !settled(kind, data, length, first))) {
            asked[n_asked++] = low;
            asked[n_asked++] = high;
            asked[n_asked++] = first;
            asked[n_asked++] = last;
        } else if (last - first + values[upper_bound(keys, sizes[3], first)] <= budget) {
            sure[n_sure++] = first + 1;
            sure[n_sure++] = last;
            sure[n_sure++] = price;
        }
    }
    result = pair_of_lists(sure, n_sure, asked, n_asked);
done:
    for (int k = 0; k < 5; k++)
        PyMem_Free(a[k]);
    PyMem_Free(bounds);
    PyMem_Free(sure);
    PyMem_Free(asked);
    return result;
}

/* The sizes of seqs[0..count) (PySequence_Size), all equal to the first; -1 and an exception otherwise. */
static Py_ssize_t common_size(PyObject **seqs, int count, const char *name)
{
    Py_ssize_t n = -1;
    for (int k = 0; k < count; k++) {
        Py_ssize_t size = PySequence_Size(seqs[k]);
        if (size < 0)
            return -1;
        if (k > 0 && size != n) {
            PyErr_Format(PyExc_ValueError, "%s: inconsistent array sizes", name);
            return -1;
        }
        n = size;
    }
    return n;
}

/* live_spans(positions, lows, firsts, tails) -> (live, lasts): the spans with a position (sorted)
 * strictly inside [first, last), last = max(low, tail): their indices and their lasts. */
static PyObject *live_spans(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objects[0], &objects[1], &objects[2], &objects[3]))
        return NULL;
    Py_ssize_t n_positions = PySequence_Size(objects[0]);
    Py_ssize_t n = common_size(objects + 1, 3, "live_spans");
    if (n_positions < 0 || n < 0)
        return NULL;
    static const char *NAMES[] = {"positions", "lows", "firsts", "tails"};
    i64 *a[4] = {NULL}, *live = NULL;
    PyObject *result = NULL;
    for (int k = 0; k < 4; k++)
        if ((a[k] = as_array(objects[k], k == 0 ? n_positions : n, NAMES[k])) == NULL)
            goto done;
    const i64 *positions = a[0], *lows = a[1], *firsts = a[2];
    i64 *lasts = a[3]; /* the tails, overwritten by the kept lasts */
    live = PyMem_Malloc(sizeof(i64) * (size_t)(n > 0 ? n : 1));
    if (live == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t u = 0; u < n; u++) {
        i64 last = lasts[u] > lows[u] ? lasts[u] : lows[u];
        if (upper_bound(positions, n_positions, firsts[u]) < lower_bound(positions, n_positions, last)) {
            live[m] = u;
            lasts[m++] = last;
        }
    }
    result = pair_of_lists(live, m, lasts, m);
done:
    for (int k = 0; k < 4; k++)
        PyMem_Free(a[k]);
    PyMem_Free(live);
    return result;
}

/* fit_sizes(begins, tails, keys, values, budget) -> [bool]: each max(begin, tail) - begin +
 * values[bisect_right(keys, begin)] <= budget. */
static PyObject *fit_sizes(PyObject *self, PyObject *args)
{
    PyObject *objects[4];
    long long budget;
    if (!PyArg_ParseTuple(args, "OOOOL", &objects[0], &objects[1], &objects[2], &objects[3], &budget))
        return NULL;
    Py_ssize_t n = common_size(objects, 2, "fit_sizes"), n_keys = PySequence_Size(objects[2]);
    if (n < 0 || n_keys < 0)
        return NULL;
    static const char *NAMES[] = {"begins", "tails", "keys", "values"};
    Py_ssize_t sizes[4] = {n, n, n_keys, n_keys + 1};
    i64 *a[4] = {NULL};
    PyObject *out = NULL;
    for (int k = 0; k < 4; k++)
        if ((a[k] = as_array(objects[k], sizes[k], NAMES[k])) == NULL)
            goto done;
    if ((out = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 begin = a[0][k], tail = a[1][k];
        i64 size = (tail > begin ? tail : begin) - begin + a[3][upper_bound(a[2], n_keys, begin)];
        PyObject *fit = size <= budget ? Py_True : Py_False;
        Py_INCREF(fit);
        PyList_SET_ITEM(out, k, fit);
    }
done:
    for (int k = 0; k < 4; k++)
        PyMem_Free(a[k]);
    return out;
}

/* capped_intervals(starts, reaches, price) -> flat (start + 1, reach + 1, price) of each start whose
 * reach, capped at the next start, lies past it. */
static PyObject *capped_intervals(PyObject *self, PyObject *args)
{
    PyObject *objects[2];
    long long price;
    if (!PyArg_ParseTuple(args, "OOL", &objects[0], &objects[1], &price))
        return NULL;
    Py_ssize_t n = common_size(objects, 2, "capped_intervals");
    if (n < 0)
        return NULL;
    i64 *starts = NULL, *reaches = NULL, *out = NULL;
    PyObject *result = NULL;
    if ((starts = as_array(objects[0], n, "starts")) == NULL || (reaches = as_array(objects[1], n, "reaches")) == NULL)
        goto done;
    out = PyMem_Malloc(sizeof(i64) * (size_t)(3 * n + 1));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        i64 reach = reaches[k];
        if (k + 1 < n && starts[k + 1] < reach)
            reach = starts[k + 1];
        if (reach > starts[k]) {
            out[m++] = starts[k] + 1;
            out[m++] = reach + 1;
            out[m++] = price;
        }
    }
    result = list_of(out, m);
done:
    PyMem_Free(starts);
    PyMem_Free(reaches);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"best_predecessors", best_predecessors, METH_VARARGS,
     "segmenter.best_predecessors(heads, tails, prices, inside_head, inside_tail, floors, allowances, fulls, "
     "max_allowance, min_size, chunk_price, PRICE_NO_OVERLAP, PRICE_UNDERSIZED, PRICE_OVER_BUDGET)"},
    {"cut_candidates", cut_candidates, METH_VARARGS,
     "segmenter.cut_candidates(text, positions, scores, extra, score_prices, intervals, forbidden, free_score, end)"},
    {"trim_ends", trim_ends, METH_VARARGS, "segmenter.trim_ends(text, positions, low)"},
    {"lookup", lookup, METH_VARARGS, "segmenter.lookup(keys, values, queries, right)"},
    {"skip_spaces", skip_spaces, METH_VARARGS,
     "segmenter.skip_spaces(text, positions, limit, max_indent, plain, verify_indent)"},
    {"class_ends", class_ends, METH_VARARGS, "segmenter.class_ends(text, gaps, spec, taken, plain, step)"},
    {"wide_gaps", wide_gaps, METH_VARARGS, "segmenter.wide_gaps(gaps, positions, scores, min_score, found, budget)"},
    {"class_positions", class_positions, METH_VARARGS,
     "segmenter.class_positions(text, gaps, ranges, checked, spec)"},
    {"window_extra", window_extra, METH_VARARGS,
     "segmenter.window_extra(text, positions, scores, below, row_starts, row_reaches, low, width, memo, price, "
     "ending)"},
    {"line_heads", line_heads, METH_VARARGS,
     "segmenter.line_heads(text, positions, scores, below, end, low, width, spec, memo)"},
    {"merge_levels", merge_levels, METH_VARARGS, "segmenter.merge_levels(positions, scores, finds, find_scores)"},
    {"first_in_ranges", first_in_ranges, METH_VARARGS, "segmenter.first_in_ranges(text, ranges, start, end)"},
    {"text_spans", text_spans, METH_VARARGS,
     "segmenter.text_spans(text, positions, scores, min_score, more, start, end, price, budget, keys, values, "
     "plain)"},
    {"live_spans", live_spans, METH_VARARGS, "segmenter.live_spans(positions, lows, firsts, tails)"},
    {"fit_sizes", fit_sizes, METH_VARARGS, "segmenter.fit_sizes(begins, tails, keys, values, budget)"},
    {"capped_intervals", capped_intervals, METH_VARARGS, "segmenter.capped_intervals(starts, reaches, price)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_segment", NULL, -1, methods};

PyMODINIT_FUNC PyInit__segment(void)
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
