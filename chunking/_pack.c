/* The chunking core's hot paths, in C: each is the Python function or method of the same name, which
 * stays the reference (tests/test_packer_native.py holds them equal on the real corpora and on
 * generated text) and the fallback when this module is not built.
 *
 *   spans         Packer.spans (chunking/packer.py); plans with reviewer constraints (keep spans,
 *                 breaks) are packed by the Python packer alone
 *   token_*       units.TokenMeter's size, estimate, advance and back; its caches stay its dicts
 *   check_spans   findings.check_spans, all but the reviewer-constraint finding
 *   token_starts  units.TiktokenTokenizer.token_starts
 *
 * Textual boundaries (paragraph, line, sentence, word, grapheme) are found here. The levels' patterns
 * come down to a few character classes (the regex module's \s, \d, [\p{Lu}\p{N}\p{Lo}], \p{L}, what may
 * join a grapheme cluster); each code point's classes are asked of Python (``packer._char_classes``,
 * the same regex classes) the first time it is met, and kept. Where a grapheme cluster may span more
 * than one code point (combining marks, emoji sequences, Hangul jamo; CR LF aside), and for levels
 * this file does not know, the Python packer's own method is called. So are meters other than
 * characters and tokens, and the tokenizer itself.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { LEVEL_OTHER = 0, LEVEL_PARAGRAPH, LEVEL_LINE, LEVEL_SENTENCE, LEVEL_SENTENCE_OR_PARAGRAPH, LEVEL_WORD,
       LEVEL_GRAPHEME };

#define NONE (-1) /* "no position" (Python's None); positions are >= 0 */

typedef struct {
    Py_ssize_t *v;
    Py_ssize_t n;
} Array;

typedef struct {
    PyObject *packer; /* the Python Packer: its methods are the fallbacks */
    PyObject *text;
    int kind;
    const void *data;
    int is_ascii;
    Py_ssize_t length;
    Py_ssize_t plan_start, plan_end;
    Array positions, scores;
    Array group_starts, group_ends;
    signed char *group_fits; /* -1 unknown, 0, 1 */
    Array forced, headings, heading_starts, heading_end_values;
    Array line_group_starts, line_group_reach;
    int n_levels;
    int level_codes[16];
    int level_scores[16];
    PyObject *level_objects[16]; /* borrowed from the levels tuple */
    Py_ssize_t max_size, overlap, min_size, overlap_floor, level_top;
    double fill;
    int chars; /* the meter counts code points */
    PyObject *meter;
    struct TokenMeter *tokens; /* units.TokenMeter's counting in C; NULL for other meters */
} Packer;

/* units.TokenMeter, its methods in C below; its caches stay the Python object's dicts */
typedef struct TokenMeter {
    PyObject *text;
    int kind;
    const void *data;
    Py_ssize_t n;
    PyObject *count; /* tokenizer.count */
    PyObject *sizes, *heads, *tails;
    int local;
    Py_buffer view; /* meter.starts: int64, the start of each token of the whole-text encoding */
    const long long *starts;
    Py_ssize_t n_starts;
} TokenMeter;

#define CH(pk, i) PyUnicode_READ((pk)->kind, (pk)->data, (i))
#define ASCII_SPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r')) /* regex's \s on ASCII */
/* regex's \s; an exception in the class lookup reads as "no" and is caught by pack() */
#define RX_SPACE(c) ((c) < 0x80 ? ASCII_SPACE(c) : has_class((c), C_SPACE) == 1)
#define ERR PY_SSIZE_T_MIN /* a Python exception is set (sizes can be negative: no small value is free) */

/* Character classes, as packer._char_classes computes them. */
#define C_SPACE 1      /* regex \s */
#define C_CAPITAL 2    /* [\p{Lu}\p{N}\p{Lo}] */
#define C_DECIMAL 4    /* regex \d */
#define C_CONTINUES 8  /* packer._CONTINUES: may continue a cluster begun before it */
#define C_JOINER 16    /* may be inside a multi-code-point grapheme cluster (CONTINUES, Hangul jamo, ...) */
#define C_LETTER 32    /* \p{L} */
#define C_WORD 64      /* [\p{L}\p{N}] */
#define C_KNOWN 128

static unsigned char *char_classes; /* by code point; 0: not asked yet */
static PyObject *classify;          /* packer._char_classes */

static int classes_of(Py_UCS4 c)
{
    if (char_classes[c])
        return char_classes[c];
    PyObject *result = PyObject_CallFunction(classify, "(C)", (int)c);
    if (result == NULL)
        return -1;
    long bits = PyLong_AsLong(result);
    Py_DECREF(result);
    if (bits == -1 && PyErr_Occurred())
        return -1;
    char_classes[c] = (unsigned char)((bits & 0x7F) | C_KNOWN);
    return char_classes[c];
}

/* Classes come from `classifier` (packer._char_classes); another one (a reloaded module) forgets
 * what the old one said. */
