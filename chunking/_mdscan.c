/* The Markdown line scanner of chunking/markdown.py (``_scan_lines``), in C.
 *
 * The same lines, the same block rules, the same boundary scores and groups: the Python scanner is
 * the reference, and tests/test_markdown_native.py checks that both give the same structure on the
 * real corpora and on generated Markdown. Each line pattern of markdown.py is matched here by hand,
 * with the semantics of Python's ``re`` on ``str`` (\s is Py_UNICODE_ISSPACE, \d Py_UNICODE_ISDECIMAL,
 * $ the end of the line: a line holds no "\n"); the comment above each matcher gives its pattern.
 *
 * scan_lines(text, start, end, lone_cr) -> (headings, positions, scores, groups)
 *   headings: [(start, end, level, title)]      in document order
 *   positions, scores: the boundaries, sorted by position
 *   groups: [(kind, anchor, end, body_start, header_end, label)]   header_end is -1 but for tables
 * Python builds the contexts of the groups, the breadcrumbs and the section groups from these.
 *
 * structure(text, start, end, lone_cr, Heading, Group) -> the same, as markdown.scan keeps it, and the
 *   lines a block quote may open (markdown._quote_heads)
 * commonmark_lists(text, start, end, Group) -> [Group]   markdown._commonmark_lists
 * indented_units(text, begin, end, Group) -> [Group]     markdown._indented_units
 * group_units(text, groups, Group) -> [Group]            markdown._group_units
 * merged_units(nested, lists, groups) -> [Group]         markdown._merged_units
 *   the lists as CommonMark delimits them, the nested lists and fenced code read by indentation
 *   inside one list, the units derived from each scanned group, and their union with the lists:
 *   loops with no rules of their own, held equal to the Python twins.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define HEADING_BASE 97
#define BLOCK 60
#define LIST_ITEM_TOP 40
#define CODE_BLANK 35
#define LIST_ITEM_NESTED 32
#define TABLE_ROW 30
#define LEAD_IN 25
#define CODE_LINE 22
#define PARAGRAPH_LINE 15
#define TABLE_FIRST_ROW 12
#define LIST_CONTINUATION 12
#define AFTER_HEADING 13

typedef struct {
    PyObject *text;
    int kind;
    const void *data;
    Py_ssize_t *starts; /* line i is [starts[i], ends[i]) */
    Py_ssize_t *ends;
    Py_UCS4 *firsts;    /* first character after spaces and tabs; 0 for none */
    char *plain;        /* no block pattern can match the line */
    char *blank;
    Py_ssize_t n;
} Doc;

#define CH(d, i) PyUnicode_READ((d)->kind, (d)->data, (i))
#define SPACE_OR_TAB(c) ((c) == ' ' || (c) == '\t')
/* str.isdigit / \d (Py_UNICODE_ISDECIMAL) of c, without the call for ASCII */
#define IS_DIGIT(c) ((c) < 128 ? ((c) >= '0' && (c) <= '9') : Py_UNICODE_ISDIGIT(c))
#define IS_DECIMAL(c) ((c) < 128 ? ((c) >= '0' && (c) <= '9') : Py_UNICODE_ISDECIMAL(c))

/* text.find(ch, p, e) for an ASCII ch in text of `kind` at `data` (-1: none), as PyUnicode_FindChar
 * finds it, without its call: memchr on 1-byte text; on 2-byte text memchr for the low byte, each hit
 * checked as the whole code unit it is part of; on 4-byte text a plain loop */
static inline Py_ssize_t find_ascii(int kind, const void *data, Py_UCS4 ch, Py_ssize_t p, Py_ssize_t e)
{
    if (p >= e)
        return -1;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = data;
        const Py_UCS1 *hit = memchr(s + p, (int)ch, (size_t)(e - p));
        return hit == NULL ? -1 : hit - s;
    }
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *s = data;
        const Py_UCS2 *q = s + p, *end = s + e;
        while (q < end) {
            const unsigned char *hit = memchr(q, (int)ch, (size_t)(end - q) * sizeof(Py_UCS2));
            if (hit == NULL)
                return -1;
            const Py_UCS2 *unit = s + (hit - (const unsigned char *)s) / (Py_ssize_t)sizeof(Py_UCS2);
            if (*unit == ch)
                return unit - s;
            q = unit + 1;
        }
        return -1;
    }
    const Py_UCS4 *s = data;
    for (Py_ssize_t i = p; i < e; i++)
        if (s[i] == ch)
            return i;
    return -1;
}

#define FIND(d, ch, p, e) find_ascii((d)->kind, (d)->data, (ch), (p), (e))

/* " {0,3}": up to three spaces; returns the position after them. */
static Py_ssize_t up_to_three_spaces(const Doc *d, Py_ssize_t p, Py_ssize_t e)
{
    int k = 0;
    while (k < 3 && p < e && CH(d, p) == ' ') {
        p++;
        k++;
    }
    return p;
}

/* _HTML_COMMENT   {0,3}<!--   -> the match end, or -1 */
static Py_ssize_t html_comment(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    if (p + 4 <= e && CH(d, p) == '<' && CH(d, p + 1) == '!' && CH(d, p + 2) == '-' && CH(d, p + 3) == '-')
        return p + 4;
    return -1;
}

/* "-->" in text[s:e] */
static int comment_closes(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    for (Py_ssize_t p = FIND(d, '>', s + 2, e); p >= 0; p = FIND(d, '>', p + 1, e))
        if (CH(d, p - 1) == '-' && CH(d, p - 2) == '-')
            return 1;
    return 0;
}

/* "\r?$" at p */
static int cr_end(const Doc *d, Py_ssize_t p, Py_ssize_t e)
{
    if (p < e && CH(d, p) == '\r')
        p++;
    return p == e;
}

/* _ATX_OPEN   {0,3}(#{1,6})(?=[ \t]|\r?$)   -> level (0: no match), *opened: the match end */
static int atx_open(const Doc *d, Py_ssize_t s, Py_ssize_t e, Py_ssize_t *opened)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    int run = 0;
    while (p < e && CH(d, p) == '#') {
        p++;
        run++;
    }
    if (run < 1 || run > 6)
        return 0;
    if (!(p == e || SPACE_OR_TAB(CH(d, p)) || (CH(d, p) == '\r' && p + 1 == e)))
        return 0;
    *opened = p;
    return run;
}

/* _SETEXT   {0,3}(=+|-+)[ \t]*\r?$   -> '=' or '-' (0: no match) */
static Py_UCS4 setext(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    if (p >= e)
        return 0;
    Py_UCS4 c = CH(d, p);
    if (c != '=' && c != '-')
        return 0;
    while (p < e && CH(d, p) == c)
        p++;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    return cr_end(d, p, e) ? c : 0;
}

/* _FENCE  ( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*?\r?$
 * After the fence run, the rest may hold no backtick (a shorter run would leave one for [^`]). */
static int fence(const Doc *d, Py_ssize_t s, Py_ssize_t e, Py_UCS4 *marker, Py_ssize_t *marker_len,
                 Py_ssize_t *lang_start, Py_ssize_t *lang_end)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    if (p >= e)
        return 0;
    Py_UCS4 c = CH(d, p);
    if (c != '`' && c != '~')
        return 0;
    Py_ssize_t run_start = p;
    while (p < e && CH(d, p) == c)
        p++;
    if (p - run_start < 3)
        return 0;
    for (Py_ssize_t q = p; q < e; q++)
        if (CH(d, q) == '`')
            return 0;
    *marker = c;
    *marker_len = p - run_start;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    *lang_start = p;
    while (p < e && CH(d, p) != '`' && !Py_UNICODE_ISSPACE(CH(d, p)))
        p++;
    *lang_end = p;
    return 1;
}

/* A cell of _TABLE_DELIM:  :?-+:?[ \t]*   -> the position after it, or -1 */
static Py_ssize_t delim_cell(const Doc *d, Py_ssize_t p, Py_ssize_t e)
{
    if (p < e && CH(d, p) == ':')
        p++;
    Py_ssize_t dashes = p;
    while (p < e && CH(d, p) == '-')
        p++;
    if (p == dashes)
        return -1;
    if (p < e && CH(d, p) == ':')
        p++;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    return p;
}

/* _TABLE_DELIM  [ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\r?$ */
static int table_delim(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    if (p < e && CH(d, p) == '|')
        p++;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    p = delim_cell(d, p, e);
    if (p < 0)
        return 0;
    while (p < e && CH(d, p) == '|') {
        Py_ssize_t q = p + 1;
        while (q < e && SPACE_OR_TAB(CH(d, q)))
            q++;
        if (q < e && (CH(d, q) == ':' || CH(d, q) == '-')) {
            p = delim_cell(d, q, e);
            if (p < 0)
                return 0;
        } else {
            p = q; /* the closing pipe and the blanks after it */
            break;
        }
    }
    return cr_end(d, p, e);
}

/* (?:[ \t]+|\r?$) at p */
static int item_tail(const Doc *d, Py_ssize_t p, Py_ssize_t e)
{
    if (p < e && SPACE_OR_TAB(CH(d, p)))
        return 1;
    return cr_end(d, p, e);
}

/* \d{1,9} followed by one of `closers` -> the position after the closer, or -1 */
static Py_ssize_t number_then(const Doc *d, Py_ssize_t p, Py_ssize_t e, const char *closers)
{
    Py_ssize_t digits = p;
    while (p < e && IS_DECIMAL(CH(d, p)))
        p++;
    if (p == digits || p - digits > 9 || p >= e)
        return -1;
    Py_UCS4 c = CH(d, p);
    for (const char *k = closers; *k; k++)
        if (c == (Py_UCS4)*k)
            return p + 1;
    return -1;
}

/* _LIST_ITEM  ([ \t]*)(?:([-*+])|(\d{1,9})[.)]|(?i:step)[ \t]+(\d{1,9})[:.)])(?:[ \t]+|\r?$)
 * -> 1 on a match; *indent_end: the end of group 1; *bullet: group 2 (0 when not a bullet) */
