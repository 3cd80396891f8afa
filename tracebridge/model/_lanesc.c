/* lanes.nested_fit's placement as one C loop (tracebridge/model/lanes.py, _nested_rows).
 *
 * Why: the numpy passes of lanes.py find the few intervals that need placing one at a time
 * in a few passes over all of them, level by level of nesting; on the 3M ops of the
 * benchmark profile that is 0.15 s of a .pftrace convert. Placing every interval one at a
 * time is the same result (lanes.py says why) and in C a single pass: each interval goes
 * to the lowest row whose open intervals, in every reading, have ended or enclose it.
 *
 * nested_rows(readings, out): readings a sequence of (start, end) pairs of int64 arrays of
 * one length (the same intervals as each reader places them, sorted by start, longest
 * first, in the first); out an int32 array of that length, the rows written into it.
 * The optional module of setup.py: without it, lanes.py's numpy passes do the work.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_READINGS 8

/* The ends of one row's open intervals in one reading, innermost last. */
typedef struct {
    int64_t *ends;
    Py_ssize_t used, room;
} Stack;

static int push(Stack *stack, int64_t end) {
    if (stack->used == stack->room) {
        Py_ssize_t room = stack->room ? 2 * stack->room : 16;
        int64_t *grown = realloc(stack->ends, (size_t)room * sizeof(int64_t));
        if (!grown)
            return 0;
        stack->ends = grown;
        stack->room = room;
    }
    stack->ends[stack->used++] = end;
    return 1;
}

/* Rows of `readings` stacks each (row k's reading r: stacks[k * readings + r]). */
typedef struct {
    Stack *stacks;
    Py_ssize_t rows, room;
} Rows;

static int add_row(Rows *rows, int readings) {
    if (rows->rows == rows->room) {
        Py_ssize_t room = rows->room ? 2 * rows->room : 4;
        Stack *grown = realloc(rows->stacks, (size_t)(room * readings) * sizeof(Stack));
        if (!grown)
            return 0;
        rows->stacks = grown;
        rows->room = room;
    }
    for (int r = 0; r < readings; r++)
        rows->stacks[rows->rows * readings + r] = (Stack){NULL, 0, 0};
    rows->rows++;
    return 1;
}

/* Place intervals 0..n-1; 1, or 0 out of memory. */
static int place(const int64_t **start, const int64_t **end, int readings, Py_ssize_t n, int32_t *out,
                 Rows *rows) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = 0;
        for (; k < rows->rows; k++) {
            int fits = 1;
            for (int r = 0; r < readings; r++) { /* every reading's stack is popped, as in lanes.py */
                Stack *stack = &rows->stacks[k * readings + r];
                while (stack->used && stack->ends[stack->used - 1] <= start[r][i])
                    stack->used--;
                if (stack->used && end[r][i] > stack->ends[stack->used - 1])
                    fits = 0;
            }
            if (fits)
                break;
        }
        if (k == rows->rows && !add_row(rows, readings))
            return 0;
        for (int r = 0; r < readings; r++)
            if (!push(&rows->stacks[k * readings + r], end[r][i]))
                return 0;
        if (k > INT32_MAX)
            return 0;
        out[i] = (int32_t)k;
    }
    return 1;
}

static PyObject *nested_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *readings_object, *out_object;
    if (!PyArg_ParseTuple(args, "OO", &readings_object, &out_object))
        return NULL;
    PyObject *sequence = PySequence_Fast(readings_object, "readings must be a sequence of (start, end) pairs");
    if (!sequence)
        return NULL;
    Py_ssize_t readings = PySequence_Fast_GET_SIZE(sequence);
    Py_buffer views[2 * MAX_READINGS + 1];
    int held = 0;
    PyObject *result = NULL;
    const int64_t *start[MAX_READINGS], *end[MAX_READINGS];
    Py_ssize_t n = -1;
    if (readings < 1 || readings > MAX_READINGS) {
        PyErr_SetString(PyExc_ValueError, "readings: 1 to 8 (start, end) pairs");
        goto done;
    }
    for (Py_ssize_t r = 0; r < readings; r++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(sequence, r);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "each reading is a (start, end) tuple");
            goto done;
        }
        for (int side = 0; side < 2; side++) {
            Py_buffer *view = &views[held];
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, side), view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
                goto done;
            held++;
            if (view->itemsize != 8 || !view->format || (view->format[0] != 'l' && view->format[0] != 'q')) {
                PyErr_SetString(PyExc_TypeError, "starts and ends must be int64 arrays");
                goto done;
            }
            if (n < 0)
                n = view->len / 8;
            if (view->len / 8 != n) {
                PyErr_SetString(PyExc_ValueError, "every reading has as many starts and ends");
                goto done;
            }
            (side ? end : start)[r] = view->buf;
        }
    }
    Py_buffer *out = &views[held];
    if (PyObject_GetBuffer(out_object, out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        goto done;
    held++;
    if (out->itemsize != 4 || out->len / 4 != n || !out->format || (out->format[0] != 'i' && out->format[0] != 'l')) {
        PyErr_SetString(PyExc_TypeError, "out must be an int32 array as long as the readings");
        goto done;
    }
    Rows rows = {NULL, 0, 0};
    int placed;
    Py_BEGIN_ALLOW_THREADS
    placed = place(start, end, (int)readings, n, out->buf, &rows);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < rows.rows * readings; k++)
        free(rows.stacks[k].ends);
    free(rows.stacks);
    result = placed ? Py_NewRef(Py_None) : PyErr_NoMemory();
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    Py_DECREF(sequence);
    return result;
}

static PyMethodDef methods[] = {
    {"nested_rows", nested_rows, METH_VARARGS,
     "nested_rows(readings, out): lanes.nested_fit's rows of the intervals, one at a time, into the int32 array out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lanesc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__lanesc(void) { return PyModule_Create(&module); }
