/* The record assembly of tracebridge.writers.protowire, as one sequential C loop.
 *
 * Why: protowire encodes each field of a batch of records (the 6M packets of a 3M-op
 * trace, say) as a numpy column, then concatenates the columns record by record. In
 * numpy that concatenation groups the records by layout and copies a block per group and
 * piece: a fancy-indexed copy of every byte, about a third of the .pftrace writer's
 * time. This loop copies each record's pieces once, in output order.
 *
 * gather(out, position, pieces): for every record i, the bytes
 * data[starts[i]:starts[i] + lengths[i]] of each piece (lengths, data, starts) in turn,
 * written back to back from out[position[i]]. lengths, starts and position are int64
 * columns of one value per record. Every span is checked against its buffer: a bad one
 * raises ValueError (out is then partly written; the caller discards it).
 *
 * varints(values, matrix, column): each uint64 value as a varint into its row of the
 * uint8 matrix (one row per value), from byte `column`: the encoding of varint_piece,
 * without a numpy pass per byte of the widest value. A value whose varint does not fit
 * its row raises ValueError.
 *
 * merge(begin_key, end_key, end_order, order): the time order of a track's begin and end
 * events (tracebridge.writers.perfetto._event_order). begin_key is ascending, end_key in
 * the order end_order; order (2n) receives, by ascending key, begin i as i and end j as
 * n + j, a begin before ends of an equal key: one pass, where numpy searches every begin's
 * place and scatters both kinds.
 *
 * The module is an optional build (setup.py): without a C compiler, protowire.py does it
 * with numpy, byte for byte the same.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_PIECES 64

typedef struct {
    Py_buffer lengths, data, starts;
    int held; /* how many of the three views are held */
} Piece;

static void release(Piece *pieces, Py_ssize_t count) {
    for (Py_ssize_t k = 0; k < count; k++) {
        if (pieces[k].held > 0) PyBuffer_Release(&pieces[k].lengths);
        if (pieces[k].held > 1) PyBuffer_Release(&pieces[k].data);
        if (pieces[k].held > 2) PyBuffer_Release(&pieces[k].starts);
    }
}