static int list_item(const Doc *d, Py_ssize_t s, Py_ssize_t e, Py_ssize_t *indent_end, Py_UCS4 *bullet)
{
    Py_ssize_t p = s;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    if (p >= e)
        return 0;
    *indent_end = p;
    *bullet = 0;
    Py_UCS4 c = CH(d, p);
    if (c == '-' || c == '*' || c == '+') {
        if (item_tail(d, p + 1, e)) {
            *bullet = c;
            return 1;
        }
        return 0;
    }
    if (IS_DECIMAL(c)) {
        Py_ssize_t q = number_then(d, p, e, ".)");
        return q >= 0 && item_tail(d, q, e);
    }
    /* (?i:step): re's case-insensitive classes are {s, S, ſ}, {t, T}, {e, E}, {p, P} */
    if (p + 4 > e)
        return 0;
    Py_UCS4 c1 = CH(d, p + 1), c2 = CH(d, p + 2), c3 = CH(d, p + 3);
    if (!((c == 's' || c == 'S' || c == 0x17F) && (c1 == 't' || c1 == 'T') && (c2 == 'e' || c2 == 'E')
          && (c3 == 'p' || c3 == 'P')))
        return 0;
    Py_ssize_t q = p + 4;
    if (!(q < e && SPACE_OR_TAB(CH(d, q))))
        return 0;
    while (q < e && SPACE_OR_TAB(CH(d, q)))
        q++;
    q = number_then(d, q, e, ":.)");
    return q >= 0 && item_tail(d, q, e);
}

/* _HR   {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})\r?$ */
static int thematic_break(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    if (p >= e)
        return 0;
    Py_UCS4 c = CH(d, p);
    if (c != '*' && c != '-' && c != '_')
        return 0;
    int count = 0;
    for (; p < e; p++) {
        Py_UCS4 x = CH(d, p);
        if (x == c)
            count++;
        else if (!SPACE_OR_TAB(x) && !(x == '\r' && p + 1 == e))
            return 0;
    }
    return count >= 3;
}

/* _may_be_rule: line.count(marker) >= 3 and _HR.match(line) (the count is implied by the match) */
static int may_be_rule(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    return thematic_break(d, s, e);
}

/* len(indent.expandtabs(4)) for an indent of spaces and tabs */
static Py_ssize_t indent_width(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t col = 0;
    for (Py_ssize_t p = s; p < e; p++)
        col = CH(d, p) == '\t' ? col + 4 - col % 4 : col + 1;
    return col;
}

/* str.strip() bounds of [*s, *e) */
static void strip_bounds(const Doc *d, Py_ssize_t *s, Py_ssize_t *e)
{
    while (*s < *e && Py_UNICODE_ISSPACE(CH(d, *s)))
        (*s)++;
    while (*e > *s && Py_UNICODE_ISSPACE(CH(d, *e - 1)))
        (*e)--;
}

/* closing = line.strip(); closing.startswith(marker * len) and not closing.strip(marker) */
static int closes_fence(const Doc *d, Py_ssize_t s, Py_ssize_t e, Py_UCS4 marker, Py_ssize_t marker_len)
{
    strip_bounds(d, &s, &e);
    if (e - s < marker_len)
        return 0;
    for (Py_ssize_t p = s; p < e; p++)
        if (CH(d, p) != marker)
            return 0;
    return 1;
}

/* _atx_title: the title the heading pattern's lazy group captures, then .strip() */
static PyObject *atx_title(PyObject *text, const Doc *d, Py_ssize_t opened, Py_ssize_t e)
{
    Py_ssize_t p = opened;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    Py_ssize_t body_end = e;
    if (body_end > p && CH(d, body_end - 1) == '\r')
        body_end--;
    while (body_end > p && SPACE_OR_TAB(CH(d, body_end - 1)))
        body_end--;
    Py_ssize_t unclosed = body_end;
    while (unclosed > p && CH(d, unclosed - 1) == '#')
        unclosed--;
    Py_ssize_t title_end = body_end;
    if (unclosed != body_end && unclosed > p && SPACE_OR_TAB(CH(d, unclosed - 1))) {
        title_end = unclosed;
        while (title_end > p && SPACE_OR_TAB(CH(d, title_end - 1)))
            title_end--;
    }
    strip_bounds(d, &p, &title_end);
    return PyUnicode_Substring(text, p, title_end);
}

/* What the line scan found, in C: markdown._scan_lines' headings and groups, before any is a Python
 * object but a heading's title (scan_lines makes its tuples of them, structure its Headings and
 * Groups, each object once) */
typedef struct {
    Py_ssize_t start, end;
    int level;
    PyObject *title; /* owned */
} RawHeading;

enum { KIND_CODE, KIND_TABLE, KIND_LIST, KIND_PROCEDURE, KIND_SECTION, N_KINDS };
static const char *const KIND_NAMES[N_KINDS] = {"code", "table", "list", "procedure", "section"};
/* the kinds as interned strings, made once by the module's init */
static PyObject *KINDS[N_KINDS];

typedef struct {
    int kind;
    Py_ssize_t anchor, end, body, header_end, label_start, label_end;
} RawGroup;

typedef struct {
    PyObject *text;
    Doc *d;
    int *score;
    char *heading_line;
    RawHeading *headings;
    Py_ssize_t n_headings, headings_capacity;
    RawGroup *groups;
    Py_ssize_t n_groups, groups_capacity;
    Py_ssize_t last_block_end_line;
    Py_ssize_t prev_para_start; /* -1: none */
    Py_ssize_t prev_para_line;
    int prev_para_lead_in;
} Scan;

/* mark(): line starts are inside (start, end) for every line but the first */
static void mark(Scan *sc, Py_ssize_t line, int score)
{
    if (line > 0 && sc->score[line] < score)
        sc->score[line] = score;
}

static void mark_block(Scan *sc, Py_ssize_t line)
{
    if (sc->last_block_end_line < 0 || !sc->heading_line[sc->last_block_end_line])
        mark(sc, line, BLOCK);
    else
        mark(sc, line, AFTER_HEADING);
}