static int use_classifier(PyObject *classifier)
{
    if (char_classes == NULL) {
        char_classes = PyMem_Calloc(0x110000, 1);
        if (char_classes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (classify != classifier) {
        memset(char_classes, 0, 0x110000);
        Py_XSETREF(classify, Py_NewRef(classifier));
    }
    return 0;
}

/* Whether c has any of the classes in `mask` (-1: a Python exception) */
static int has_class(Py_UCS4 c, int mask)
{
    int classes = classes_of(c);
    return classes < 0 ? -1 : (classes & mask) != 0;
}

static int to_array(PyObject *seq, Array *out)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    out->v = PyMem_Malloc((n > 0 ? n : 1) * sizeof(Py_ssize_t));
    out->n = n;
    if (out->v == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        out->v[i] = PyLong_AsSsize_t(items[i]);
        if (out->v[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static Py_ssize_t bisect_left(const Array *a, Py_ssize_t x)
{
    Py_ssize_t lo = 0, hi = a->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static Py_ssize_t bisect_right(const Array *a, Py_ssize_t x)
{
    Py_ssize_t lo = 0, hi = a->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < a->v[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Whether every grapheme cluster in text[a:b] (clipped to the text) is one code point, CR LF aside:
 * no character there may join a cluster. */
static int simple_clusters(const Packer *pk, Py_ssize_t a, Py_ssize_t b)
{
    if (pk->is_ascii)
        return 1;
    if (a < 0)
        a = 0;
    if (b > pk->length)
        b = pk->length;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = CH(pk, i);
        if (c >= 0x80 && has_class(c, C_JOINER) != 0)
            return 0;
    }
    return 1;
}

/* _NON_SPACE.search(text, a, b) is not None */
static int has_non_space(const Packer *pk, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t i = a; i < b; i++)
        if (!Py_UNICODE_ISSPACE(CH(pk, i)))
            return 1;
    return 0;
}

/* -- calls into Python ------------------------------------------------------------------------ */

static Py_ssize_t call_pos(PyObject *obj, const char *method, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *callable = PyObject_GetAttrString(obj, method);
    PyObject *arguments = callable ? Py_VaBuildValue(format, args) : NULL;
    va_end(args);
    PyObject *result = arguments ? PyObject_CallObject(callable, arguments) : NULL;
    Py_XDECREF(callable);
    Py_XDECREF(arguments);
    if (result == NULL)
        return ERR;
    Py_ssize_t value;
    if (result == Py_None)
        value = NONE;
    else if (PyBool_Check(result))
        value = result == Py_True;
    else
        value = PyLong_AsSsize_t(result);
    Py_DECREF(result);
    if (value == -1 && PyErr_Occurred())
        return ERR;
    return value;
}

/* The same keyword call, with last=... */
static Py_ssize_t call_pos_last(PyObject *obj, const char *method, PyObject *first, Py_ssize_t low,
                                Py_ssize_t high, int last)
{
    PyObject *callable = PyObject_GetAttrString(obj, method);
    if (callable == NULL)
        return ERR;
    PyObject *arguments = first ? Py_BuildValue("(Onn)", first, low, high) : Py_BuildValue("(nn)", low, high);
    PyObject *keywords = Py_BuildValue("{s:O}", "last", last ? Py_True : Py_False);
    PyObject *result = arguments && keywords ? PyObject_Call(callable, arguments, keywords) : NULL;
    Py_DECREF(callable);
    Py_XDECREF(arguments);
    Py_XDECREF(keywords);
    if (result == NULL)
        return ERR;
    Py_ssize_t value = result == Py_None ? NONE : PyLong_AsSsize_t(result);
    Py_DECREF(result);
    if (value == -1 && PyErr_Occurred())
        return ERR;
    return value;
}

/* -- units.TokenMeter ------------------------------------------------------------------------- */

#define SYNC_WINDOW 256 /* units._SYNC_WINDOW */
#define SHORT_SPAN 96   /* units._SHORT_SPAN */

static Py_ssize_t starts_left(const TokenMeter *t, Py_ssize_t x) /* numpy searchsorted, side="left" */
{
    Py_ssize_t lo = 0, hi = t->n_starts;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (t->starts[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static Py_ssize_t starts_right(const TokenMeter *t, Py_ssize_t x) /* side="right" */
{
    Py_ssize_t lo = 0, hi = t->n_starts;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < t->starts[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static Py_ssize_t count_span(TokenMeter *t, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *piece = PyUnicode_Substring(t->text, a, b);
    if (piece == NULL)
        return ERR;
    PyObject *result = PyObject_CallOneArg(t->count, piece);
    Py_DECREF(piece);
    if (result == NULL)
        return ERR;
    Py_ssize_t value = PyLong_AsSsize_t(result);
    Py_DECREF(result);
    return value == -1 && PyErr_Occurred() ? ERR : value;
}

#define TCH(t, i) PyUnicode_READ((t)->kind, (t)->data, (i))

/* _SYNC at q: a space after a letter or number, before a letter (the text ending at endpos) */
static int sync_at(TokenMeter *t, Py_ssize_t q, Py_ssize_t endpos)
{
    if (q < 1 || q + 1 >= endpos || TCH(t, q) != ' ')
        return 0;
    return has_class(TCH(t, q - 1), C_WORD) == 1 && has_class(TCH(t, q + 1), C_LETTER) == 1;
}

/* A cached (sync point, tokens) pair of a dict, or 0 */
static int cached_pair(PyObject *dict, Py_ssize_t key, Py_ssize_t *q, Py_ssize_t *tokens)
{
    PyObject *k = PyLong_FromSsize_t(key);
    if (k == NULL)
        return -1;
    PyObject *value = PyDict_GetItemWithError(dict, k);
    Py_DECREF(k);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    *q = PyLong_AsSsize_t(PyTuple_GET_ITEM(value, 0));
    *tokens = PyLong_AsSsize_t(PyTuple_GET_ITEM(value, 1));
    return PyErr_Occurred() ? -1 : 1;
}

static int store_pair(PyObject *dict, Py_ssize_t key, Py_ssize_t q, Py_ssize_t tokens)
{
    PyObject *k = PyLong_FromSsize_t(key), *value = Py_BuildValue("(nn)", q, tokens);
    int failed = k == NULL || value == NULL || PyDict_SetItem(dict, k, value) < 0;
    Py_XDECREF(k);
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

/* TokenMeter._head: the first sync point at or after start (end if none) and the tokens before it */
static int token_head(TokenMeter *t, Py_ssize_t start, Py_ssize_t end, Py_ssize_t *q, Py_ssize_t *tokens)
{
    int cached = cached_pair(t->heads, start, q, tokens);
    if (cached < 0)
        return -1;
    if (cached && *q < end)
        return 0;
    if (start == 0 || (TCH(t, start - 1) == '\n' && !Py_UNICODE_ISSPACE(TCH(t, start)))) {
        *q = start;
        *tokens = 0;
    } else {
        Py_ssize_t endpos = end < start + SYNC_WINDOW ? end : start + SYNC_WINDOW, found = -1;
        for (Py_ssize_t p = start; p < endpos; p++)
            if (sync_at(t, p, endpos)) {
                found = p;
                break;
            }
        if (PyErr_Occurred())
            return -1;
        if (found < 0) {
            *q = end;
            *tokens = 0;
            return 0;
        }
        *q = found;
        *tokens = count_span(t, start, found);
        if (*tokens == ERR)
            return -1;
    }
    return store_pair(t->heads, start, *q, *tokens);
}

/* TokenMeter._tail: the last sync point before end (start if none) and the tokens after it */
static int token_tail(TokenMeter *t, Py_ssize_t start, Py_ssize_t end, Py_ssize_t *q, Py_ssize_t *tokens)
{
    int cached = cached_pair(t->tails, end, q, tokens);
    if (cached < 0)
        return -1;
    if (cached && *q > start)
        return 0;
    if (end == t->n || (Py_UNICODE_ISSPACE(TCH(t, end)) && has_class(TCH(t, end - 1), C_WORD) == 1)) {
        *q = end;
        *tokens = 0;
    } else {
        Py_ssize_t low = start > end - SYNC_WINDOW ? start : end - SYNC_WINDOW, found = -1;
        for (Py_ssize_t p = end - 1; p >= low; p--)
            if (sync_at(t, p, end)) {
                found = p;
                break;
            }
        if (PyErr_Occurred())
            return -1;
        if (found < 0) {
            *q = start;
            *tokens = 0;
            return 0;
        }
        *q = found;
        *tokens = count_span(t, found, end);
        if (*tokens == ERR)
            return -1;
    }
    return store_pair(t->tails, end, *q, *tokens);
}

/* TokenMeter._size */
static Py_ssize_t token_size_uncached(TokenMeter *t, Py_ssize_t start, Py_ssize_t end)
{
    if (end <= start)
        return 0;
    if (!t->local || end - start <= SHORT_SPAN)
        return count_span(t, start, end);
    Py_ssize_t q1, head, q2, tail;
    if (token_head(t, start, end, &q1, &head) < 0 || token_tail(t, start, end, &q2, &tail) < 0)
        return ERR;
    if (q2 <= q1)
        return count_span(t, start, end);
    Py_ssize_t i = starts_left(t, q1), j = starts_left(t, q2);
    if ((i < t->n_starts && t->starts[i] != q1) || (j < t->n_starts && t->starts[j] != q2)
            || (j == t->n_starts && q2 != t->n))
        return count_span(t, start, end); /* not a piece boundary after all: be safe */
    return head + (j - i) + tail;
}

/* TokenMeter.size: spans measured before are looked up (the meter's own dict) */
static Py_ssize_t token_size(TokenMeter *t, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *key = Py_BuildValue("(nn)", start, end);
    if (key == NULL)
        return ERR;
    PyObject *known = PyDict_GetItemWithError(t->sizes, key);
    if (known != NULL) {
        Py_DECREF(key);
        Py_ssize_t value = PyLong_AsSsize_t(known);
        return value == -1 && PyErr_Occurred() ? ERR : value;
    }
    Py_ssize_t value = PyErr_Occurred() ? ERR : token_size_uncached(t, start, end);
    if (value != ERR) {
        PyObject *number = PyLong_FromSsize_t(value);
        if (number == NULL || PyDict_SetItem(t->sizes, key, number) < 0)
            value = ERR;
        Py_XDECREF(number);
    }
    Py_DECREF(key);
    return value;
}

static Py_ssize_t token_advance(TokenMeter *t, Py_ssize_t start, Py_ssize_t budget)
{
    Py_ssize_t first = starts_right(t, start) - 1;
    if (first < 0)
        first = 0;
    Py_ssize_t stop = first + budget;
    return stop < t->n_starts ? (Py_ssize_t)t->starts[stop] : t->n;
}

static Py_ssize_t token_back(TokenMeter *t, Py_ssize_t end, Py_ssize_t budget)
{
    Py_ssize_t first = starts_left(t, end) - budget;
    if (first <= 0)
        return 0;
    return t->starts[first] < end ? (Py_ssize_t)t->starts[first] : end;
}

static void token_meter_release(TokenMeter *t)
{
    if (t->starts != NULL)
        PyBuffer_Release(&t->view);
    Py_XDECREF(t->text);
    Py_XDECREF(t->count);
    Py_XDECREF(t->sizes);
    Py_XDECREF(t->heads);
    Py_XDECREF(t->tails);
}

/* Reads a units.TokenMeter's state: its text, tokenizer, caches and int64 token starts. */
static int token_meter_init(TokenMeter *t, PyObject *meter)
{
    memset(t, 0, sizeof *t);
    PyObject *tokenizer = PyObject_GetAttrString(meter, "tokenizer");
    PyObject *local = PyObject_GetAttrString(meter, "_local");
    PyObject *starts = PyObject_GetAttrString(meter, "starts");
    t->text = PyObject_GetAttrString(meter, "text");
    t->sizes = PyObject_GetAttrString(meter, "_sizes");
    t->heads = PyObject_GetAttrString(meter, "_heads");
    t->tails = PyObject_GetAttrString(meter, "_tails");
    t->count = tokenizer ? PyObject_GetAttrString(tokenizer, "count") : NULL;
    int failed = -1;
    if (!tokenizer || !local || !starts || !t->text || !t->sizes || !t->heads || !t->tails || !t->count)
        goto done;
    if (!PyUnicode_Check(t->text) || !PyDict_Check(t->sizes) || !PyDict_Check(t->heads) || !PyDict_Check(t->tails)) {
        PyErr_SetString(PyExc_TypeError, "not a units.TokenMeter");
        goto done;
    }
    t->local = PyObject_IsTrue(local);
    if (t->local < 0 || PyObject_GetBuffer(starts, &t->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    if (t->view.itemsize != 8 || t->view.format == NULL || (strcmp(t->view.format, "q") && strcmp(t->view.format, "l")
                                                          && strcmp(t->view.format, "<q") && strcmp(t->view.format, "<l"))) {
        PyBuffer_Release(&t->view);
        PyErr_SetString(PyExc_TypeError, "TokenMeter.starts must be an int64 array");
        goto done;
    }
    t->starts = t->view.buf;
    t->n_starts = t->view.len / 8;
    t->kind = PyUnicode_KIND(t->text);
    t->data = PyUnicode_DATA(t->text);
    t->n = PyUnicode_GET_LENGTH(t->text);
    failed = 0;
done:
    Py_XDECREF(tokenizer);
    Py_XDECREF(local);
    Py_XDECREF(starts);
    return failed;
}

/* -- the meter -------------------------------------------------------------------------------- */

static Py_ssize_t m_size(Packer *pk, Py_ssize_t a, Py_ssize_t b)
{
    if (pk->chars)
        return b - a;
    if (pk->tokens)
        return token_size(pk->tokens, a, b);
    return call_pos(pk->meter, "size", "(nn)", a, b);
}

static Py_ssize_t m_estimate(Packer *pk, Py_ssize_t a, Py_ssize_t b)
{
    if (pk->chars)
        return b - a;
    if (pk->tokens)
        return starts_left(pk->tokens, b) - starts_left(pk->tokens, a);
    return call_pos(pk->meter, "estimate", "(nn)", a, b);
}

static Py_ssize_t m_advance(Packer *pk, Py_ssize_t start, Py_ssize_t budget)
{
    if (pk->chars)
        return start + budget < pk->length ? start + budget : pk->length;
    if (pk->tokens)
        return token_advance(pk->tokens, start, budget);
    return call_pos(pk->meter, "advance", "(nn)", start, budget);
}

static Py_ssize_t m_back(Packer *pk, Py_ssize_t end, Py_ssize_t budget)
{
    if (pk->chars)
        return end - budget > 0 ? end - budget : 0;
    if (pk->tokens)
        return token_back(pk->tokens, end, budget);
    return call_pos(pk->meter, "back", "(nn)", end, budget);
}

/* -- graphemes -------------------------------------------------------------------------------- */

static Py_ssize_t is_cluster_boundary(Packer *pk, Py_ssize_t pos)
{
    if (pos <= 0 || pos >= pk->length)
        return 1;
    Py_UCS4 c = CH(pk, pos), before = CH(pk, pos - 1);
    if (c < 0x80 && before < 0x80)
        return !(before == '\r' && c == '\n');
    int joins = has_class(c, C_CONTINUES) || has_class(before, C_CONTINUES); /* -1 (an error) counts as yes */
    if (!joins && c != '\n' && before != '\r')
        return 1;
    return call_pos(pk->packer, "_is_cluster_boundary", "(n)", pos);
}

/* _cluster_boundary(low, high, last=...): on ASCII every position is a boundary but inside CR LF */
static Py_ssize_t cluster_boundary(Packer *pk, Py_ssize_t low, Py_ssize_t high, int last)
{
    if (low < 0 || low > high || high > pk->length || !simple_clusters(pk, low - 2, high + 2))
        return call_pos_last(pk->packer, "_cluster_boundary", NULL, low, high, last);
    if (last && high - low > 512)
        low = high - 512;
    if (!last && high - low > 512)
        high = low + 512;
    if (last) {
        for (Py_ssize_t p = high; p >= low; p--)
            if (!(p > 0 && p < pk->length && CH(pk, p - 1) == '\r' && CH(pk, p) == '\n'))
                return p;
        return NONE;
    }
    for (Py_ssize_t p = low; p <= high; p++)
        if (!(p > 0 && p < pk->length && CH(pk, p - 1) == '\r' && CH(pk, p) == '\n'))
            return p;
    return NONE;
}

/* -- textual levels on ASCII text -------------------------------------------------------------- */

static int is_terminator(Py_UCS4 c) { return c == '.' || c == '!' || c == '?' || c == 0x2026; }        /* [.!?…] */
static int is_cjk_terminator(Py_UCS4 c) { return c == 0x3002 || c == 0xFF01 || c == 0xFF1F; }         /* [。！？] */
static int is_closer(Py_UCS4 c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == 0x201D || c == 0x2019; }
static int is_opener(Py_UCS4 c) { return c == '"' || c == '\'' || c == '(' || c == '[' || c == 0x201C || c == 0x2018; }
static int is_capital_or_digit(Py_UCS4 c)
{
    if (c < 0x80)
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    return has_class(c, C_CAPITAL) == 1;
}
static int is_decimal(Py_UCS4 c) { return c < 0x80 ? c >= '0' && c <= '9' : has_class(c, C_DECIMAL) == 1; }

/* (?=["'“‘(\[]?[\p{Lu}\p{N}\p{Lo}]) at p, the text ending at endpos */
static int sentence_lookahead(Packer *pk, Py_ssize_t p, Py_ssize_t endpos)
{
    if (p >= endpos)
        return 0;
    Py_UCS4 c = CH(pk, p);
    if (is_capital_or_digit(c))
        return 1;
    return is_opener(c) && p + 1 < endpos && is_capital_or_digit(CH(pk, p + 1));
}

static const char *ABBREVIATIONS[] = {"Mr", "Mrs", "Ms", "Dr", "Prof", "St", "vs", "No", "Fig", "approx", "e.g", "i.e",
                                      "cf", "etc", NULL};

/* Before `from`: start of the text, white space or "(" (the lookbehind's (?:^|[\s(])) */
static int word_starts_at(Packer *pk, Py_ssize_t from)
{
    if (from == 0)
        return 1;
    Py_UCS4 c = CH(pk, from - 1);
    return RX_SPACE(c) || c == '(';
}

/* The lookbehind (?:^|[\s(])(?:\d{1,3}|[A-Za-z]|Mr|...|etc) matches ending at q: not a sentence end */
static int abbreviation_before(Packer *pk, Py_ssize_t q)
{
    Py_ssize_t digits = 0;
    while (q - digits > 0 && digits < 4 && is_decimal(CH(pk, q - digits - 1)))
        digits++;
    if (digits >= 1 && digits <= 3 && word_starts_at(pk, q - digits))
        return 1;
    if (q >= 1) {
        Py_UCS4 c = CH(pk, q - 1);
        if (((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) && word_starts_at(pk, q - 1))
            return 1;
    }
    for (const char **word = ABBREVIATIONS; *word; word++) {
        Py_ssize_t len = (Py_ssize_t)strlen(*word);
        if (q < len)
            continue;
        Py_ssize_t k = 0;
        while (k < len && CH(pk, q - len + k) == (Py_UCS4)(*word)[k])
            k++;
        if (k == len && word_starts_at(pk, q - len))
            return 1;
    }
    return 0;
}

/* The sentence alternative matched right to left ending at p, in [pos, endpos]: its start, or NONE */
static Py_ssize_t sentence_ending_at(Packer *pk, Py_ssize_t p, Py_ssize_t pos, Py_ssize_t endpos)
{
    if (!sentence_lookahead(pk, p, endpos))
        return NONE;
    Py_ssize_t q = p;
    while (q > pos && RX_SPACE(CH(pk, q - 1)))
        q--;
    if (q == p)
        return NONE;
    while (q > pos && is_closer(CH(pk, q - 1)))
        q--;
    Py_ssize_t run_end = q;
    while (q > pos && is_terminator(CH(pk, q - 1)))
        q--;
    if (q == run_end)
        return NONE;
    if (!abbreviation_before(pk, q))
        return q;
    return run_end - q >= 2 ? q + 1 : NONE;
}

/* The sentence pattern (both alternatives) matched right to left ending at p: its start, or NONE */
static Py_ssize_t any_sentence_ending_at(Packer *pk, Py_ssize_t p, Py_ssize_t pos, Py_ssize_t endpos)
{
    Py_ssize_t s = sentence_ending_at(pk, p, pos, endpos);
    if (s != NONE || p - 1 < pos || !is_cjk_terminator(CH(pk, p - 1)))
        return s;
    s = p - 1;
    while (s > pos && is_cjk_terminator(CH(pk, s - 1)))
        s--;
    return s;
}

/* \n[^\S\n]*\n matched right to left ending at p, in [pos, endpos]: its start, or NONE */
static Py_ssize_t paragraph_ending_at(Packer *pk, Py_ssize_t p, Py_ssize_t pos)
{
    if (p - 2 < pos || CH(pk, p - 1) != '\n')
        return NONE;
    Py_ssize_t q = p - 1;
    while (q > pos && CH(pk, q - 1) != '\n' && RX_SPACE(CH(pk, q - 1)))
        q--;
    return q > pos && CH(pk, q - 1) == '\n' ? q - 1 : NONE;
}

/* The sentence alternative matched left to right from s, in [s, endpos]: its end, or NONE */
static Py_ssize_t sentence_from(Packer *pk, Py_ssize_t s, Py_ssize_t endpos)
{
    if (s >= endpos || !is_terminator(CH(pk, s)) || abbreviation_before(pk, s))
        return NONE;
    Py_ssize_t q = s;
    while (q < endpos && is_terminator(CH(pk, q)))
        q++;
    while (q < endpos && is_closer(CH(pk, q)))
        q++;
    Py_ssize_t spaces = q;
    while (q < endpos && RX_SPACE(CH(pk, q)))
        q++;
    if (q == spaces || !sentence_lookahead(pk, q, endpos))
        return NONE;
    return q;
}

/* The sentence pattern (both alternatives) matched left to right from s: its end, or NONE */
static Py_ssize_t any_sentence_from(Packer *pk, Py_ssize_t s, Py_ssize_t endpos)
{
    Py_ssize_t e = sentence_from(pk, s, endpos);
    if (e != NONE || s >= endpos || !is_cjk_terminator(CH(pk, s)))
        return e;
    e = s + 1;
    while (e < endpos && is_cjk_terminator(CH(pk, e)))
        e++;
    return e;
}

/* \n[^\S\n]*\n matched left to right from s: its end, or NONE */
static Py_ssize_t paragraph_from(Packer *pk, Py_ssize_t s, Py_ssize_t endpos)
{
    if (s >= endpos || CH(pk, s) != '\n')
        return NONE;
    Py_ssize_t q = s + 1;
    while (q < endpos && CH(pk, q) != '\n' && RX_SPACE(CH(pk, q)))
        q++;
    return q < endpos && CH(pk, q) == '\n' ? q + 1 : NONE;
}

/* The start of the match ending at p (right to left) of a level, or NONE */
static Py_ssize_t match_ending_at(Packer *pk, int code, Py_ssize_t p, Py_ssize_t pos, Py_ssize_t endpos)
{
    Py_ssize_t s;
    switch (code) {
    case LEVEL_PARAGRAPH:
        return paragraph_ending_at(pk, p, pos);
    case LEVEL_LINE:
        return p - 1 >= pos && CH(pk, p - 1) == '\n' ? p - 1 : NONE;
    case LEVEL_SENTENCE:
        return any_sentence_ending_at(pk, p, pos, endpos);
    case LEVEL_SENTENCE_OR_PARAGRAPH:
        s = any_sentence_ending_at(pk, p, pos, endpos);
        return s != NONE ? s : paragraph_ending_at(pk, p, pos);
    case LEVEL_WORD:
        if (p - 1 < pos || !RX_SPACE(CH(pk, p - 1)))
            return NONE;
        s = p - 1;
        while (s > pos && RX_SPACE(CH(pk, s - 1)))
            s--;
        return s;
    }
    return NONE;
}

/* The end of the match starting at s (left to right) of a level, or NONE */
static Py_ssize_t match_from(Packer *pk, int code, Py_ssize_t s, Py_ssize_t endpos)
{
    Py_ssize_t e;
    switch (code) {
    case LEVEL_PARAGRAPH:
        return paragraph_from(pk, s, endpos);
    case LEVEL_LINE:
        return s < endpos && CH(pk, s) == '\n' ? s + 1 : NONE;
    case LEVEL_SENTENCE:
        return any_sentence_from(pk, s, endpos);
    case LEVEL_SENTENCE_OR_PARAGRAPH:
        e = any_sentence_from(pk, s, endpos);
        return e != NONE ? e : paragraph_from(pk, s, endpos);
    case LEVEL_WORD:
        if (s >= endpos || !RX_SPACE(CH(pk, s)))
            return NONE;
        e = s + 1;
        while (e < endpos && RX_SPACE(CH(pk, e)))
            e++;
        return e;
    }
    return NONE;
}

/* _find_level(level, low, high, last=...) */
static Py_ssize_t find_level(Packer *pk, int index, Py_ssize_t low, Py_ssize_t high, int last)
{
    int code = pk->level_codes[index];
    if (code == LEVEL_GRAPHEME)
        return cluster_boundary(pk, low, high, last);
    Py_ssize_t pos = low - 1 > 0 ? low - 1 : 0;
    if (code == LEVEL_OTHER || low > high || high > pk->length)
        return call_pos_last(pk->packer, "_find_level", pk->level_objects[index], low, high, last);
    if (code == LEVEL_PARAGRAPH || code == LEVEL_LINE) {
        /* Both end after a newline: go from newline to newline (a fast search) instead of by character. */
        Py_ssize_t endpos = high;
        if (last) {
            Py_ssize_t i = PyUnicode_FindChar(pk->text, '\n', pos, endpos, -1);
            while (i >= 0) {
                Py_ssize_t p = i + 1, s = match_ending_at(pk, code, p, pos, endpos);
                if (s == NONE) {
                    i = PyUnicode_FindChar(pk->text, '\n', pos, i, -1);
                    continue;
                }
                if (p < low)
                    return NONE;
                Py_ssize_t boundary = is_cluster_boundary(pk, p);
                if (boundary == ERR)
                    return ERR;
                if (boundary)
                    return p;
                if (s <= pos)
                    return NONE;
                endpos = s; /* search again before this match */
                i = PyUnicode_FindChar(pk->text, '\n', pos, endpos, -1);
            }
            return i == -2 ? ERR : NONE;
        }
        Py_ssize_t i = PyUnicode_FindChar(pk->text, '\n', pos, high, 1);
        while (i >= 0) {
            Py_ssize_t e = match_from(pk, code, i, high);
            if (e == NONE) {
                i = PyUnicode_FindChar(pk->text, '\n', i + 1, high, 1);
                continue;
            }
            if (low <= e && e <= high) {
                Py_ssize_t boundary = is_cluster_boundary(pk, e);
                if (boundary == ERR)
                    return ERR;
                if (boundary)
                    return e;
            }
            i = PyUnicode_FindChar(pk->text, '\n', e, high, 1); /* search again from the match end */
        }
        return i == -2 ? ERR : NONE;
    }
    if (last) {
        Py_ssize_t endpos = high;
        for (Py_ssize_t p = endpos; p >= pos; p--) {
            Py_ssize_t s = match_ending_at(pk, code, p, pos, endpos);
            if (s == NONE)
                continue;
            if (p < low)
                return NONE;
            Py_ssize_t boundary = is_cluster_boundary(pk, p);
            if (boundary == ERR)
                return ERR;
            if (boundary)
                return p;
            if (s <= pos)
                return NONE;
            endpos = s; /* search again before this match */
            p = endpos + 1;
        }
        return NONE;
    }
    for (Py_ssize_t s = pos; s < high; s++) {
        Py_ssize_t e = match_from(pk, code, s, high);
        if (e == NONE)
            continue;
        if (low <= e && e <= high) {
            Py_ssize_t boundary = is_cluster_boundary(pk, e);
            if (boundary == ERR)
                return ERR;
            if (boundary)
                return e;
        }
        s = (e > s ? e : e + 1) - 1; /* search again from the match end */
    }
    return NONE;
}

/* -- the packer's methods ---------------------------------------------------------------------- */

static Py_ssize_t trim_end(Packer *pk, Py_ssize_t start, Py_ssize_t end)
{
    while (end > start && Py_UNICODE_ISSPACE(CH(pk, end - 1)))
        end--;
    return end;
}

static Py_ssize_t next_text(Packer *pk, Py_ssize_t pos)
{
    while (pos < pk->plan_end && Py_UNICODE_ISSPACE(CH(pk, pos)))
        pos++;
    return pos;
}

static Py_ssize_t skip_space(Packer *pk, Py_ssize_t pos, Py_ssize_t limit)
{
    Py_ssize_t first = pos;
    while (first < limit && Py_UNICODE_ISSPACE(CH(pk, first)))
        first++;
    if (first >= limit)
        return first;
    Py_ssize_t boundary = is_cluster_boundary(pk, first);
    if (boundary == ERR)
        return ERR;
    if (first == pos) {
        if (boundary)
            return first;
        Py_ssize_t before = cluster_boundary(pk, first - 64 > 0 ? first - 64 : 0, first, 1);
        if (before == ERR)
            return ERR;
        return before == NONE || before == 0 ? first : before;
    }
    if (!boundary)
        return first - 1;
    Py_ssize_t newline = PyUnicode_FindChar(pk->text, '\n', pos, first, -1);
    Py_ssize_t line_start = newline != -1 ? newline + 1
                            : (pos == 0 || CH(pk, pos - 1) == '\n' ? pos : first);
    if (line_start < first) {
        if (first - line_start > 32)
            return first;
        Py_ssize_t size = m_size(pk, line_start, first);
        if (size == ERR)
            return ERR;
        if (size * 2 > pk->max_size)
            return first;
    }
    return line_start;
}

static Py_ssize_t heading_end(Packer *pk, Py_ssize_t pos, Py_ssize_t otherwise)
{
    Py_ssize_t k = bisect_left(&pk->heading_starts, pos);
    if (k < pk->heading_starts.n && pk->heading_starts.v[k] == pos)
        return pk->heading_end_values.v[k];
    return otherwise;
}

static int mid_line_of_group(Packer *pk, Py_ssize_t pos)
{
    Py_ssize_t k = bisect_left(&pk->line_group_starts, pos) - 1;
    return k >= 0 && pos < pk->line_group_reach.v[k] && CH(pk, pos - 1) != '\n';
}

static Py_ssize_t whole_line_end(Packer *pk, Py_ssize_t start, Py_ssize_t prev_end, Py_ssize_t end)
{
    if (!mid_line_of_group(pk, end))
        return end;
    Py_ssize_t newline = PyUnicode_FindChar(pk->text, '\n', start > prev_end ? start : prev_end, end, -1);
    if (newline == -1 || !has_non_space(pk, start, newline + 1))
        return end;
    return newline + 1;
}

static Py_ssize_t trailing_heading(Packer *pk, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t k = bisect_left(&pk->headings, end) - 1;
    if (k < 0 || pk->headings.v[k] <= start)
        return NONE;
    Py_ssize_t pos = pk->headings.v[k];
    return has_non_space(pk, heading_end(pk, pos, pos), end) ? NONE : pos;
}

static int has_body(Packer *pk, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t cursor = heading_end(pk, start, start);
    Py_ssize_t i = bisect_right(&pk->headings, start);
    while (i < pk->headings.n && pk->headings.v[i] < end) {
        Py_ssize_t pos = pk->headings.v[i];
        if (has_non_space(pk, cursor, pos))
            return 1;
        Py_ssize_t after = heading_end(pk, pos, pos);
        if (after > cursor)
            cursor = after;
        i++;
    }
    return has_non_space(pk, cursor, end);
}

static Py_ssize_t ceiling(Packer *pk, Py_ssize_t low, Py_ssize_t high)
{
    Py_ssize_t i = bisect_left(&pk->positions, low), j = bisect_right(&pk->positions, high);
    Py_ssize_t top = -1;
    for (Py_ssize_t k = i; k < j; k++)
        if (pk->scores.v[k] > top)
            top = pk->scores.v[k];
    return top > pk->level_top ? top : pk->level_top;
}

/* _best: the best-scored boundary in [low, high] and its score (*score -1 and NONE when none) */
static Py_ssize_t best(Packer *pk, Py_ssize_t low, Py_ssize_t high, int last, Py_ssize_t floor, Py_ssize_t *score)
{
    Py_ssize_t best_score = -1, best_pos = NONE;
    Py_ssize_t i = bisect_left(&pk->positions, low), j = bisect_right(&pk->positions, high);
    for (Py_ssize_t k = i; k < j; k++) {
        Py_ssize_t s = pk->scores.v[k];
        if (s > best_score || (s == best_score && last)) {
            best_score = s;
            best_pos = pk->positions.v[k];
        }
    }
    for (int index = 0; index < pk->n_levels; index++) {
        Py_ssize_t level_score = pk->level_scores[index];
        if (level_score <= best_score || level_score < floor)
            continue;
        Py_ssize_t pos = find_level(pk, index, low, high, last);
        if (pos == ERR)
            return ERR;
        if (pos != NONE) {
            *score = level_score;
            return pos;
        }
    }
    if (best_score >= floor && best_pos != NONE) {
        *score = best_score;
        return best_pos;
    }
    *score = -1;
    return NONE;
}

static Py_ssize_t smallest_end(Packer *pk, Py_ssize_t start, Py_ssize_t prev_end)
{
    Py_ssize_t high = pk->plan_end < prev_end + 512 ? pk->plan_end : prev_end + 512;
    Py_ssize_t after = cluster_boundary(pk, prev_end + 1, high, 0);
    if (after == ERR)
        return ERR;
    Py_ssize_t end = after != NONE ? after : (pk->plan_end < prev_end + 1 ? pk->plan_end : prev_end + 1);
    return end > start + 1 ? end : start + 1;
}

static Py_ssize_t first_forced(Packer *pk, Py_ssize_t start, Py_ssize_t prev_end, Py_ssize_t reach)
{
    Py_ssize_t i = bisect_right(&pk->forced, prev_end), j = bisect_right(&pk->forced, reach);
    for (Py_ssize_t k = i; k < j; k++) {
        Py_ssize_t pos = pk->forced.v[k];
        if (pos < pk->plan_end && has_body(pk, start, pos) && trailing_heading(pk, start, pos) == NONE) {
            if (pk->min_size == 0)
                return pos;
            Py_ssize_t size = m_size(pk, start, trim_end(pk, start, pos));
            if (size == ERR)
                return ERR;
            if (size >= pk->min_size)
                return pos;
        }
    }
    return NONE;
}

/* 1 or 0; -1: a Python exception */
static int group_fits_alone(Packer *pk, Py_ssize_t k)
{
    if (pk->group_fits[k] >= 0)
        return pk->group_fits[k];
    Py_ssize_t g_start = pk->group_starts.v[k], g_end = pk->group_ends.v[k];
    Py_ssize_t begin = skip_space(pk, g_start, g_end);
    if (begin == ERR)
        return -1;
    Py_ssize_t end = trim_end(pk, begin, g_end);
    Py_ssize_t estimate = m_estimate(pk, begin, end);
    if (estimate == ERR)
        return -1;
    int fits = 0;
    if ((double)estimate <= (double)pk->max_size * 1.25 + 4) {
        Py_ssize_t size = m_size(pk, begin, end);
        if (size == ERR)
            return -1;
        fits = size <= pk->max_size;
    }
    pk->group_fits[k] = (signed char)fits;
    return fits;
}

static Py_ssize_t kept_group_start(Packer *pk, Py_ssize_t start, Py_ssize_t prev_end, Py_ssize_t reach)
{
    Py_ssize_t i = bisect_right(&pk->group_starts, start > prev_end ? start : prev_end);
    for (Py_ssize_t k = i; k < pk->group_starts.n; k++) {
        Py_ssize_t g_start = pk->group_starts.v[k], g_end = pk->group_ends.v[k];
        if (g_start >= reach)
            break;
        if (g_end <= reach || g_start <= start)
            continue;
        int fits = group_fits_alone(pk, k);
        if (fits < 0)
            return ERR;
        if (!fits)
            continue;
        if (pk->min_size) {
            Py_ssize_t size = m_size(pk, start, trim_end(pk, start, g_start));
            if (size == ERR)
                return ERR;
            if (size < pk->min_size)
                continue;
        }
        if (has_non_space(pk, start, g_start))
            return g_start;
    }
    return NONE;
}

/* _choose_end: the end in (prev_end, reach]; *clean: no overlap after it */
static Py_ssize_t choose_end(Packer *pk, Py_ssize_t start, Py_ssize_t reach, Py_ssize_t prev_end, int *clean)
{
    if (reach > pk->plan_end)
        reach = pk->plan_end;
    Py_ssize_t forced = first_forced(pk, start, prev_end, reach);
    if (forced == ERR)
        return ERR;
    Py_ssize_t kept = kept_group_start(pk, start, prev_end, reach);
    if (kept == ERR)
        return ERR;
    if (forced != NONE || kept != NONE) {
        *clean = 1;
        if (forced == NONE)
            return kept;
        return kept == NONE || forced < kept ? forced : kept;
    }
    if (reach >= pk->plan_end) {
        *clean = 1;
        return reach;
    }
    Py_ssize_t fill_from = start + (Py_ssize_t)((double)(reach - start) * pk->fill);
    Py_ssize_t early_from = start + (Py_ssize_t)((double)(reach - start) * pk->fill * 0.4);
    if (fill_from < prev_end + 1)
        fill_from = prev_end + 1;
    if (early_from < prev_end + 1)
        early_from = prev_end + 1;
    Py_ssize_t lows[2] = {fill_from, prev_end + 1};
    for (int round = 0; round < 2; round++) {
        Py_ssize_t low = lows[round];
        if (low > reach)
            continue;
        Py_ssize_t score;
        Py_ssize_t pos = best(pk, low, reach, 1, 0, &score);
        if (pos == ERR)
            return ERR;
        if (low == fill_from && early_from < fill_from && score + 10 <= ceiling(pk, early_from, fill_from - 1)) {
            Py_ssize_t early_score;
            Py_ssize_t early = best(pk, early_from, fill_from - 1, 1, 0, &early_score);
            if (early == ERR)
                return ERR;
            if (early != NONE && early_score >= score + 10) {
                pos = early;
                score = early_score;
            }
        }
        if (pos != NONE) {
            pos = whole_line_end(pk, start, prev_end, pos);
            Py_ssize_t heading = trailing_heading(pk, start, pos);
            if (heading != NONE && heading > prev_end && has_body(pk, start, heading)) {
                *clean = 1;
                return heading;
            }
            *clean = 0;
            return pos;
        }
    }
    *clean = 0;
    return smallest_end(pk, start, prev_end);
}

static Py_ssize_t choose_verified_end(Packer *pk, Py_ssize_t start, Py_ssize_t prev_end, int *clean,
                                      Py_ssize_t *size_out)
{
    Py_ssize_t budget = pk->max_size;
    for (int attempt = 0; attempt < 12; attempt++) {
        Py_ssize_t reach = m_advance(pk, start, budget);
        if (reach == ERR)
            return ERR;
        if (reach < start + 1)
            reach = start + 1;
        if (reach <= prev_end)
            reach = prev_end + 1;
        Py_ssize_t limit = pk->plan_end < reach + 64 ? pk->plan_end : reach + 64;
        while (reach < limit && Py_UNICODE_ISSPACE(CH(pk, reach)))
            reach++;
        Py_ssize_t end = choose_end(pk, start, reach < pk->plan_end ? reach : pk->plan_end, prev_end, clean);
        if (end == ERR)
            return ERR;
        Py_ssize_t size = m_size(pk, start, trim_end(pk, start, end));
        if (size == ERR)
            return ERR;
        if (size <= pk->max_size) {
            *size_out = size;
            return end;
        }
        if (end <= prev_end + 1)
            break;
        Py_ssize_t step = budget / 50 > 1 ? budget / 50 : 1;
        budget = budget - (size - pk->max_size) - step;
        if (budget < 1)
            budget = 1;
        Py_ssize_t again = m_advance(pk, start, budget);
        if (again == ERR)
            return ERR;
        if (again <= prev_end)
            break;
    }
    Py_ssize_t end = smallest_end(pk, start, prev_end);
    if (end == ERR)
        return ERR;
    *clean = 0;
    Py_ssize_t size = m_size(pk, start, trim_end(pk, start, end));
    if (size == ERR)
        return ERR;
    *size_out = size;
    return end;
}

static Py_ssize_t overlap_start(Packer *pk, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t low = m_back(pk, end, pk->overlap);
    if (low == ERR)
        return ERR;
    if (low < start + 1)
        low = start + 1;
    if (low >= end)
        return end;
    Py_ssize_t score;
    Py_ssize_t pos = best(pk, low, end - 1, 0, pk->overlap_floor, &score);
    if (pos == ERR)
        return ERR;
    Py_ssize_t trimmed_end = trim_end(pk, start, end);
    int found = 0;
    for (int attempt = 0; attempt < 16; attempt++) {
        if (pos == NONE || pos <= start || pos >= end)
            return end;
        Py_ssize_t from = skip_space(pk, pos, end);
        if (from == ERR)
            return ERR;
        Py_ssize_t size = m_size(pk, from, trimmed_end);
        if (size == ERR)
            return ERR;
        if (size <= pk->overlap) {
            found = 1;
            break;
        }
        pos = best(pk, pos + 1, end - 1, 0, pk->overlap_floor, &score);
        if (pos == ERR)
            return ERR;
    }
    if (!found)
        return end;
    if (mid_line_of_group(pk, pos)) {
        Py_ssize_t newline = PyUnicode_FindChar(pk->text, '\n', pos, end, 1);
        if (newline == -1 || newline + 1 >= end)
            return end;
        pos = newline + 1;
    }
    Py_ssize_t k = bisect_left(&pk->heading_starts, pos) - 1;
    if (k >= 0 && pos < pk->heading_end_values.v[k]) {
        pos = pk->heading_end_values.v[k];
        Py_ssize_t next = skip_space(pk, pos, end);
        if (next == ERR)
            return ERR;
        if (next >= end)
            return end;
    }
    k = bisect_right(&pk->forced, pos);
    if (k < pk->forced.n && pk->forced.v[k] < end)
        return pk->forced.v[k];
    return pos;
}

static int append_span(Packer *pk, PyObject *out, PyObject *span_type, Py_ssize_t start, Py_ssize_t end,
                       Py_ssize_t size)
{
    PyObject *reason;
    if (size > pk->max_size) {
        reason = PyObject_CallMethod(pk->packer, "_over_budget_reason", "(nn)", start, end);
    } else {
        reason = PyUnicode_FromStringAndSize("", 0);
    }
    if (reason == NULL)
        return -1;
    PyObject *fields = Py_BuildValue("(nnnN)", start, end, size, reason);
    if (fields == NULL)
        return -1;
    PyObject *arguments = PyTuple_Pack(1, fields);
    Py_DECREF(fields);
    if (arguments == NULL)
        return -1;
    /* tuple.__new__(Span, fields): the named tuple without its Python-level __new__ */
    PyObject *span = PyTuple_Type.tp_new((PyTypeObject *)span_type, arguments, NULL);
    Py_DECREF(arguments);
    if (span == NULL)
        return -1;
    int failed = PyList_Append(out, span);
    Py_DECREF(span);
    return failed;
}

static PyObject *pack(Packer *pk, PyObject *span_type)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
#define CHECK(x)                                                                              \
    do {                                                                                      \
        if ((x) == ERR) {                                                                     \
            if (!PyErr_Occurred())                                                            \
                PyErr_Format(PyExc_SystemError, "_pack: internal error at line %d", __LINE__); \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)
    Py_ssize_t start = skip_space(pk, pk->plan_start, pk->plan_end);
    CHECK(start);
    Py_ssize_t prev_end = start, last_end = start;
    while (start < pk->plan_end) {
        int clean = 0;
        Py_ssize_t size = 0;
        Py_ssize_t end = choose_verified_end(pk, start, prev_end, &clean, &size);
        CHECK(end);
        if (start < last_end && PyList_GET_SIZE(out) > 0 && (size > pk->max_size || mid_line_of_group(pk, end))) {
            Py_ssize_t after = next_text(pk, last_end);
            if (after > start)
                start = after;
            end = choose_verified_end(pk, start, prev_end > start ? prev_end : start, &clean, &size);
            CHECK(end);
        }
        Py_ssize_t trimmed_end = trim_end(pk, start, end);
        if (trimmed_end > start && append_span(pk, out, span_type, start, trimmed_end, size) < 0)
            goto fail;
        if (end >= pk->plan_end)
            break;
        Py_ssize_t rest = skip_space(pk, end, pk->plan_end);
        CHECK(rest);
        if (rest >= pk->plan_end)
            break;
        last_end = end;
        Py_ssize_t next_start = end;
        if (!clean && pk->overlap != 0) {
            next_start = overlap_start(pk, start, end);
            CHECK(next_start);
        }
        start = skip_space(pk, next_start, pk->plan_end);
        CHECK(start);
        Py_ssize_t after = next_text(pk, end);
        prev_end = after > start ? after : start;
        if (PyErr_Occurred()) /* a character class lookup failed */
            goto fail;
    }
    if (PyErr_Occurred())
        goto fail;
    return out;
fail:
#undef CHECK
    Py_DECREF(out);
    return NULL;
}

static int read_int(PyObject *obj, const char *name, Py_ssize_t *out)
{
    PyObject *value = PyObject_GetAttrString(obj, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int read_array(PyObject *obj, const char *name, Array *out)
{
    PyObject *value = PyObject_GetAttrString(obj, name);
    if (value == NULL)
        return -1;
    int failed = to_array(value, out);
    Py_DECREF(value);
    return failed;
}

typedef struct {
    Py_ssize_t key, value;
} Pair;

static int compare_pairs(const void *a, const void *b)
{
    const Pair *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

static int new_array(Array *a, Py_ssize_t n)
{
    a->v = PyMem_Malloc((n > 0 ? n : 1) * sizeof(Py_ssize_t));
    a->n = 0;
    if (a->v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static Py_ssize_t group_field(PyObject *group, Py_ssize_t index)
{
    if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) < 4) {
        PyErr_SetString(PyExc_TypeError, "plan.groups must hold Group tuples");
        return ERR;
    }
    Py_ssize_t value = PyLong_AsSsize_t(PyTuple_GET_ITEM(group, index));
    return value == -1 && PyErr_Occurred() ? ERR : value;
}

/* The packer's lookups (Packer._index in packer.py), built from the plan: forced boundaries (score >=
 * forced_score), headings (sorted, with their ends; the forced ones), group starts and ends, and the
 * bodies of line groups (tables, code) by start with the furthest end so far. */
static int build_index(Packer *pk, PyObject *plan, Py_ssize_t forced_score, PyObject *line_kinds)
{
    int failed = -1;
    PyObject *groups = NULL, *heading_ends = NULL;
    Pair *pairs = NULL;
    if (read_array(plan, "positions", &pk->positions) || read_array(plan, "scores", &pk->scores))
        goto done;
    if (pk->positions.n != pk->scores.n) {
        PyErr_SetString(PyExc_ValueError, "plan.positions and plan.scores differ in length");
        goto done;
    }
    if (new_array(&pk->forced, pk->positions.n))
        goto done;
    for (Py_ssize_t i = 0; i < pk->positions.n; i++)
        if (pk->scores.v[i] >= forced_score)
            pk->forced.v[pk->forced.n++] = pk->positions.v[i];

    heading_ends = PyObject_GetAttrString(plan, "heading_ends");
    if (heading_ends == NULL)
        goto done;
    if (!PyDict_Check(heading_ends)) {
        PyErr_SetString(PyExc_TypeError, "plan.heading_ends must be a dict");
        goto done;
    }
    Py_ssize_t n_headings = PyDict_GET_SIZE(heading_ends);
    pairs = PyMem_Malloc((n_headings > 0 ? n_headings : 1) * sizeof(Pair));
    if (pairs == NULL || new_array(&pk->heading_starts, n_headings) || new_array(&pk->heading_end_values, n_headings)) {
        if (pairs == NULL)
            PyErr_NoMemory();
        goto done;
    }
    PyObject *key, *value;
    Py_ssize_t cursor = 0, k = 0;
    while (PyDict_Next(heading_ends, &cursor, &key, &value)) {
        pairs[k].key = PyLong_AsSsize_t(key);
        pairs[k].value = PyLong_AsSsize_t(value);
        if (PyErr_Occurred())
            goto done;
        k++;
    }
    qsort(pairs, (size_t)k, sizeof(Pair), compare_pairs);
    for (Py_ssize_t i = 0; i < k; i++) {
        pk->heading_starts.v[i] = pairs[i].key;
        pk->heading_end_values.v[i] = pairs[i].value;
    }
    pk->heading_starts.n = pk->heading_end_values.n = k;
    if (new_array(&pk->headings, pk->forced.n))
        goto done;
    for (Py_ssize_t i = 0; i < pk->forced.n; i++) {
        Py_ssize_t j = bisect_left(&pk->heading_starts, pk->forced.v[i]);
        if (j < pk->heading_starts.n && pk->heading_starts.v[j] == pk->forced.v[i])
            pk->headings.v[pk->headings.n++] = pk->forced.v[i];
    }

    groups = PyObject_GetAttrString(plan, "groups");
    if (groups == NULL)
        goto done;
    if (!PyList_Check(groups)) {
        PyErr_SetString(PyExc_TypeError, "plan.groups must be a list");
        goto done;
    }
    Py_ssize_t n_groups = PyList_GET_SIZE(groups);
    PyMem_Free(pairs);
    pairs = PyMem_Malloc((n_groups > 0 ? n_groups : 1) * sizeof(Pair));
    if (pairs == NULL || new_array(&pk->group_starts, n_groups) || new_array(&pk->group_ends, n_groups)
            || new_array(&pk->line_group_starts, n_groups) || new_array(&pk->line_group_reach, n_groups)) {
        if (pairs == NULL)
            PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_line_groups = 0;
    for (Py_ssize_t i = 0; i < n_groups; i++) {
        PyObject *group = PyList_GET_ITEM(groups, i);
        Py_ssize_t start = group_field(group, 1), end = group_field(group, 2), body = group_field(group, 3);
        if (start == ERR || end == ERR || body == ERR)
            goto done;
        pk->group_starts.v[i] = start;
        pk->group_ends.v[i] = end;
        int is_line_group = PySet_Contains(line_kinds, PyTuple_GET_ITEM(group, 0));
        if (is_line_group < 0)
            goto done;
        if (is_line_group) {
            pairs[n_line_groups].key = body;
            pairs[n_line_groups].value = end;
            n_line_groups++;
        }
    }
    pk->group_starts.n = pk->group_ends.n = n_groups;
    qsort(pairs, (size_t)n_line_groups, sizeof(Pair), compare_pairs);
    Py_ssize_t reach = 0;
    for (Py_ssize_t i = 0; i < n_line_groups; i++) {
        pk->line_group_starts.v[i] = pairs[i].key;
        reach = i == 0 || pairs[i].value > reach ? pairs[i].value : reach;
        pk->line_group_reach.v[i] = reach;
    }
    pk->line_group_starts.n = pk->line_group_reach.n = n_line_groups;
    failed = 0;
done:
    PyMem_Free(pairs);
    Py_XDECREF(groups);
    Py_XDECREF(heading_ends);
    return failed;
}

/* spans(packer, span_type, level_codes, char_classes, forced_score, line_group_kinds, token_meter) -> [Span]
 * token_meter: the packer's meter when it is a units.TokenMeter (counted here), else None */
static PyObject *spans(PyObject *self, PyObject *args)
{
    PyObject *packer, *span_type, *level_codes, *classifier, *line_kinds, *token_meter;
    Py_ssize_t forced_score;
    if (!PyArg_ParseTuple(args, "OOOOnOO", &packer, &span_type, &level_codes, &classifier, &forced_score, &line_kinds,
                          &token_meter))
        return NULL;
    if (!PyAnySet_Check(line_kinds)) {
        PyErr_SetString(PyExc_TypeError, "line_group_kinds must be a set");
        return NULL;
    }
    if (use_classifier(classifier) < 0)
        return NULL;
    if (!PyType_Check(span_type) || !PyType_IsSubtype((PyTypeObject *)span_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "span_type must be a tuple subclass");
        return NULL;
    }
    Packer pk;
    TokenMeter tokens;
    memset(&pk, 0, sizeof pk);
    memset(&tokens, 0, sizeof tokens);
    PyObject *result = NULL, *plan = NULL, *levels = NULL, *fill = NULL, *unit = NULL;
    pk.packer = packer;
    pk.text = PyObject_GetAttrString(packer, "text");
    pk.meter = PyObject_GetAttrString(packer, "meter");
    plan = PyObject_GetAttrString(packer, "plan");
    levels = PyObject_GetAttrString(packer, "_levels");
    if (!pk.text || !pk.meter || !plan || !levels)
        goto done;
    if (!PyUnicode_Check(pk.text)) {
        PyErr_SetString(PyExc_TypeError, "packer.text must be a str");
        goto done;
    }
    pk.kind = PyUnicode_KIND(pk.text);
    pk.data = PyUnicode_DATA(pk.text);
    pk.is_ascii = PyUnicode_IS_ASCII(pk.text);
    pk.length = PyUnicode_GET_LENGTH(pk.text);
    unit = PyObject_GetAttrString(pk.meter, "unit");
    if (unit == NULL)
        goto done;
    pk.chars = PyUnicode_Check(unit) && PyUnicode_CompareWithASCIIString(unit, "chars") == 0;
    fill = PyObject_GetAttrString(plan, "fill");
    if (fill == NULL)
        goto done;
    pk.fill = PyFloat_AsDouble(fill);
    if (pk.fill == -1.0 && PyErr_Occurred())
        goto done;
    if (read_int(plan, "start", &pk.plan_start) || read_int(plan, "end", &pk.plan_end)
            || read_int(plan, "overlap_floor", &pk.overlap_floor) || read_int(packer, "max_size", &pk.max_size)
            || read_int(packer, "overlap", &pk.overlap) || read_int(packer, "min_size", &pk.min_size)
            || read_int(packer, "_level_top", &pk.level_top) || build_index(&pk, plan, forced_score, line_kinds))
        goto done;
    if (pk.plan_start < 0 || pk.plan_end > pk.length) {
        PyErr_SetString(PyExc_ValueError, "plan.start and plan.end must lie within the text");
        goto done;
    }
    if (!PyTuple_Check(levels) || !PyTuple_Check(level_codes) || PyTuple_GET_SIZE(levels) != PyTuple_GET_SIZE(level_codes)
            || PyTuple_GET_SIZE(levels) > 16) {
        PyErr_SetString(PyExc_ValueError, "levels and level codes must be tuples of the same length (at most 16)");
        goto done;
    }
    pk.n_levels = (int)PyTuple_GET_SIZE(levels);
    for (int i = 0; i < pk.n_levels; i++) {
        PyObject *level = PyTuple_GET_ITEM(levels, i);
        pk.level_objects[i] = level;
        pk.level_codes[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(level_codes, i));
        Py_ssize_t score;
        if (read_int(level, "score", &score))
            goto done;
        pk.level_scores[i] = (int)score;
    }
    if (PyErr_Occurred())
        goto done;
    pk.group_fits = PyMem_Malloc(pk.group_starts.n > 0 ? pk.group_starts.n : 1);
    if (pk.group_fits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memset(pk.group_fits, -1, pk.group_starts.n > 0 ? pk.group_starts.n : 1);
    if (token_meter != Py_None) {
        if (token_meter_init(&tokens, token_meter) < 0)
            goto done;
        pk.tokens = &tokens;
    }
    result = pack(&pk, span_type);
done:
    Py_XDECREF(pk.text);
    Py_XDECREF(pk.meter);
    Py_XDECREF(plan);
    Py_XDECREF(levels);
    Py_XDECREF(fill);
    Py_XDECREF(unit);
    Array *arrays[] = {&pk.positions, &pk.scores, &pk.group_starts, &pk.group_ends, &pk.forced, &pk.headings,
                       &pk.heading_starts, &pk.heading_end_values, &pk.line_group_starts, &pk.line_group_reach};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        PyMem_Free(arrays[i]->v);
    PyMem_Free(pk.group_fits);
    token_meter_release(&tokens);
    return result;
}

/* -- findings (chunking/findings.py: check_spans without the reviewer constraints) -------------- */

/* findings._SENTENCE_END's class: . ! ? … 。！？ : ; and packer.SENTENCE_MARKS */
static int is_sentence_end_char(Py_UCS4 c)
{
    return c == '.' || c == '!' || c == '?' || c == 0x2026 || c == 0x3002 || c == 0xFF01 || c == 0xFF1F || c == ':'
           || c == ';' || c == 0x0964 || c == 0x0965 || c == 0x061F || c == 0x06D4 || c == 0x0589 || c == 0x1362
           || c == 0x1367 || c == 0x1368 || c == 0x17D4 || c == 0x17D5 || c == 0x104B;
}

/* packer.PHRASE_SPACED: Thai and Lao */
static int is_phrase_letter(Py_UCS4 c) { return (c >= 0x0E01 && c <= 0x0E5B) || (c >= 0x0E81 && c <= 0x0EDF); }

static int is_end_closer(Py_UCS4 c) /* ['"”’)\]] */
{
    return c == '\'' || c == '"' || c == 0x201D || c == 0x2019 || c == ')' || c == ']';
}

/* _SENTENCE_END.search(text[a:b]) is not None:  [.!?…。！？:;]['"”’)\]]*$ | ^\s*$   ($: the end, or
 * before a final newline) */
static int sentence_end_in(Packer *pk, Py_ssize_t a, Py_ssize_t b)
{
    int all_space = 1;
    for (Py_ssize_t i = a; i < b; i++)
        if (!RX_SPACE(CH(pk, i))) {
            all_space = 0;
            break;
        }
    if (all_space)
        return 1;
    for (int variant = 0; variant < 2; variant++) {
        Py_ssize_t e = b;
        if (variant == 1) {
            if (e > a && CH(pk, e - 1) == '\n')
                e--;
            else
                break;
        }
        while (e > a && is_end_closer(CH(pk, e - 1)))
            e--;
        if (e > a && is_sentence_end_char(CH(pk, e - 1)))
            return 1;
    }
    return 0;
}

static int clean_start(Packer *pk, Py_ssize_t start, Py_ssize_t doc_start)
{
    Py_ssize_t pos = start;
    while (pos > doc_start && Py_UNICODE_ISSPACE(CH(pk, pos - 1))) {
        if (CH(pk, pos - 1) == '\n')
            return 1;
        pos--;
    }
    if (pos <= doc_start)
        return 1;
    if (pos < start && start < pk->length && is_phrase_letter(CH(pk, pos - 1)) && is_phrase_letter(CH(pk, start)))
        return 1;
    return sentence_end_in(pk, pos - 4 > doc_start ? pos - 4 : doc_start, pos);
}

static int clean_end(Packer *pk, Py_ssize_t end)
{
    if (sentence_end_in(pk, end - 4 > 0 ? end - 4 : 0, end))
        return 1;
    if (end > 0 && end < pk->length && is_phrase_letter(CH(pk, end - 1))) {
        Py_ssize_t after = end, limit = end + 200 < pk->length ? end + 200 : pk->length;
        while (after < limit && CH(pk, after) != '\n' && Py_UNICODE_ISSPACE(CH(pk, after)))
            after++;
        if (after > end && after < pk->length && is_phrase_letter(CH(pk, after)))
            return 1;
    }
    Py_ssize_t stop = end + 200 < pk->length ? end + 200 : pk->length;
    Py_ssize_t newline = end <= stop ? PyUnicode_FindChar(pk->text, '\n', end, stop, 1) : -1;
    return newline >= 0 && !has_non_space(pk, end, newline);
}

/* _ends_with_heading */
static int ends_with_heading(Packer *pk, const Array *heading_starts, Py_ssize_t start, Py_ssize_t end)
{
    if (heading_starts->n) {
        Py_ssize_t i = bisect_right(heading_starts, end) - 1;
        if (i < 0 || !(start < heading_starts->v[i] && heading_starts->v[i] < end))
            return 0;
        Py_ssize_t line_end = PyUnicode_FindChar(pk->text, '\n', heading_starts->v[i], end, 1);
        if (line_end < 0)
            return 1; /* nothing after the heading's line */
        Py_ssize_t a = line_end, b = end;
        while (a < b && Py_UNICODE_ISSPACE(CH(pk, a)))
            a++;
        while (b > a && Py_UNICODE_ISSPACE(CH(pk, b - 1)))
            b--;
        for (Py_ssize_t k = a; k < b; k++)
            if (CH(pk, k) != '=' && CH(pk, k) != '-')
                return 0;
        return 1;
    }
    /* _ATX_LINE on the last 300 characters: their last line opens an ATX heading, and the chunk holds more */
    Py_ssize_t tail = end - 300 > start ? end - 300 : start;
    Py_ssize_t newline = PyUnicode_FindChar(pk->text, '\n', tail, end, -1);
    Py_ssize_t line = newline >= 0 ? newline + 1 : tail;
    Py_ssize_t p = line, spaces = 0;
    while (p < end && CH(pk, p) == ' ' && spaces < 3) {
        p++;
        spaces++;
    }
    Py_ssize_t run = 0;
    while (p < end && CH(pk, p) == '#') {
        p++;
        run++;
    }
    if (run < 1 || run > 6 || !(p == end || CH(pk, p) == ' ' || CH(pk, p) == '\t'))
        return 0;
    return end - start > end - line;
}

typedef struct {
    Py_ssize_t index; /* in the plan's order */
    Py_ssize_t start, end, body_start;
    int kind; /* 0 procedure, 1 list, 2 table, 3 code */
} CutGroup;

static const char *const GROUP_KINDS[] = {"procedure", "list", "table", "code"};
static const char *const GROUP_CODES[] = {"split_procedure", "split_list", "split_table", "split_code"};

static int compare_by_body(const void *a, const void *b)
{
    const CutGroup *x = a, *y = b;
    if (x->body_start != y->body_start)
        return x->body_start < y->body_start ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int compare_by_start(const void *a, const void *b)
{
    const CutGroup *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

typedef struct {
    Py_ssize_t start, index;
} Extent;

static int compare_extents(const void *a, const void *b) /* by start, then index: a stable order */
{
    const Extent *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static Py_ssize_t content_end(Packer *pk, Py_ssize_t end)
{
    while (end > 0 && Py_UNICODE_ISSPACE(CH(pk, end - 1)))
        end--;
    return end;
}

/* _GroupCuts._between_members: pos lies between nested code groups inside g and inside none */
static int between_members(const CutGroup *g, Py_ssize_t pos, const CutGroup *code, const Array *code_starts)
{
    if (g->kind != 3)
        return 0;
    Py_ssize_t i = bisect_left(code_starts, g->start), j = bisect_right(code_starts, g->end);
    int any = 0;
    Py_ssize_t first = 0;
    for (Py_ssize_t k = i; k < j; k++) {
        const CutGroup *m = &code[k];
        if (m->index == g->index || m->end > g->end)
            continue;
        if (!any || m->start < first)
            first = m->start;
        any = 1;
    }
    if (!any || pos < first)
        return 0;
    for (Py_ssize_t k = i; k < j; k++) {
        const CutGroup *m = &code[k];
        if (m->index == g->index || m->end > g->end)
            continue;
        if (m->start < pos && pos < m->end)
            return 0;
    }
    return 1;
}

static int append_code(PyObject *codes, PyObject *code)
{
    int present = PySequence_Contains(codes, code);
    if (present < 0)
        return -1;
    return present ? 0 : PyList_Append(codes, code);
}

/* check_spans(text, spans, heading_starts, groups, doc_start, min_size, char_classes) -> [[code]] */
static PyObject *check_spans(PyObject *self, PyObject *args)
{
    PyObject *text, *spans_list, *heading_list, *groups, *classifier;
    Py_ssize_t doc_start, min_size;
    if (!PyArg_ParseTuple(args, "UO!OO!nnO", &text, &PyList_Type, &spans_list, &heading_list, &PyList_Type, &groups,
                          &doc_start, &min_size, &classifier))
        return NULL;
    if (use_classifier(classifier) < 0)
        return NULL;
    Packer pk;
    memset(&pk, 0, sizeof pk);
    pk.text = text;
    pk.kind = PyUnicode_KIND(text);
    pk.data = PyUnicode_DATA(text);
    pk.is_ascii = PyUnicode_IS_ASCII(text);
    pk.length = PyUnicode_GET_LENGTH(text);
    Py_ssize_t n = PyList_GET_SIZE(spans_list), n_groups = 0, n_code = 0, n_active = 0, next = 0, last_pos = -1;
    Array headings = {NULL, 0}, code_starts = {NULL, 0};
    Py_ssize_t *starts = NULL, *ends = NULL, *sizes = NULL, *span_starts = NULL, *reach = NULL;
    char *over = NULL;
    Extent *order = NULL;
    CutGroup *cut = NULL, *code = NULL;
    Py_ssize_t *active = NULL;
    PyObject *results = NULL, *codes_text[10] = {NULL};
    static const char *const NAMES[] = {"over_budget", "mid_sentence_start", "mid_sentence_end", "heading_at_end",
                                        "undersized", "high_overlap", "split_procedure", "split_list",
                                        "split_table", "split_code"};
    for (int i = 0; i < 10; i++)
        if ((codes_text[i] = PyUnicode_InternFromString(NAMES[i])) == NULL)
            goto done;
    if (to_array(heading_list, &headings))
        goto done;
    Py_ssize_t size = n > 0 ? n : 1;
    starts = PyMem_Malloc(size * sizeof(Py_ssize_t));
    ends = PyMem_Malloc(size * sizeof(Py_ssize_t));
    sizes = PyMem_Malloc(size * sizeof(Py_ssize_t));
    span_starts = PyMem_Malloc(size * sizeof(Py_ssize_t));
    reach = PyMem_Malloc(size * sizeof(Py_ssize_t));
    over = PyMem_Malloc(size);
    order = PyMem_Malloc(size * sizeof(Extent));
    Py_ssize_t group_room = PyList_GET_SIZE(groups) > 0 ? PyList_GET_SIZE(groups) : 1;
    cut = PyMem_Malloc(group_room * sizeof(CutGroup));
    code = PyMem_Malloc(group_room * sizeof(CutGroup));
    active = PyMem_Malloc(group_room * sizeof(Py_ssize_t));
    if (!starts || !ends || !sizes || !span_starts || !reach || !over || !order || !cut || !code || !active
            || new_array(&code_starts, group_room)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *span = PyList_GET_ITEM(spans_list, i);
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) < 4) {
            PyErr_SetString(PyExc_TypeError, "spans must be Span tuples");
            goto done;
        }
        starts[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
        ends[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
        sizes[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 2));
        int truth = PyObject_IsTrue(PyTuple_GET_ITEM(span, 3));
        if (truth < 0 || PyErr_Occurred())
            goto done;
        over[i] = (char)truth;
        if (starts[i] < 0 || ends[i] > pk.length || starts[i] > ends[i]) {
            PyErr_SetString(PyExc_ValueError, "a span lies outside the text");
            goto done;
        }
        order[i].start = starts[i];
        order[i].index = i;
    }
    /* chunks by start, with the furthest end among those starting at or before each */
    qsort(order, (size_t)n, sizeof(Extent), compare_extents);
    Py_ssize_t furthest = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        span_starts[i] = order[i].start;
        Py_ssize_t e = ends[order[i].index];
        furthest = e > furthest ? e : furthest;
        reach[i] = furthest;
    }
    Array span_start_array = {span_starts, n};
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(groups); i++) {
        PyObject *group = PyList_GET_ITEM(groups, i);
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) < 4 || !PyUnicode_Check(PyTuple_GET_ITEM(group, 0))) {
            PyErr_SetString(PyExc_TypeError, "groups must be Group tuples");
            goto done;
        }
        int kind = -1;
        for (int k = 0; k < 4; k++)
            if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(group, 0), GROUP_KINDS[k]) == 0)
                kind = k;
        if (kind < 0)
            continue;
        CutGroup g = {n_groups, group_field(group, 1), group_field(group, 2), group_field(group, 3), kind};
        if (g.start == ERR || g.end == ERR || g.body_start == ERR)
            goto done;
        cut[n_groups++] = g;
        if (kind == 3)
            code[n_code++] = g;
    }
    qsort(cut, (size_t)n_groups, sizeof(CutGroup), compare_by_body);
    qsort(code, (size_t)n_code, sizeof(CutGroup), compare_by_start);
    for (Py_ssize_t i = 0; i < n_code; i++)
        code_starts.v[i] = code[i].start;
    code_starts.n = n_code;

    results = PyList_New(n);
    if (results == NULL)
        goto done;
    for (Py_ssize_t index = 0; index < n; index++) {
        PyObject *codes = PyList_New(0);
        if (codes == NULL)
            goto fail;
        PyList_SET_ITEM(results, index, codes);
        Py_ssize_t start = starts[index], end = ends[index];
        int is_last = index == n - 1;
        if (over[index] && PyList_Append(codes, codes_text[0]) < 0)
            goto fail;
        if (index > 0 && !clean_start(&pk, start, doc_start) && PyList_Append(codes, codes_text[1]) < 0)
            goto fail;
        if (!is_last && !clean_end(&pk, end) && PyList_Append(codes, codes_text[2]) < 0)
            goto fail;
        if (!is_last) {
            /* _GroupCuts.codes(end) */
            Py_ssize_t pos = end;
            if (pos < last_pos) {
                next = 0;
                n_active = 0;
            }
            last_pos = pos;
            while (next < n_groups && cut[next].body_start < pos)
                active[n_active++] = next++;
            Py_ssize_t kept = 0;
            for (Py_ssize_t k = 0; k < n_active; k++)
                if (cut[active[k]].end > pos)
                    active[kept++] = active[k];
            n_active = kept;
            /* in the plan's order */
            for (Py_ssize_t k = 1; k < n_active; k++) {
                Py_ssize_t j = k;
                while (j > 0 && cut[active[j - 1]].index > cut[active[j]].index) {
                    Py_ssize_t t = active[j - 1];
                    active[j - 1] = active[j];
                    active[j] = t;
                    j--;
                }
            }
            for (Py_ssize_t k = 0; k < n_active; k++) {
                const CutGroup *g = &cut[active[k]];
                if (!has_non_space(&pk, pos, g->end) || between_members(g, pos, code, &code_starts))
                    continue;
                Py_ssize_t holder = bisect_right(&span_start_array, g->start);
                if (holder > 0 && reach[holder - 1] >= content_end(&pk, g->end))
                    continue; /* some chunk holds the whole group */
                if (append_code(codes, codes_text[6 + g->kind]) < 0)
                    goto fail;
            }
            if (ends_with_heading(&pk, &headings, start, end) && PyList_Append(codes, codes_text[3]) < 0)
                goto fail;
        }
        if (min_size && sizes[index] < min_size && n > 1 && PyList_Append(codes, codes_text[4]) < 0)
            goto fail;
        if (index > 0) {
            Py_ssize_t shared = ends[index - 1] - start;
            if (shared > 0 && shared * 2 > end - start && PyList_Append(codes, codes_text[5]) < 0)
                goto fail;
        }
        if (PyErr_Occurred())
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(results);
done:
    for (int i = 0; i < 10; i++)
        Py_XDECREF(codes_text[i]);
    PyMem_Free(headings.v);
    PyMem_Free(code_starts.v);
    PyMem_Free(starts);
    PyMem_Free(ends);
    PyMem_Free(sizes);
    PyMem_Free(span_starts);
    PyMem_Free(reach);
    PyMem_Free(over);
    PyMem_Free(order);
    PyMem_Free(cut);
    PyMem_Free(code);
    PyMem_Free(active);
    return results;
}

/* -- token starts (units.TiktokenTokenizer.token_starts) ---------------------------------------- */

/* token_starts(text, ids, byte_lengths) -> bytes of int64: the character offset at which each token
 * starts, a token that starts inside a character's UTF-8 bytes counting from that character.
 * ids: the token ids (a list of ints); byte_lengths: int64 buffer, the UTF-8 length of each id. */
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
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), ascii = PyUnicode_IS_ASCII(text);
    Py_ssize_t character = 0, character_byte = 0; /* the character holding byte `byte`, and its first byte */
    long long byte = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        long id = PyLong_AsLong(PyList_GET_ITEM(ids, k));
        if (id == -1 && PyErr_Occurred())
            goto fail;
        if (id < 0 || id >= n_lengths) {
            PyErr_SetString(PyExc_ValueError, "a token id has no byte length");
            goto fail;
        }
        if (ascii) {
            result[k] = byte;
        } else {
            while (character < length) {
                Py_UCS4 c = PyUnicode_READ(kind, data, character);
                Py_ssize_t width = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
                if (character_byte + width > byte)
                    break;
                character_byte += width;
                character++;
            }
            result[k] = character;
        }
        byte += length_of[id];
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&lengths);
    return out;
}

static PyMethodDef methods[] = {
    {"token_starts", token_starts, METH_VARARGS,
     "token_starts(text, ids, byte_lengths) -> bytes of int64 character offsets; see chunking/units.py"},
    {"check_spans", check_spans, METH_VARARGS,
     "check_spans(text, spans, heading_starts, groups, doc_start, min_size, char_classes) -> [[code]]; "
     "see chunking/findings.py"},
    {"spans", spans, METH_VARARGS,
     "spans(packer, span_type, level_codes, char_classes, forced_score, line_group_kinds, token_meter) -> [Span]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "chunkyard.chunking._pack", "The packer, token meter and findings of chunking, in C.", -1, methods,
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