/* A C-contiguous int64 column of `records` values into view. */
static int get_column(PyObject *object, Py_buffer *view, Py_ssize_t records, const char *what, int writable) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    if (view->itemsize != 8 || !view->format || (strcmp(view->format, "l") && strcmp(view->format, "q")) ||
        (records >= 0 && view->len != records * 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd int64 values", what, records);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *gather(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *out_object, *position_object, *pieces_object;
    if (!PyArg_ParseTuple(args, "OOO:gather", &out_object, &position_object, &pieces_object))
        return NULL;
    Py_buffer out, position;
    if (PyObject_GetBuffer(out_object, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (!get_column(position_object, &position, -1, "position", 0)) {
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t records = position.len / 8;
    PyObject *sequence = PySequence_Fast(pieces_object, "pieces: expected a sequence of (lengths, data, starts)");
    Piece pieces[MAX_PIECES];
    Py_ssize_t count = 0, started = 0; /* pieces whose views are (partly) held */
    PyObject *result = NULL;
    if (!sequence)
        goto done;
    if (PySequence_Fast_GET_SIZE(sequence) > MAX_PIECES) {
        PyErr_Format(PyExc_ValueError, "at most %d pieces", MAX_PIECES);
        goto done;
    }
    for (; count < PySequence_Fast_GET_SIZE(sequence); count++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sequence, count);
        Piece *piece = &pieces[count];
        piece->held = 0;
        started = count + 1;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_ValueError, "a piece is a tuple (lengths, data, starts)");
            goto done;
        }
        if (!get_column(PyTuple_GET_ITEM(item, 0), &piece->lengths, records, "lengths", 0))
            goto done;
        piece->held = 1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &piece->data, PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        piece->held = 2;
        if (!get_column(PyTuple_GET_ITEM(item, 2), &piece->starts, records, "starts", 0))
            goto done;
        piece->held = 3;
    }
    const int64_t *at = position.buf;
    uint8_t *target = out.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < records && bad < 0; i++) {
        int64_t p = at[i];
        if (p < 0 || p > out.len) {
            bad = i;
            break;
        }
        for (Py_ssize_t k = 0; k < count; k++) {
            int64_t length = ((const int64_t *)pieces[k].lengths.buf)[i];
            if (!length)
                continue;
            int64_t start = ((const int64_t *)pieces[k].starts.buf)[i];
            if (length < 0 || start < 0 || start > pieces[k].data.len - length || p > out.len - length) {
                bad = i;
                break;
            }
            memcpy(target + p, (const uint8_t *)pieces[k].data.buf + start, (size_t)length);
            p += length;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "record %zd: a piece's span is outside its data or the output", bad);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(pieces, started);
    Py_XDECREF(sequence);
    PyBuffer_Release(&position);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *varints(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *values_object, *matrix_object;
    Py_ssize_t column;
    if (!PyArg_ParseTuple(args, "OOn:varints", &values_object, &matrix_object, &column))
        return NULL;
    Py_buffer values, matrix;
    if (PyObject_GetBuffer(values_object, &values, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(matrix_object, &matrix, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_ND) < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    Py_ssize_t count = values.len / 8;
    Py_ssize_t width = matrix.ndim == 2 ? matrix.shape[1] : -1;
    int fits = values.itemsize == 8 && matrix.itemsize == 1 && width >= 0 && matrix.shape[0] == count &&
               column >= 0 && column <= width;
    if (fits) {
        const uint64_t *value = values.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < count && fits; i++) {
            uint8_t *at = (uint8_t *)matrix.buf + i * width + column, *end = (uint8_t *)matrix.buf + (i + 1) * width;
            uint64_t v = value[i];
            while (v >= 0x80 && at < end) {
                *at++ = (uint8_t)(v | 0x80);
                v >>= 7;
            }
            if (at < end)
                *at = (uint8_t)v;
            else
                fits = 0;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&values);
    PyBuffer_Release(&matrix);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "varints: expected uint64 values and a uint8 matrix of a row each, "
                                          "wide enough for every varint after the column");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *merge(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[4];
    if (!PyArg_ParseTuple(args, "OOOO:merge", &objects[0], &objects[1], &objects[2], &objects[3]))
        return NULL;
    Py_buffer views[4];
    int held = 0;
    PyObject *result = NULL;
    for (; held < 4; held++)
        if (!get_column(objects[held], &views[held], -1, "merge", held == 3))
            goto done;
    Py_ssize_t n = views[0].len / 8;
    if (views[1].len != n * 8 || views[2].len != n * 8 || views[3].len != 2 * n * 8) {
        PyErr_SetString(PyExc_ValueError, "merge: expected n begin keys, n end keys, n end rows and 2n places");
        goto done;
    }
    const int64_t *begin_key = views[0].buf, *end_key = views[1].buf, *end_order = views[2].buf;
    int64_t *order = views[3].buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0, j = 0, k = 0;
    for (Py_ssize_t m = 0; m < n; m++)
        if (end_order[m] < 0 || end_order[m] >= n)
            bad = 1;
    while (!bad && (i < n || j < n)) {
        if (j < n && (i == n || end_key[end_order[j]] < begin_key[i]))
            order[k++] = n + end_order[j++];
        else
            order[k++] = i++;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "merge: an end row is out of range");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"merge", merge, METH_VARARGS,
     "merge(begin_key, end_key, end_order, order): begins and ends of a track in time order (see the module)."},
    {"varints", varints, METH_VARARGS,
     "varints(values, matrix, column): each uint64 value's varint into its row of matrix, from column."},
    {"gather", gather, METH_VARARGS,
     "gather(out, position, pieces): record i, the concatenation of each piece's "
     "data[starts[i]:starts[i] + lengths[i]], written at out[position[i]:]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_protowirec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__protowirec(void) { return PyModule_Create(&module); }