/* room for one more of `*n` items of `size` bytes in `*items` (0, else -1 with MemoryError) */
static int grow(void **items, Py_ssize_t n, Py_ssize_t *capacity, size_t size)
{
    if (n < *capacity)
        return 0;
    Py_ssize_t more = *capacity ? *capacity * 2 : 16;
    void *grown = PyMem_Realloc(*items, (size_t)more * size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *capacity = more;
    return 0;
}

/* takes `title` */
static int add_heading(Scan *sc, Py_ssize_t first, Py_ssize_t last, int level, PyObject *title)
{
    if (title == NULL)
        return -1;
    if (grow((void **)&sc->headings, sc->n_headings, &sc->headings_capacity, sizeof(RawHeading)) < 0) {
        Py_DECREF(title);
        return -1;
    }
    sc->headings[sc->n_headings++] = (RawHeading){sc->d->starts[first], sc->d->ends[last], level, title};
    mark(sc, first, HEADING_BASE - level);
    return 0;
}

static int add_group(Scan *sc, int kind, Py_ssize_t anchor, Py_ssize_t end, Py_ssize_t body,
                     Py_ssize_t header_end, Py_ssize_t label_start, Py_ssize_t label_end)
{
    if (grow((void **)&sc->groups, sc->n_groups, &sc->groups_capacity, sizeof(RawGroup)) < 0)
        return -1;
    sc->groups[sc->n_groups++] = (RawGroup){kind, anchor, end, body, header_end, label_start, label_end};
    return 0;
}

/* lead_in_start(): the anchor of a block that starts at `line` */
static Py_ssize_t lead_in_start(Scan *sc, Py_ssize_t line)
{
    if (sc->prev_para_start >= 0 && sc->prev_para_lead_in && sc->last_block_end_line == sc->prev_para_line) {
        mark(sc, line, LEAD_IN);
        sc->score[line] = LEAD_IN;
        return sc->prev_para_start;
    }
    mark_block(sc, line);
    return sc->d->starts[line];
}

static int is_item_first(Py_UCS4 c)
{
    return c == '-' || c == '*' || c == '+' || c == 's' || c == 'S' || c == 0x17F || IS_DIGIT(c);
}

static int run_scan(Scan *sc)
{
    Doc *d = sc->d;
    Py_ssize_t n = d->n, i = 0;
    while (i < n) {
        Py_ssize_t ls = d->starts[i], le = d->ends[i];
        int plain = d->plain[i];
        if (!plain && d->blank[i]) {
            i++;
            continue;
        }
        Py_UCS4 first = d->firsts[i];
        Py_ssize_t comment_end = (!plain && first == '<') ? html_comment(d, ls, le) : -1;
        if (comment_end >= 0) {
            Py_ssize_t j = i;
            while (j < n && !comment_closes(d, j == i ? comment_end : d->starts[j], d->ends[j]))
                j++;
            Py_ssize_t last = j < n ? j : n - 1;
            mark_block(sc, i);
            for (Py_ssize_t k = i + 1; k <= last; k++)
                mark(sc, k, PARAGRAPH_LINE);
            sc->last_block_end_line = last;
            sc->prev_para_start = -1;
            i = last + 1;
            continue;
        }
        Py_UCS4 marker = 0;
        Py_ssize_t marker_len = 0, lang_start = 0, lang_end = 0, opened = 0;
        int is_fence = !plain && (first == '`' || first == '~')
                       && fence(d, ls, le, &marker, &marker_len, &lang_start, &lang_end);
        int level = (!plain && first == '#') ? atx_open(d, ls, le, &opened) : 0;
        if (level && !is_fence) {
            if (add_heading(sc, i, i, level, atx_title(sc->text, d, opened, le)) < 0)
                return -1;
            sc->heading_line[i] = 1;
            sc->last_block_end_line = i;
            sc->prev_para_start = -1;
            i++;
            continue;
        }
        if (is_fence) {
            Py_ssize_t anchor = lead_in_start(sc, i);
            Py_ssize_t j = i + 1;
            while (j < n && !closes_fence(d, d->starts[j], d->ends[j], marker, marker_len))
                j++;
            Py_ssize_t last = j < n ? j : n - 1;
            for (Py_ssize_t k = i + 2; k < last + (j < n ? 0 : 1); k++)
                mark(sc, k, d->blank[k - 1] ? CODE_BLANK : CODE_LINE);
            /* the body starts at the fence itself, after its (at most three) blanks */
            Py_ssize_t body = up_to_three_spaces(d, ls, le);
            if (add_group(sc, KIND_CODE, anchor, d->ends[last], body, -1, lang_start, lang_end) < 0)
                return -1;
            sc->last_block_end_line = last;
            sc->prev_para_start = -1;
            i = last + 1;
            continue;
        }
        if (i + 1 < n && FIND(d, '|', ls, le) >= 0
                && table_delim(d, d->starts[i + 1], d->ends[i + 1])) {
            Py_ssize_t anchor = lead_in_start(sc, i);
            Py_ssize_t j = i + 2;
            while (j < n && !d->blank[j] && FIND(d, '|', d->starts[j], d->ends[j]) >= 0) {
                mark(sc, j, j > i + 2 ? TABLE_ROW : TABLE_FIRST_ROW);
                j++;
            }
            if (add_group(sc, KIND_TABLE, anchor, d->ends[j - 1], ls, d->ends[i + 1], 0, 0) < 0)
                return -1;
            sc->last_block_end_line = j - 1;
            sc->prev_para_start = -1;
            i = j;
            continue;
        }
        Py_ssize_t indent_end = 0;
        Py_UCS4 bullet = 0;
        int item = !plain && is_item_first(first) && list_item(d, ls, le, &indent_end, &bullet);
        if (item && !(bullet && may_be_rule(d, ls, le))) {
            Py_ssize_t anchor = lead_in_start(sc, i);
            Py_ssize_t base_indent = indent_width(d, ls, indent_end);
            int ordered = bullet == 0;
            Py_ssize_t j = i + 1, last = i;
            while (j < n) {
                Py_ssize_t cs = d->starts[j], ce = d->ends[j];
                if (d->blank[j]) {
                    j++;
                    continue;
                }
                int candidate_plain = d->plain[j];
                Py_UCS4 candidate_first = d->firsts[j];
                Py_ssize_t sub_indent_end = 0;
                Py_UCS4 sub_bullet = 0;
                int sub = !candidate_plain && is_item_first(candidate_first)
                          && list_item(d, cs, ce, &sub_indent_end, &sub_bullet);
                Py_ssize_t indent = 0;
                while (cs + indent < ce && SPACE_OR_TAB(CH(d, cs + indent)))
                    indent++;
                if (sub && !(sub_bullet && may_be_rule(d, cs, ce))) {
                    Py_ssize_t sub_indent = indent_width(d, cs, sub_indent_end);
                    if (sub_indent < base_indent)
                        break;
                    mark(sc, j, sub_indent <= base_indent + 1 ? LIST_ITEM_TOP : LIST_ITEM_NESTED);
                } else if (indent > base_indent
                           || (j == last + 1
                               && (candidate_plain
                                   || (!(candidate_first == '#' && atx_open(d, cs, ce, &opened))
                                       && !((candidate_first == '`' || candidate_first == '~')
                                            && fence(d, cs, ce, &marker, &marker_len, &lang_start, &lang_end))
                                       && !(candidate_first == '<' && html_comment(d, cs, ce) >= 0))))) {
                    mark(sc, j, d->blank[j - 1] ? CODE_LINE : LIST_CONTINUATION);
                } else {
                    break;
                }
                last = j;
                j++;
            }
            if (add_group(sc, ordered ? KIND_PROCEDURE : KIND_LIST, anchor, d->ends[last], ls, -1, 0, 0) < 0)
                return -1;
            sc->last_block_end_line = last;
            sc->prev_para_start = -1;
            i = last + 1;
            continue;
        }
        if (!plain && (first == '*' || first == '-' || first == '_') && thematic_break(d, ls, le)) {
            mark_block(sc, i);
            sc->last_block_end_line = i;
            sc->prev_para_start = -1;
            i++;
            continue;
        }
        /* A paragraph: runs until a blank line or a line that starts another block. */
        Py_ssize_t j = i + 1;
        Py_UCS4 setext_char = 0;
        while (j < n) {
            if (d->plain[j]) {
                j++;
                continue;
            }
            Py_ssize_t fs = d->starts[j], fe = d->ends[j];
            if (d->blank[j])
                break;
            Py_UCS4 lead = d->firsts[j];
            Py_UCS4 under = (lead == '=' || lead == '-') ? setext(d, fs, fe) : 0;
            if (under && j == i + 1 && !list_item(d, ls, le, &indent_end, &bullet)) {
                setext_char = under;
                break;
            }
            if ((lead == '#' && atx_open(d, fs, fe, &opened))
                    || ((lead == '`' || lead == '~') && fence(d, fs, fe, &marker, &marker_len, &lang_start, &lang_end))
                    || ((lead == '*' || lead == '-' || lead == '_') && thematic_break(d, fs, fe))
                    || (lead == '<' && html_comment(d, fs, fe) >= 0))
                break;
            if (is_item_first(lead)) {
                Py_ssize_t following_indent_end = 0;
                Py_UCS4 following_bullet = 0;
                if (list_item(d, fs, fe, &following_indent_end, &following_bullet) && following_indent_end == fs)
                    break;
            }
            j++;
        }
        if (setext_char) {
            Py_ssize_t ts = ls, te = le;
            strip_bounds(d, &ts, &te);
            if (add_heading(sc, i, i + 1, setext_char == '=' ? 1 : 2, PyUnicode_Substring(sc->text, ts, te)) < 0)
                return -1;
            sc->heading_line[i + 1] = 1;
            sc->last_block_end_line = i + 1;
            sc->prev_para_start = -1;
            i += 2;
            continue;
        }
        mark_block(sc, i);
        for (Py_ssize_t k = i + 1; k < j; k++)
            mark(sc, k, PARAGRAPH_LINE);
        /* text[line_start:end of line j - 1].rstrip().endswith(":") */
        Py_ssize_t tail = d->ends[j - 1];
        while (tail > ls && Py_UNICODE_ISSPACE(CH(d, tail - 1)))
            tail--;
        sc->prev_para_start = ls;
        sc->prev_para_line = j - 1;
        sc->prev_para_lead_in = tail > ls && CH(d, tail - 1) == ':';
        sc->last_block_end_line = j - 1;
        i = j;
    }
    return 0;
}

/* Lines of text[start:end] as markdown._lines splits them: at "\n", and at a lone "\r" when
 * lone_cr (a "\r" before "\n" stays in its line); no line after a final line break. */
static int split_lines(Doc *d, Py_ssize_t start, Py_ssize_t end, int lone_cr)
{
    Py_ssize_t capacity = 64, n = 0;
    d->starts = PyMem_Malloc(capacity * sizeof(Py_ssize_t));
    d->ends = PyMem_Malloc(capacity * sizeof(Py_ssize_t));
    if (d->starts == NULL || d->ends == NULL)
        return -1;
    Py_ssize_t line_start = start;
    for (Py_ssize_t p = start; p <= end; p++) {
        if (!lone_cr && p < end) { /* jump to the next newline */
            Py_ssize_t next = FIND(d, '\n', p, end);
            p = next == -1 ? end : next;
        }
        int is_break;
        if (p == end) {
            if (line_start == end)
                break; /* the text ends with a line break (or is empty): no line after it */
            is_break = 1;
        } else {
            Py_UCS4 c = CH(d, p);
            is_break = c == '\n' || (lone_cr && c == '\r' && !(p + 1 < end && CH(d, p + 1) == '\n'));
        }
        if (!is_break)
            continue;
        if (n == capacity) {
            capacity *= 2;
            Py_ssize_t *starts = PyMem_Realloc(d->starts, capacity * sizeof(Py_ssize_t));
            if (starts == NULL)
                return -1;
            d->starts = starts;
            Py_ssize_t *ends = PyMem_Realloc(d->ends, capacity * sizeof(Py_ssize_t));
            if (ends == NULL)
                return -1;
            d->ends = ends;
        }
        d->starts[n] = line_start;
        d->ends[n] = p;
        n++;
        line_start = p + 1;
    }
    d->n = n;
    return 0;
}

/* The line scan's result: its headings and groups in C, the boundaries as lists */
typedef struct {
    RawHeading *headings;
    Py_ssize_t n_headings;
    RawGroup *groups;
    Py_ssize_t n_groups;
    PyObject *positions, *scores;
} Raw;

static void raw_release(Raw *raw)
{
    for (Py_ssize_t i = 0; i < raw->n_headings; i++)
        Py_DECREF(raw->headings[i].title);
    PyMem_Free(raw->headings);
    PyMem_Free(raw->groups);
    Py_XDECREF(raw->positions);
    Py_XDECREF(raw->scores);
    *raw = (Raw){0};
}

/* The line scan into `raw` (0; -1 with an exception, `raw` empty); with `quote_heads`, also the start
 * of every line whose first character after at most three spaces or tabs is ">" (markdown._quote_heads:
 * where a block quote's line may begin). */
static int scan_raw(PyObject *text, Py_ssize_t start, Py_ssize_t end, int lone_cr, PyObject *quote_heads, Raw *raw)
{
    *raw = (Raw){0};
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (start < 0 || end > length || start > end) {
        PyErr_SetString(PyExc_ValueError, "scan_lines: start and end must satisfy 0 <= start <= end <= len(text)");
        return -1;
    }
    Doc d = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, NULL, NULL, NULL, NULL, 0};
    Scan sc = {text, &d, NULL, NULL, NULL, 0, 0, NULL, 0, 0, -1, -1, -1, 0};
    int status = -1;
    PyObject *positions = NULL, *scores = NULL;
    if (split_lines(&d, start, end, lone_cr) < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = d.n, size = n > 0 ? n : 1;
    d.firsts = PyMem_Malloc(size * sizeof(Py_UCS4));
    d.plain = PyMem_Malloc(size);
    d.blank = PyMem_Malloc(size);
    sc.score = PyMem_Calloc(size, sizeof(int));
    sc.heading_line = PyMem_Calloc(size, 1);
    if (!d.firsts || !d.plain || !d.blank || !sc.score || !sc.heading_line) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t p = d.starts[i], e = d.ends[i];
        while (p < e && SPACE_OR_TAB(CH(&d, p)))
            p++;
        Py_UCS4 first = p < e ? CH(&d, p) : 0;
        d.firsts[i] = first;
        if (quote_heads != NULL && first == '>' && p - d.starts[i] <= 3) {
            PyObject *head = PyLong_FromSsize_t(d.starts[i]);
            int failed = head == NULL || PyList_Append(quote_heads, head) < 0;
            Py_XDECREF(head);
            if (failed)
                goto done;
        }
        /* _MAY_START_BLOCK: "#`~=-*+_|\rsSſ<", an empty rest, or a digit (str.isdigit) */
        d.plain[i] = !(first == 0 || first == '#' || first == '`' || first == '~' || first == '=' || first == '-'
                       || first == '*' || first == '+' || first == '_' || first == '|' || first == '\r'
                       || first == 's' || first == 'S' || first == 0x17F || first == '<'
                       || IS_DIGIT(first));
        d.blank[i] = cr_end(&d, p, e); /* _BLANK  [ \t]*\r?$ : p is past the line's spaces and tabs */
    }
    if (run_scan(&sc) < 0)
        goto done;
    Py_ssize_t n_marked = 0; /* the lists are made at their size, then filled */
    for (Py_ssize_t i = 1; i < n; i++)
        n_marked += sc.score[i] != 0;
    positions = PyList_New(n_marked);
    scores = PyList_New(n_marked);
    if (!positions || !scores)
        goto done;
    for (Py_ssize_t i = 1, k = 0; i < n; i++) {
        if (sc.score[i] == 0)
            continue;
        PyObject *pos = PyLong_FromSsize_t(d.starts[i]);
        PyObject *score = PyLong_FromLong(sc.score[i]);
        if (pos == NULL || score == NULL) {
            Py_XDECREF(pos);
            Py_XDECREF(score);
            goto done; /* the items not set yet are NULL, which a list's release skips */
        }
        PyList_SET_ITEM(positions, k, pos);
        PyList_SET_ITEM(scores, k, score);
        k++;
    }
    *raw = (Raw){sc.headings, sc.n_headings, sc.groups, sc.n_groups, positions, scores};
    sc.headings = NULL;
    sc.n_headings = 0;
    sc.groups = NULL;
    positions = scores = NULL;
    status = 0;
done:
    for (Py_ssize_t i = 0; i < sc.n_headings; i++)
        Py_DECREF(sc.headings[i].title);
    PyMem_Free(sc.headings);
    PyMem_Free(sc.groups);
    Py_XDECREF(positions);
    Py_XDECREF(scores);
    PyMem_Free(d.starts);
    PyMem_Free(d.ends);
    PyMem_Free(d.firsts);
    PyMem_Free(d.plain);
    PyMem_Free(d.blank);
    PyMem_Free(sc.score);
    PyMem_Free(sc.heading_line);
    return status;
}

