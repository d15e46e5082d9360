/* The global segmenter's optimiser in C: segmenter.best_predecessors (chunking/segmenter.py), which
 * stays the reference and the fallback (tests/core/test_segmenter.py holds them equal). A kernel over
 * integer arrays with no rule of its own: every price is computed in Python and passed in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef long long i64;

static const i64 UNREACHABLE = (i64)1 << 62;

/* A Python sequence of ints as a new C array (NULL and an exception on failure). */
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

static PyMethodDef methods[] = {
    {"best_predecessors", best_predecessors, METH_VARARGS,
     "segmenter.best_predecessors(heads, tails, prices, inside_head, inside_tail, floors, allowances, fulls, "
     "max_allowance, min_size, chunk_price, PRICE_NO_OVERLAP, PRICE_UNDERSIZED, PRICE_OVER_BUDGET)"},
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
