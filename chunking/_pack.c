/* Two hot paths of the chunking core, in C: each is the Python function of the same name, which stays
 * the reference (tests/core/test_packer_native.py holds them equal) and the fallback when this module
 * is not built.
 *
 *   check_spans   findings.check_spans, all but the reviewer-constraint finding
 *   token_starts  units.TiktokenTokenizer.token_starts
 *
 * The greedy packer that lived here is gone: boundaries are chosen by the segmenter
 * (chunking/segmenter.py, its optimiser in chunking/_segment.c) and ``fixed`` is packed by
 * ``Packer._spans`` in Python. Each code point's character classes are asked of Python
 * (``packer._char_classes``, the regex classes) the first time it is met, and kept.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NONE (-1) /* "no position" (Python's None); positions are >= 0 */

typedef struct {
    Py_ssize_t *v;
    Py_ssize_t n;
} Array;

/* The text check_spans reads. */
typedef struct {
    PyObject *text;
    int kind;
    const void *data;
    int is_ascii;
    Py_ssize_t length;
} Packer;

#define CH(pk, i) PyUnicode_READ((pk)->kind, (pk)->data, (i))
#define ASCII_SPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r')) /* regex's \s on ASCII */
/* regex's \s; an exception in the class lookup reads as "no" and is checked by the caller */
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