static PyObject *scan_lines(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t start, end;
    int lone_cr;
    if (!PyArg_ParseTuple(args, "Unnp", &text, &start, &end, &lone_cr))
        return NULL;
    Raw raw;
    if (scan_raw(text, start, end, lone_cr, NULL, &raw) < 0)
        return NULL;
    PyObject *result = NULL, *headings = PyList_New(raw.n_headings), *groups = PyList_New(raw.n_groups);
    if (headings == NULL || groups == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < raw.n_headings; i++) {
        RawHeading *h = &raw.headings[i];
        PyObject *item = Py_BuildValue("(nniO)", h->start, h->end, h->level, h->title);
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(headings, i, item);
    }
    for (Py_ssize_t i = 0; i < raw.n_groups; i++) {
        RawGroup *g = &raw.groups[i];
        PyObject *label = PyUnicode_Substring(text, g->label_start, g->label_end);
        PyObject *item = label ? Py_BuildValue("(snnnnN)", KIND_NAMES[g->kind], g->anchor, g->end, g->body,
                                               g->header_end, label) : NULL;
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(groups, i, item);
    }
    result = PyTuple_Pack(4, headings, raw.positions, raw.scores, groups);
done:
    Py_XDECREF(headings);
    Py_XDECREF(groups);
    raw_release(&raw);
    return result;
}

/* -- the structure: markdown.scan's steps after the line scan ------------------------------------- */

/* A Group of `type` (a tuple subclass) from its six fields, new references it takes (NULL ones: a
 * failure, with the others released): tuple.__new__(type, fields), as CPython's tuple_subtype_new builds
 * it, without the tuple of fields */
static PyObject *group_from(PyObject *type, PyObject *kind, PyObject *start, PyObject *end, PyObject *body,
                           PyObject *context, PyObject *label)
{
    PyObject *fields[6] = {kind, start, end, body, context, label};
    PyObject *item = NULL;
    int complete = 1;
    for (int i = 0; i < 6; i++)
        complete = complete && fields[i] != NULL;
    if (complete)
        item = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 6);
    if (item == NULL) {
        for (int i = 0; i < 6; i++)
            Py_XDECREF(fields[i]);
        return NULL;
    }
    for (int i = 0; i < 6; i++)
        PyTuple_SET_ITEM(item, i, fields[i]);
    if (!PyObject_GC_IsTracked(item))
        PyObject_GC_Track(item);
    return item;
}

/* _lead_text: " ".join(text[anchor:body].split()) ("" when anchor >= body), the words copied once into
 * a buffer of the text's kind (as long as the span at most), then the string of the narrowest kind */
static PyObject *lead_text(PyObject *text, Py_ssize_t anchor, Py_ssize_t body)
{
    if (anchor >= body)
        return PyUnicode_FromStringAndSize("", 0);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char *joined = PyMem_Malloc((size_t)(body - anchor) * (size_t)kind);
    if (joined == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = 0, p = anchor;
    while (p < body) {
        while (p < body && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, p)))
            p++;
        Py_ssize_t word = p;
        while (p < body && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, p)))
            p++;
        if (p > word) {
            if (n > 0)
                PyUnicode_WRITE(kind, joined, n++, ' ');
            memcpy(joined + n * kind, (const char *)data + word * kind, (size_t)(p - word) * (size_t)kind);
            n += p - word;
        }
    }
    PyObject *result = PyUnicode_FromKindAndData(kind, joined, n);
    PyMem_Free(joined);
    return result;
}

typedef struct {
    Py_ssize_t start, negative_end, order;
    PyObject *group; /* borrowed from the list being sorted */
} SortKey;

static int compare_groups(const void *a, const void *b)
{
    const SortKey *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->negative_end != y->negative_end)
        return x->negative_end < y->negative_end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* structure(text, start, end, lone_cr, Heading, Group)
 *   -> (headings: [Heading], paths: [tuple], positions, scores, groups: [Group] sorted by (start, -end),
 *       quote_heads: [int])
 * markdown.scan's result from the line scan, and the lines that may begin a block quote's line
 * (markdown._quote_heads); tests/test_markdown_native.py holds it equal to Python's. */
static PyObject *structure(PyObject *self, PyObject *args)
{
    PyObject *text, *heading_type, *group_type;
    Py_ssize_t start, end;
    int lone_cr;
    if (!PyArg_ParseTuple(args, "UnnpOO", &text, &start, &end, &lone_cr, &heading_type, &group_type))
        return NULL;
    if (!PyType_Check(heading_type) || !PyType_IsSubtype((PyTypeObject *)heading_type, &PyTuple_Type)
            || !PyType_Check(group_type) || !PyType_IsSubtype((PyTypeObject *)group_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Heading and Group must be tuple subclasses");
        return NULL;
    }
    PyObject *quote_heads = PyList_New(0);
    if (quote_heads == NULL)
        return NULL;
    Raw raw;
    if (scan_raw(text, start, end, lone_cr, quote_heads, &raw) < 0) {
        Py_DECREF(quote_heads);
        return NULL;
    }
    Py_ssize_t n_headings = raw.n_headings, n_raw = raw.n_groups, n_groups = n_raw + n_headings, made = 0;
    PyObject *headings = PyList_New(n_headings), *paths = PyList_New(n_headings), *groups = NULL;
    PyObject *result = NULL, *empty = PyUnicode_FromStringAndSize("", 0), *newline = PyUnicode_FromString("\n");
    Py_ssize_t *stack = PyMem_Malloc((n_headings > 0 ? n_headings : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *ends = PyMem_Malloc((n_headings > 0 ? n_headings : 1) * sizeof(Py_ssize_t));
    /* each group with its sort key; the keys own the groups until the result list takes them */
    SortKey *keys = PyMem_Malloc((n_groups > 0 ? n_groups : 1) * 2 * sizeof(SortKey));
    if (!headings || !paths || !empty || !newline || !stack || !ends || !keys) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    /* headings and breadcrumbs: the titles of the open headings of lower levels, then its own */
    Py_ssize_t depth = 0;
    for (Py_ssize_t i = 0; i < n_headings; i++) {
        const RawHeading *h = &raw.headings[i];
        PyObject *heading = ((PyTypeObject *)heading_type)->tp_alloc((PyTypeObject *)heading_type, 4);
        if (heading == NULL)
            goto done;
        PyList_SET_ITEM(headings, i, heading);
        PyObject *fields[4] = {PyLong_FromSsize_t(h->start), PyLong_FromSsize_t(h->end), PyLong_FromLong(h->level),
                               Py_NewRef(h->title)};
        for (int k = 0; k < 4; k++)
            PyTuple_SET_ITEM(heading, k, fields[k]); /* a NULL one is skipped by the release */
        if (!PyObject_GC_IsTracked(heading))
            PyObject_GC_Track(heading);
        if (!fields[0] || !fields[1] || !fields[2])
            goto done;
        while (depth > 0 && raw.headings[stack[depth - 1]].level >= h->level)
            depth--;
        stack[depth++] = i;
        PyObject *path = PyTuple_New(depth);
        if (path == NULL)
            goto done;
        for (Py_ssize_t k = 0; k < depth; k++)
            PyTuple_SET_ITEM(path, k, Py_NewRef(raw.headings[stack[k]].title));
        PyList_SET_ITEM(paths, i, path);
    }
    /* the scanned groups, with their contexts */
    for (Py_ssize_t i = 0; i < n_raw; i++) {
        const RawGroup *g = &raw.groups[i];
        PyObject *context = lead_text(text, g->anchor, g->body);
        if (context == NULL)
            goto done;
        if (g->header_end >= 0) { /* _join_context(lead, header) */
            PyObject *header = PyUnicode_Substring(text, g->body, g->header_end);
            PyObject *parts = header ? PyList_New(0) : NULL;
            int failed = parts == NULL || (PyUnicode_GET_LENGTH(context) && PyList_Append(parts, context) < 0)
                         || (PyUnicode_GET_LENGTH(header) && PyList_Append(parts, header) < 0);
            Py_XDECREF(header);
            Py_DECREF(context);
            context = failed ? NULL : PyUnicode_Join(newline, parts);
            Py_XDECREF(parts);
            if (context == NULL)
                goto done;
        }
        PyObject *item = group_from(group_type, Py_NewRef(KINDS[g->kind]), PyLong_FromSsize_t(g->anchor),
                                    PyLong_FromSsize_t(g->end), PyLong_FromSsize_t(g->body), context,
                                    PyUnicode_Substring(text, g->label_start, g->label_end));
        if (item == NULL)
            goto done;
        keys[made++] = (SortKey){g->anchor, -g->end, i, item};
    }
    /* section_groups: each heading to the next heading of the same or a higher level */
    depth = 0;
    for (Py_ssize_t i = 0; i < n_headings; i++) {
        const RawHeading *h = &raw.headings[i];
        ends[i] = end;
        while (depth > 0 && raw.headings[stack[depth - 1]].level >= h->level)
            ends[stack[--depth]] = h->start;
        stack[depth++] = i;
    }
    for (Py_ssize_t i = 0; i < n_headings; i++) {
        PyObject *heading = PyList_GET_ITEM(headings, i);
        PyObject *item = group_from(group_type, Py_NewRef(KINDS[KIND_SECTION]), Py_NewRef(PyTuple_GET_ITEM(heading, 0)),
                                    PyLong_FromSsize_t(ends[i]), Py_NewRef(PyTuple_GET_ITEM(heading, 1)),
                                    Py_NewRef(PyTuple_GET_ITEM(heading, 3)), Py_NewRef(empty));
        if (item == NULL)
            goto done;
        keys[made++] = (SortKey){raw.headings[i].start, -ends[i], n_raw + i, item};
    }
    /* groups.sort(key=lambda g: (g.start, -g.end)), stable: the scanned groups and the sections are
     * each in that order already (checked), so the two runs are merged; else sorted */
    int runs_sorted = 1;
    for (Py_ssize_t i = 1; i < n_groups && runs_sorted; i++)
        if (i != n_raw && compare_groups(&keys[i - 1], &keys[i]) > 0)
            runs_sorted = 0;
    SortKey *order = keys + n_groups;
    if (runs_sorted) {
        Py_ssize_t a = 0, b = n_raw, k = 0;
        while (a < n_raw && b < n_groups)
            order[k++] = compare_groups(&keys[b], &keys[a]) < 0 ? keys[b++] : keys[a++];
        while (a < n_raw)
            order[k++] = keys[a++];
        while (b < n_groups)
            order[k++] = keys[b++];
    } else {
        memcpy(order, keys, (size_t)n_groups * sizeof(SortKey));
        qsort(order, (size_t)n_groups, sizeof(SortKey), compare_groups);
    }
    groups = PyList_New(n_groups);
    if (groups == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_groups; i++)
        PyList_SET_ITEM(groups, i, order[i].group);
    made = 0; /* the list owns them */
    result = PyTuple_Pack(6, headings, paths, raw.positions, raw.scores, groups, quote_heads);
done:
    for (Py_ssize_t i = 0; i < made; i++)
        Py_DECREF(keys[i].group);
    raw_release(&raw);
    Py_DECREF(quote_heads);
    Py_XDECREF(headings);
    Py_XDECREF(paths);
    Py_XDECREF(groups);
    Py_XDECREF(empty);
    Py_XDECREF(newline);
    PyMem_Free(stack);
    PyMem_Free(ends);
    PyMem_Free(keys);
    return result;
}

/* -- commonmark_lists: the lists as CommonMark delimits them (markdown._commonmark_lists) ---------- */

/* _CM_NOT_LAZY  [ \t]*(?:#{1,6}(?:[ \t]|\r?$)|`{3,}|~{3,}|>|<!--) at s */
static int cm_not_lazy(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    if (p >= e)
        return 0;
    Py_UCS4 c = CH(d, p);
    if (c == '>')
        return 1;
    if (c == '#' || c == '`' || c == '~') {
        Py_ssize_t q = p;
        while (q < e && CH(d, q) == c)
            q++;
        if (c != '#')
            return q - p >= 3;
        /* a run of more than six '#' leaves a '#' after any shorter match: no match */
        return q - p <= 6 && (q == e || SPACE_OR_TAB(CH(d, q)) || (CH(d, q) == '\r' && q + 1 == e));
    }
    return c == '<' && p + 4 <= e && CH(d, p + 1) == '!' && CH(d, p + 2) == '-' && CH(d, p + 3) == '-';
}

/* _CM_REFDEF   {0,3}\[[^\]]+\]:[ \t]*\S at s */
static int cm_refdef(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = up_to_three_spaces(d, s, e);
    if (p >= e || CH(d, p) != '[')
        return 0;
    Py_ssize_t q = p + 1;
    while (q < e && CH(d, q) != ']')
        q++;
    if (q == p + 1 || q + 1 >= e || CH(d, q + 1) != ':')
        return 0;
    q += 2;
    while (q < e && SPACE_OR_TAB(CH(d, q)))
        q++;
    return q < e && !Py_UNICODE_ISSPACE(CH(d, q));
}

/* _CM_ITEM  ([ \t]*)([-+*]|([0-9]{1,9})[.)])([ \t]+|\r?$) at s, whose indent ends at p (p < e).
 * -> 1 on a match; *marker_end: the end of group 2; *number: group 3's value (-1: a bullet);
 * *item_end: the match end (group 4 is [*marker_end, *item_end)) */
static int cm_item(const Doc *d, Py_ssize_t p, Py_ssize_t e, Py_ssize_t *marker_end, long *number,
                   Py_ssize_t *item_end)
{
    Py_UCS4 c = CH(d, p);
    Py_ssize_t q;
    if (c == '-' || c == '+' || c == '*') {
        q = p + 1;
        *number = -1;
    } else if (c >= '0' && c <= '9') {
        long value = 0;
        q = p;
        while (q < e && CH(d, q) >= '0' && CH(d, q) <= '9') {
            if (q - p < 9)
                value = value * 10 + (long)(CH(d, q) - '0');
            q++;
        }
        if (q - p > 9 || q >= e || (CH(d, q) != '.' && CH(d, q) != ')'))
            return 0;
        q++;
        *number = value;
    } else {
        return 0;
    }
    *marker_end = q;
    if (q < e && SPACE_OR_TAB(CH(d, q))) {
        while (q < e && SPACE_OR_TAB(CH(d, q)))
            q++;
        *item_end = q;
        return 1;
    }
    if (q < e && CH(d, q) == '\r')
        q++;
    if (q != e)
        return 0;
    *item_end = e;
    return 1;
}

/* all of text[s:e] is white space (str.strip() is empty) */
static int all_space(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    for (; s < e; s++)
        if (!Py_UNICODE_ISSPACE(CH(d, s)))
            return 0;
    return 1;
}

typedef struct {
    Py_ssize_t col, begin, lead; /* content column, list start, lead-in start (-1: none) */
    Py_UCS4 marker;
    int ordered;
} Level;

typedef struct {
    PyObject *out, *group_type, *list_kind, *procedure_kind, *empty;
    Level *levels;
    Py_ssize_t n, capacity;
    Py_ssize_t finish; /* the end of every open list: all grow together */
} Lists;

/* Whether Group is a tuple subclass: 0, else -1 with a TypeError */
static int check_group_type(PyObject *group_type)
{
    if (PyType_Check(group_type) && PyType_IsSubtype((PyTypeObject *)group_type, &PyTuple_Type))
        return 0;
    PyErr_SetString(PyExc_TypeError, "Group must be a tuple subclass");
    return -1;
}

/* An empty Lists with its output list and kind strings; a failed allocation leaves a NULL field,
 * which the caller checks (lists_close releases what was made) */
static void lists_open(Lists *ls, PyObject *group_type)
{
    *ls = (Lists){PyList_New(0), group_type, Py_NewRef(KINDS[KIND_LIST]),
                  Py_NewRef(KINDS[KIND_PROCEDURE]), PyUnicode_FromStringAndSize("", 0), NULL, 0, 0, 0};
}

static void lists_close(Lists *ls)
{
    Py_XDECREF(ls->out);
    Py_XDECREF(ls->list_kind);
    Py_XDECREF(ls->procedure_kind);
    Py_XDECREF(ls->empty);
    PyMem_Free(ls->levels);
}

static int emit(Lists *ls, PyObject *kind, Py_ssize_t start, Py_ssize_t end, Py_ssize_t body)
{
    PyObject *item = group_from(ls->group_type, Py_NewRef(kind), PyLong_FromSsize_t(start), PyLong_FromSsize_t(end),
                                PyLong_FromSsize_t(body), Py_NewRef(ls->empty), Py_NewRef(ls->empty));
    if (item == NULL)
        return -1;
    int failed = PyList_Append(ls->out, item);
    Py_DECREF(item);
    return failed;
}

/* close(depth): innermost first, a list and, for an ordered one with a lead-in, its procedure */
static int close_levels(Lists *ls, Py_ssize_t depth)
{
    while (ls->n > depth) {
        Level *level = &ls->levels[--ls->n];
        if (emit(ls, ls->list_kind, level->begin, ls->finish, level->begin) < 0)
            return -1;
        if (level->ordered && level->lead >= 0
                && emit(ls, ls->procedure_kind, level->lead, ls->finish, level->begin) < 0)
            return -1;
    }
    return 0;
}

static int run_lists(const Doc *d, Lists *ls, Py_ssize_t start, Py_ssize_t end)
{
    Py_UCS4 fence_marker = 0; /* 0: no open fenced block */
    Py_ssize_t fence_depth = 0;
    int comment = 0, prev_para = 0;
    Py_ssize_t last_para_start = -1, last_para_depth = 0; /* -1: the last block is no paragraph */
    Py_ssize_t pos = start;
    while (pos < end) {
        Py_ssize_t line_end = FIND(d, '\n', pos, end);
        if (line_end == -1)
            line_end = end;
        Py_ssize_t e = line_end, p = pos, finish = line_end;
        while (p < e && SPACE_OR_TAB(CH(d, p)))
            p++;
        while (finish > pos && Py_UNICODE_ISSPACE(CH(d, finish - 1)))
            finish--;
        Py_ssize_t next = line_end + 1;
        if (finish <= p) { /* blank */
            prev_para = 0;
            pos = next;
            continue;
        }
        Py_UCS4 c = CH(d, p);
        if (ls->n == 0 && fence_marker == 0 && !comment && !(c == '-' || c == '+' || c == '*' || (c >= '0' && c <= '9')
                || c == '`' || c == '~' || c == '<' || c == '#' || c == '>' || c == '|' || c == '=' || c == '_' || c == '\r')) {
            if (!prev_para && !cm_refdef(d, pos, e)) {
                last_para_start = p;
                last_para_depth = 0;
                prev_para = 1;
            }
            pos = next;
            continue;
        }
        Py_ssize_t indent = indent_width(d, pos, p);
        Py_ssize_t low = 0, high = ls->n; /* depth: how many open levels' columns are <= indent */
        while (low < high) {
            Py_ssize_t mid = (low + high) / 2;
            if (ls->levels[mid].col <= indent)
                low = mid + 1;
            else
                high = mid;
        }
        Py_ssize_t depth = low;
        if (comment) {
            comment = !comment_closes(d, pos, e);
            ls->finish = finish;
            pos = next;
            continue;
        }
        if (fence_marker) {
            if (depth >= fence_depth) {
                if (e - p >= 3 && CH(d, p) == fence_marker && CH(d, p + 1) == fence_marker
                        && CH(d, p + 2) == fence_marker) {
                    Py_ssize_t q = p;
                    while (q < finish && CH(d, q) == fence_marker)
                        q++;
                    if (q == finish)
                        fence_marker = 0;
                }
                ls->finish = finish;
                pos = next;
                continue;
            }
            fence_marker = 0; /* its container closed */
        }
        Py_ssize_t base = depth ? ls->levels[depth - 1].col : 0;
        Py_ssize_t marker_end = 0, item_end = 0;
        long number = -1;
        int item = indent - base <= 3 && cm_item(d, p, e, &marker_end, &number, &item_end);
        if (item && (c == '-' || c == '*') && thematic_break(d, pos, e))
            item = 0;
        int empty = item && all_space(d, item_end, e);
        if (item && prev_para && depth == ls->n && (empty || (number >= 0 && number != 1)))
            item = 0; /* starting a list inside a paragraph: a bullet or '1', with text */
        if (item) {
            Py_UCS4 marker = CH(d, marker_end - 1);
            int ordered = number >= 0, after_blank = 1;
            Py_ssize_t width = indent + (marker_end - p), after = 0; /* after: len(group 4 .expandtabs(4)) */
            for (Py_ssize_t q = marker_end; q < item_end; q++) {
                Py_UCS4 x = CH(d, q);
                after = x == '\t' ? after + 4 - after % 4 : after + 1;
                if (!SPACE_OR_TAB(x))
                    after_blank = 0;
            }
            int gap = after_blank && empty && after > 0;
            Py_ssize_t content = gap || after > 4 ? width + 1 : width + after;
            if (depth < ls->n && ls->levels[depth].marker == marker) {
                if (close_levels(ls, depth + 1) < 0)
                    return -1;
                ls->levels[depth].col = content;
            } else {
                if (close_levels(ls, depth) < 0)
                    return -1;
                if (ls->n == ls->capacity) {
                    Py_ssize_t capacity = ls->capacity ? ls->capacity * 2 : 16;
                    Level *levels = PyMem_Realloc(ls->levels, capacity * sizeof(Level));
                    if (levels == NULL) {
                        PyErr_NoMemory();
                        return -1;
                    }
                    ls->levels = levels;
                    ls->capacity = capacity;
                }
                Level *level = &ls->levels[ls->n++];
                level->col = content;
                level->begin = p;
                level->lead = last_para_start >= 0 && last_para_depth == depth && ordered ? last_para_start : -1;
                level->marker = marker;
                level->ordered = ordered;
            }
            ls->finish = finish;
            last_para_start = empty ? -1 : pos;
            last_para_depth = ls->n;
            prev_para = !empty && !cm_not_lazy(d, item_end, e);
            pos = next;
            continue;
        }
        int lazy = prev_para && !cm_not_lazy(d, pos, e) && !thematic_break(d, pos, e);
        if (depth < ls->n && !lazy && close_levels(ls, depth) < 0)
            return -1;
        if (ls->n)
            ls->finish = finish;
        if (lazy) {
            pos = next;
            continue;
        }
        Py_ssize_t run = p;
        if (c == '`' || c == '~')
            while (run < e && CH(d, run) == c)
                run++;
        if (run - p >= 3 && indent - base <= 3) { /* _CM_FENCE  [ \t]*(`{3,}|~{3,}) */
            fence_marker = c;
            fence_depth = depth;
            last_para_start = -1;
            prev_para = 0;
        } else if (c == '<' && html_comment(d, p, e) == p + 4 && indent - base <= 3) {
            comment = !comment_closes(d, p + 4, e);
            last_para_start = -1;
            prev_para = 0;
        } else if (cm_not_lazy(d, pos, e) || thematic_break(d, pos, e)) {
            last_para_start = -1;
            prev_para = 0;
        } else if (!prev_para && cm_refdef(d, pos, e)) {
            /* a link reference definition: no block, so the paragraph before stays the lead-in */
        } else {
            if (!prev_para) {
                last_para_start = p;
                last_para_depth = depth;
            }
            prev_para = 1;
        }
        pos = next;
    }
    return close_levels(ls, 0);
}

/* commonmark_lists(text, start, end, Group) -> [Group]: markdown._commonmark_lists, in C */
static PyObject *commonmark_lists(PyObject *self, PyObject *args)
{
    PyObject *text, *group_type;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "UnnO", &text, &start, &end, &group_type))
        return NULL;
    if (check_group_type(group_type) < 0)
        return NULL;
    if (start < 0 || end > PyUnicode_GET_LENGTH(text) || start > end) {
        PyErr_SetString(PyExc_ValueError, "commonmark_lists: start and end must satisfy 0 <= start <= end <= len(text)");
        return NULL;
    }
    Doc d = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, NULL, NULL, NULL, NULL, 0};
    Lists ls;
    lists_open(&ls, group_type);
    PyObject *result = NULL;
    if (ls.out && ls.list_kind && ls.procedure_kind && ls.empty && run_lists(&d, &ls, start, end) == 0) {
        result = ls.out;
        ls.out = NULL;
    }
    lists_close(&ls);
    return result;
}

/* -- indented_units: nested lists and fenced code inside one list, by indentation --------------- */

typedef struct {
    Py_ssize_t indent, start, parent; /* a nested list still open; parent: the item holding it (-1: none) */
} OpenList;

typedef struct {
    Py_ssize_t indent, start;
} ItemLine;

/* indented_units(text, begin, end, Group) -> [Group]: markdown._indented_units, in C */
static int kind_is(PyObject *kind, const char *name);
static int group_fields(PyObject *g, PyObject **kind, Py_ssize_t *start, Py_ssize_t *end);

/* markdown._indented_units over text[begin:end] (0 <= begin <= end <= len), its units appended to
 * ls->out */
static int run_indented(const Doc *dp, Lists *ls, PyObject *code_kind, Py_ssize_t begin, Py_ssize_t end)
{
    const Doc d = *dp;
    int status = -1;
    OpenList *open = NULL;
    Py_ssize_t n_open = 0, capacity = 0, n_items = 0;
    ItemLine items[65];
    Py_ssize_t base = -1, fence_start = -1, finish = begin, pos = begin;
    Py_UCS4 fence_marker = 0;
    while (pos < end) {
        Py_ssize_t line_end = FIND(&d, '\n', pos, end);
        if (line_end == -1)
            line_end = end;
        Py_ssize_t e = line_end, p = pos, tail = line_end;
        while (p < e && SPACE_OR_TAB(CH(&d, p)))
            p++;
        while (tail > pos && Py_UNICODE_ISSPACE(CH(&d, tail - 1)))
            tail--; /* pos + len(line.rstrip()) */
        if (fence_marker) {
            /* stripped.startswith(marker * 3) and not stripped.strip().strip(marker) */
            if (e - p >= 3 && CH(&d, p) == fence_marker && CH(&d, p + 1) == fence_marker
                    && CH(&d, p + 2) == fence_marker) {
                Py_ssize_t q = p;
                while (q < tail && CH(&d, q) == fence_marker)
                    q++;
                if (q == tail) {
                    if (emit(ls, code_kind, fence_start, tail, fence_start) < 0)
                        goto done;
                    fence_marker = 0;
                }
            }
            pos = line_end + 1;
            continue;
        }
        if (e - p >= 3 && (CH(&d, p) == '`' || CH(&d, p) == '~') && CH(&d, p + 1) == CH(&d, p)
                && CH(&d, p + 2) == CH(&d, p)) {
            fence_marker = CH(&d, p);
            fence_start = pos;
        }
        if (tail > p) { /* stripped.strip(): not blank */
            Py_ssize_t indent = indent_width(&d, pos, p), indent_end = 0;
            Py_UCS4 bullet = 0;
            int is_item = list_item(&d, pos, e, &indent_end, &bullet);
            if (base < 0)
                base = indent;
            while (n_open && (indent < open[n_open - 1].indent || (indent == open[n_open - 1].indent && !is_item))) {
                OpenList *closing = &open[--n_open];
                if (emit(ls, ls->list_kind, closing->start, finish, closing->start) < 0)
                    goto done;
                if (closing->parent >= 0 && emit(ls, ls->procedure_kind, closing->parent, finish, closing->start) < 0)
                    goto done;
            }
            if (is_item && indent > base && (n_open == 0 || open[n_open - 1].indent < indent)) {
                Py_ssize_t parent = -1;
                for (Py_ssize_t k = n_items - 1; k >= 0; k--)
                    if (items[k].indent < indent) {
                        parent = items[k].start;
                        break;
                    }
                if (n_open == capacity) {
                    capacity = capacity ? capacity * 2 : 16;
                    OpenList *grown = PyMem_Realloc(open, capacity * sizeof(OpenList));
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    open = grown;
                }
                open[n_open].indent = indent;
                open[n_open].start = pos;
                open[n_open].parent = parent;
                n_open++;
            }
            if (is_item) {
                items[n_items].indent = indent;
                items[n_items].start = pos;
                n_items++;
                if (n_items > 64) { /* del items[:32] */
                    memmove(items, items + 32, (size_t)(n_items - 32) * sizeof(ItemLine));
                    n_items -= 32;
                }
            }
            finish = tail;
        }
        pos = line_end + 1;
    }
    for (Py_ssize_t k = 0; k < n_open; k++) {
        if (emit(ls, ls->list_kind, open[k].start, finish, open[k].start) < 0)
            goto done;
        if (open[k].parent >= 0 && emit(ls, ls->procedure_kind, open[k].parent, finish, open[k].start) < 0)
            goto done;
    }
    status = 0;
done:
    PyMem_Free(open);
    return status;
}

static PyObject *indented_units(PyObject *self, PyObject *args)
{
    PyObject *text, *group_type;
    Py_ssize_t begin, end;
    if (!PyArg_ParseTuple(args, "UnnO", &text, &begin, &end, &group_type))
        return NULL;
    if (check_group_type(group_type) < 0)
        return NULL;
    if (begin < 0 || end > PyUnicode_GET_LENGTH(text) || begin > end) {
        PyErr_SetString(PyExc_ValueError, "indented_units: begin and end must satisfy 0 <= begin <= end <= len(text)");
        return NULL;
    }
    Doc d = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, NULL, NULL, NULL, NULL, 0};
    Lists ls;
    lists_open(&ls, group_type);
    PyObject *code_kind = Py_NewRef(KINDS[KIND_CODE]), *result = NULL;
    if (ls.out && ls.list_kind && ls.procedure_kind && ls.empty && code_kind
            && run_indented(&d, &ls, code_kind, begin, end) == 0) {
        result = ls.out;
        ls.out = NULL;
    }
    lists_close(&ls);
    Py_XDECREF(code_kind);
    return result;
}

/* -- group_units: the units derived from each scanned group (markdown._group_units) -------------- */

/* _BLOCK_LINE  [ \t]*(?:#|```|~~~|\||>|[-*+][ \t]|\d{1,9}[.)][ \t])  at s (no blank starts a branch,
 * so the blanks never give back) */
static int block_line(const Doc *d, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && SPACE_OR_TAB(CH(d, p)))
        p++;
    if (p >= e)
        return 0;
    Py_UCS4 c = CH(d, p);
    if (c == '#' || c == '|' || c == '>')
        return 1;
    if ((c == '`' || c == '~') && p + 2 < e && CH(d, p + 1) == c && CH(d, p + 2) == c)
        return 1;
    if ((c == '-' || c == '*' || c == '+') && p + 1 < e && SPACE_OR_TAB(CH(d, p + 1)))
        return 1;
    Py_ssize_t q = number_then(d, p, e, ".)");
    return q >= 0 && q < e && SPACE_OR_TAB(CH(d, q));
}

/* markdown._paragraph_before(text, pos): the start of the paragraph ending right before pos, or -1 */
static Py_ssize_t paragraph_before(const Doc *d, Py_ssize_t pos)
{
    Py_ssize_t end = pos;
    while (end > 0) {
        Py_UCS4 c = CH(d, end - 1);
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
            break;
        end--;
    }
    if (end == 0)
        return -1;
    Py_ssize_t newlines = 0;
    for (Py_ssize_t p = end; p < pos; p++)
        newlines += CH(d, p) == '\n';
    if (newlines > 2)
        return -1;
    Py_ssize_t start = end;
    for (int k = 0; k < 64; k++) { /* a paragraph of at most 64 lines */
        Py_ssize_t line_start = 0; /* text.rfind("\n", 0, start - 1) + 1 */
        for (Py_ssize_t p = start - 2; p >= 0; p--)
            if (CH(d, p) == '\n') {
                line_start = p + 1;
                break;
            }
        Py_ssize_t line_end = start; /* .rstrip("\r\n") */
        while (line_end > line_start && (CH(d, line_end - 1) == '\r' || CH(d, line_end - 1) == '\n'))
            line_end--;
        if (all_space(d, line_start, line_end))
            return start < end ? start : -1;
        if (block_line(d, line_start, line_end) || setext(d, line_start, line_end))
            return -1;
        start = line_start;
        if (start == 0)
            return 0;
    }
    return -1;
}

/* group_units(text, groups, Group) -> [Group]   markdown._group_units */
static PyObject *group_units(PyObject *self, PyObject *args)
{
    PyObject *text, *groups, *group_type;
    if (!PyArg_ParseTuple(args, "UO!O", &text, &PyList_Type, &groups, &group_type))
        return NULL;
    if (check_group_type(group_type) < 0)
        return NULL;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    Doc d = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), NULL, NULL, NULL, NULL, NULL, 0};
    Lists ls;
    lists_open(&ls, group_type);
    PyObject *code_kind = Py_NewRef(KINDS[KIND_CODE]), *result = NULL;
    if (!ls.out || !ls.list_kind || !ls.procedure_kind || !ls.empty || !code_kind)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(groups); i++) {
        PyObject *g = PyList_GET_ITEM(groups, i), *kind;
        Py_ssize_t anchor, group_end;
        if (group_fields(g, &kind, &anchor, &group_end) < 0)
            goto done;
        if (PyTuple_GET_SIZE(g) < 6) {
            PyErr_SetString(PyExc_TypeError, "a group must be a tuple (kind, start, end, body_start, context, label)");
            goto done;
        }
        if (kind_is(kind, "section"))
            continue;
        Py_ssize_t body = PyLong_AsSsize_t(PyTuple_GET_ITEM(g, 3));
        if (body == -1 && PyErr_Occurred())
            goto done;
        if (anchor < 0 || body < 0 || anchor > length || body > length || group_end > length) {
            PyErr_SetString(PyExc_ValueError, "group_units: a group's offsets must lie inside the text");
            goto done;
        }
        int is_procedure = kind_is(kind, "procedure"), is_list = !is_procedure && kind_is(kind, "list");
        if (is_procedure && anchor == body) {
            Py_ssize_t lead = paragraph_before(&d, anchor);
            if (lead >= 0 && emit(&ls, ls.procedure_kind, lead, group_end, body) < 0)
                goto done;
        }
        if (anchor < body && (is_procedure || is_list || kind_is(kind, "table") || kind_is(kind, "code"))) {
            PyObject *item = group_from(group_type, Py_NewRef(kind), PyLong_FromSsize_t(body),
                                        PyLong_FromSsize_t(group_end), PyLong_FromSsize_t(body), Py_NewRef(ls.empty),
                                        Py_NewRef(PyTuple_GET_ITEM(g, 5)));
            if (item == NULL || PyList_Append(ls.out, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        if ((is_procedure || is_list) && body < group_end) {
            Py_ssize_t newline = FIND(&d, '\n', body, group_end);
            if (newline >= 0 && run_indented(&d, &ls, code_kind, body, group_end) < 0)
                goto done;
        }
    }
    result = ls.out;
    ls.out = NULL;
done:
    lists_close(&ls);
    Py_XDECREF(code_kind);
    return result;
}

/* -- unit_starts and not_crossing: array kernels of markdown.scan's last steps ------------------- */

/* Whether `kind` is the str `name` */
static int kind_is(PyObject *kind, const char *name)
{
    return PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, name) == 0;
}

/* bisect.bisect_left(a[lo:hi], x) + lo on a sorted array */
static Py_ssize_t bisect_left_at(const Py_ssize_t *a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t x)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* bisect.bisect_right(a[lo:hi], x) + lo */
static Py_ssize_t bisect_right_at(const Py_ssize_t *a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t x)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < a[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

typedef struct {
    Py_ssize_t key, other;
} Pair;

static int compare_pairs(const void *a, const void *b)
{
    const Pair *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->other < y->other ? -1 : x->other > y->other;
}

/* The values of a sorted list of ints into a new array (NULL with an exception set on failure) */
static Py_ssize_t *int_array(PyObject *list, Py_ssize_t n)
{
    Py_ssize_t *out = PyMem_Malloc((n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PyList_GET_ITEM(list, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

/* The (kind, start, end) of a Group-like tuple; 0 on success */
static int group_fields(PyObject *g, PyObject **kind, Py_ssize_t *start, Py_ssize_t *end)
{
    if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) < 3) {
        PyErr_SetString(PyExc_TypeError, "a group must be a tuple (kind, start, end, ...)");
        return -1;
    }
    *kind = PyTuple_GET_ITEM(g, 0);
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(g, 1));
    if (*start == -1 && PyErr_Occurred())
        return -1;
    if (end != NULL) {
        *end = PyLong_AsSsize_t(PyTuple_GET_ITEM(g, 2));
        if (*end == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* unit_starts(text, positions, scores, groups, units) -> None | (positions, scores)
 * markdown._unit_starts, in C: the boundaries at the first character of each group or unit (not a
 * section) that starts at or after its line's indentation where the line's start is a boundary,
 * scored as that line start; None when there is none to add. */
static PyObject *unit_starts(PyObject *self, PyObject *args)
{
    PyObject *text, *positions, *scores, *lists[2];
    if (!PyArg_ParseTuple(args, "UO!O!O!O!", &text, &PyList_Type, &positions, &PyList_Type, &scores, &PyList_Type,
                          &lists[0], &PyList_Type, &lists[1]))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(positions), size = PyUnicode_GET_LENGTH(text);
    if (PyList_GET_SIZE(scores) != n) {
        PyErr_SetString(PyExc_ValueError, "unit_starts: as many scores as positions");
        return NULL;
    }
    if (n == 0)
        Py_RETURN_NONE;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
#define TCH(i) PyUnicode_READ(kind, data, (i))
    Py_ssize_t *pos = int_array(positions, n);
    if (pos == NULL)
        return NULL;
    Pair *added = NULL;
    Py_ssize_t n_added = 0, capacity = 0;
    PyObject *result = NULL;
    for (int which = 0; which < 2; which++) {
        PyObject *list = lists[which];
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
            PyObject *group_kind;
            Py_ssize_t start;
            if (group_fields(PyList_GET_ITEM(list, i), &group_kind, &start, NULL) < 0)
                goto done;
            if (start < 0 || start > size) {
                PyErr_SetString(PyExc_ValueError, "unit_starts: a group starts outside the text");
                goto done;
            }
            /* only a start with a blank before or at it can be on an indented line */
            if (!((start < size && SPACE_OR_TAB(TCH(start))) || (start > 0 && SPACE_OR_TAB(TCH(start - 1)))))
                continue;
            if (kind_is(group_kind, "section"))
                continue;
            Py_ssize_t first = start, line_start = start;
            while (first < size && SPACE_OR_TAB(TCH(first)))
                first++;
            while (line_start > 0 && TCH(line_start - 1) != '\n')
                line_start--;
            if (line_start == first)
                continue; /* not indented */
            int text_before = 0;
            for (Py_ssize_t p = line_start; p < start && !text_before; p++)
                text_before = !SPACE_OR_TAB(TCH(p));
            if (text_before)
                continue; /* not at the line's first text */
            Py_ssize_t k = bisect_left_at(pos, 0, n, line_start);
            if (k == n || pos[k] != line_start)
                continue;
            Py_ssize_t j = bisect_left_at(pos, k, n, first);
            if (j < n && pos[j] == first)
                continue;
            if (n_added == capacity) {
                capacity = capacity ? capacity * 2 : 16;
                Pair *grown = PyMem_Realloc(added, capacity * sizeof(Pair));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                added = grown;
            }
            added[n_added].key = first;
            added[n_added].other = k;
            n_added++;
        }
    }
#undef TCH
    if (n_added == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    qsort(added, (size_t)n_added, sizeof(Pair), compare_pairs);
    Py_ssize_t unique = 0; /* starts on one line with the same first character share its line start */
    for (Py_ssize_t i = 0; i < n_added; i++)
        if (unique == 0 || added[unique - 1].key != added[i].key)
            added[unique++] = added[i];
    PyObject *new_positions = PyList_New(n + unique), *new_scores = PyList_New(n + unique);
    if (new_positions == NULL || new_scores == NULL) {
        Py_XDECREF(new_positions);
        Py_XDECREF(new_scores);
        goto done;
    }
    Py_ssize_t out = 0, done_upto = 0;
    for (Py_ssize_t i = 0; i <= unique; i++) {
        Py_ssize_t j = i < unique ? bisect_left_at(pos, done_upto, n, added[i].key) : n;
        for (; done_upto < j; done_upto++, out++) {
            PyObject *p = PyList_GET_ITEM(positions, done_upto), *s = PyList_GET_ITEM(scores, done_upto);
            Py_INCREF(p);
            Py_INCREF(s);
            PyList_SET_ITEM(new_positions, out, p);
            PyList_SET_ITEM(new_scores, out, s);
        }
        if (i == unique)
            break;
        PyObject *p = PyLong_FromSsize_t(added[i].key), *s = PyList_GET_ITEM(scores, added[i].other);
        if (p == NULL) {
            /* fill the rest so the lists can be freed */
            for (Py_ssize_t r = out; r < n + unique; r++) {
                Py_INCREF(Py_None);
                Py_INCREF(Py_None);
                PyList_SET_ITEM(new_positions, r, Py_None);
                PyList_SET_ITEM(new_scores, r, Py_None);
            }
            Py_DECREF(new_positions);
            Py_DECREF(new_scores);
            goto done;
        }
        Py_INCREF(s);
        PyList_SET_ITEM(new_positions, out, p);
        PyList_SET_ITEM(new_scores, out, s);
        out++;
    }
    result = PyTuple_Pack(2, new_positions, new_scores);
    Py_DECREF(new_positions);
    Py_DECREF(new_scores);
done:
    PyMem_Free(pos);
    PyMem_Free(added);
    return result;
}

/* A sparse table over `values` (n of them): table[level * n + i] is the max of values[i : i + 2**level]
 * (of their negations when `negate`, for a minimum) */
static Py_ssize_t *sparse_max(const Pair *pairs, Py_ssize_t n, int negate, int *levels_out)
{
    int levels = 1;
    while (((Py_ssize_t)1 << levels) <= n)
        levels++;
    Py_ssize_t *table = PyMem_Malloc((size_t)levels * (size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (table == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        table[i] = negate ? -pairs[i].other : pairs[i].other;
    for (int level = 1; level < levels; level++) {
        Py_ssize_t half = (Py_ssize_t)1 << (level - 1);
        Py_ssize_t *row = table + (Py_ssize_t)level * n, *below = table + (Py_ssize_t)(level - 1) * n;
        for (Py_ssize_t i = 0; i + 2 * half <= n; i++)
            row[i] = below[i] > below[i + half] ? below[i] : below[i + half];
    }
    *levels_out = levels;
    return table;
}

/* max of the values in [low, high) (low < high) */
static Py_ssize_t range_max(const Py_ssize_t *table, Py_ssize_t n, Py_ssize_t low, Py_ssize_t high)
{
    int level = 0;
    while (((Py_ssize_t)2 << level) <= high - low)
        level++;
    const Py_ssize_t *row = table + (Py_ssize_t)level * n;
    Py_ssize_t a = row[low], b = row[high - ((Py_ssize_t)1 << level)];
    return a > b ? a : b;
}

/* not_crossing(nested, lists, limit) -> [group]: markdown._not_crossing, in C: `nested` without the
 * lists and procedures (at most `limit` long) that a group of `lists` crosses: one starting inside
 * it that ends after it, or one ending inside it that starts before it. */
static PyObject *not_crossing(PyObject *self, PyObject *args)
{
    PyObject *nested, *lists;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyList_Type, &nested, &PyList_Type, &lists, &limit))
        return NULL;
    Py_ssize_t m = PyList_GET_SIZE(lists);
    Pair *by_start = PyMem_Malloc((m > 0 ? m : 1) * sizeof(Pair)), *by_end = PyMem_Malloc((m > 0 ? m : 1) * sizeof(Pair));
    Py_ssize_t *starts = PyMem_Malloc((m > 0 ? m : 1) * sizeof(Py_ssize_t)), *ends = PyMem_Malloc((m > 0 ? m : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *reach = NULL, *lows = NULL;
    PyObject *kept = NULL;
    int reach_levels = 0, low_levels = 0;
    if (!by_start || !by_end || !starts || !ends) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *group_kind;
        Py_ssize_t a, b;
        if (group_fields(PyList_GET_ITEM(lists, i), &group_kind, &a, &b) < 0)
            goto done;
        by_start[i].key = a;
        by_start[i].other = b;
        by_end[i].key = b;
        by_end[i].other = a;
    }
    qsort(by_start, (size_t)m, sizeof(Pair), compare_pairs);
    qsort(by_end, (size_t)m, sizeof(Pair), compare_pairs);
    for (Py_ssize_t i = 0; i < m; i++) {
        starts[i] = by_start[i].key;
        ends[i] = by_end[i].key;
    }
    reach = sparse_max(by_start, m, 0, &reach_levels); /* the furthest end of lists starting in a range */
    lows = sparse_max(by_end, m, 1, &low_levels);       /* minus the least start of lists ending in one */
    kept = PyList_New(0);
    if (reach == NULL || lows == NULL || kept == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nested); i++) {
        PyObject *g = PyList_GET_ITEM(nested, i), *group_kind;
        Py_ssize_t a, b;
        if (group_fields(g, &group_kind, &a, &b) < 0)
            goto fail;
        if (b - a <= limit && (kind_is(group_kind, "list") || kind_is(group_kind, "procedure"))) {
            Py_ssize_t low = bisect_right_at(starts, 0, m, a), high = bisect_left_at(starts, 0, m, b);
            if (low < high && range_max(reach, m, low, high) > b)
                continue;
            low = bisect_right_at(ends, 0, m, a);
            high = bisect_left_at(ends, 0, m, b);
            if (low < high && -range_max(lows, m, low, high) < a)
                continue;
        }
        if (PyList_Append(kept, g) < 0)
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(kept);
done:
    PyMem_Free(by_start);
    PyMem_Free(by_end);
    PyMem_Free(starts);
    PyMem_Free(ends);
    PyMem_Free(reach);
    PyMem_Free(lows);
    return kept;
}

/* merged_units(nested, lists, groups) -> [group]: markdown._merged_units, in C: `nested` and the groups
 * of `lists` whose (kind, start, end) is not a list's or procedure's of `nested` or `groups`, sorted by
 * (start, -end), stably (`nested` first, then `lists`, each in its order). */
typedef struct {
    Py_ssize_t start, end;
    int kind; /* 1: list, 2: procedure */
} UnitKey;

static int compare_unit_keys(const void *a, const void *b)
{
    const UnitKey *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

static int list_kind_code(PyObject *kind)
{
    return kind_is(kind, "list") ? 1 : kind_is(kind, "procedure") ? 2 : 0;
}

static PyObject *merged_units(PyObject *self, PyObject *args)
{
    PyObject *nested, *lists, *groups;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &nested, &PyList_Type, &lists, &PyList_Type, &groups))
        return NULL;
    Py_ssize_t n_nested = PyList_GET_SIZE(nested), n_lists = PyList_GET_SIZE(lists);
    Py_ssize_t n_groups = PyList_GET_SIZE(groups), n_known = 0, n_keys = 0;
    UnitKey *known = PyMem_Malloc((n_nested + n_groups + 1) * sizeof(UnitKey));
    SortKey *keys = PyMem_Malloc((n_nested + n_lists + 1) * sizeof(SortKey));
    PyObject *result = NULL;
    if (known == NULL || keys == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int source = 0; source < 2; source++) {
        PyObject *from = source == 0 ? nested : groups;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(from); i++) {
            PyObject *kind;
            Py_ssize_t start, end;
            if (group_fields(PyList_GET_ITEM(from, i), &kind, &start, &end) < 0)
                goto done;
            int code = list_kind_code(kind);
            if (code) {
                known[n_known].start = start;
                known[n_known].end = end;
                known[n_known].kind = code;
                n_known++;
            }
            if (source == 0) {
                keys[n_keys].start = start;
                keys[n_keys].negative_end = -end;
                keys[n_keys].order = n_keys;
                keys[n_keys].group = PyList_GET_ITEM(from, i);
                n_keys++;
            }
        }
    }
    qsort(known, (size_t)n_known, sizeof(UnitKey), compare_unit_keys);
    for (Py_ssize_t i = 0; i < n_lists; i++) {
        PyObject *g = PyList_GET_ITEM(lists, i), *kind;
        UnitKey key;
        if (group_fields(g, &kind, &key.start, &key.end) < 0)
            goto done;
        key.kind = list_kind_code(kind);
        if (key.kind && bsearch(&key, known, (size_t)n_known, sizeof(UnitKey), compare_unit_keys) != NULL)
            continue;
        keys[n_keys].start = key.start;
        keys[n_keys].negative_end = -key.end;
        keys[n_keys].order = n_keys;
        keys[n_keys].group = g;
        n_keys++;
    }
    qsort(keys, (size_t)n_keys, sizeof(SortKey), compare_groups);
    result = PyList_New(n_keys);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_keys; i++) {
        Py_INCREF(keys[i].group);
        PyList_SET_ITEM(result, i, keys[i].group);
    }
done:
    PyMem_Free(known);
    PyMem_Free(keys);
    return result;
}

static PyMethodDef methods[] = {
    {"structure", structure, METH_VARARGS,
     "structure(text, start, end, lone_cr, Heading, Group) -> (headings, paths, positions, scores, groups, "
     "quote_heads)"},
    {"scan_lines", scan_lines, METH_VARARGS,
     "scan_lines(text, start, end, lone_cr) -> (headings, positions, scores, groups); see chunking/markdown.py"},
    {"commonmark_lists", commonmark_lists, METH_VARARGS,
     "commonmark_lists(text, start, end, Group) -> [Group]; see chunking/markdown.py"},
    {"indented_units", indented_units, METH_VARARGS,
     "indented_units(text, begin, end, Group) -> [Group]; see chunking/markdown.py"},
    {"group_units", group_units, METH_VARARGS, "group_units(text, groups, Group) -> [Group]; see chunking/markdown.py"},
    {"unit_starts", unit_starts, METH_VARARGS,
     "unit_starts(text, positions, scores, groups, units) -> None | (positions, scores); see chunking/markdown.py"},
    {"merged_units", merged_units, METH_VARARGS, "merged_units(nested, lists, groups) -> [group]; see chunking/markdown.py"},
    {"not_crossing", not_crossing, METH_VARARGS,
     "not_crossing(nested, lists, limit) -> [group]; see chunking/markdown.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "chunkyard.chunking._mdscan", "The Markdown line scanner of chunkyard.chunking.markdown, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__mdscan(void)
{
    for (int k = 0; k < N_KINDS; k++)
        if (KINDS[k] == NULL && (KINDS[k] = PyUnicode_InternFromString(KIND_NAMES[k])) == NULL)
            return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", CHUNKYARD_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
