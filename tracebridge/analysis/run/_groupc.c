/* The per-key totals of tracebridge.analysis.run.summary._group, as one C pass.
 *
 * Why: a summary groups 3M rows by op name, by op type and by device; numpy does each
 * grouping in five passes over the rows (a count, two or three np.add.at, np.minimum.at,
 * np.maximum.at: about a tenth of a 3M-event summary's time). This loop reads each row once.
 *
 * totals(index, size, basis, counted, host, device, selected=None) -> (occurring, count, sums,
 * hosts, devices, lows, highs), seven int64 columns of `size` keys, over the rows where
 * `selected` (a bool per row, or None: every row; the others are skipped, keys unread):
 * index (int32 or int64 per row) is the
 * row's key in 0..size-1; basis, host and device are int64 per row (host and device may be
 * None: hosts are then the sums, devices zeros); counted is a bool per row or None (every
 * row). occurring counts every row of a key, count its counted rows; sums, hosts and devices
 * add every row's value (int64 wrapping around as numpy's sums do); lows and highs are the
 * least and greatest basis of its counted rows (INT64_MAX and 0 where it has none: the
 * caller's starting values). A key outside 0..size-1 raises ValueError.
 *
 * busy(start, end, runs): the busy time of rows in a few start-ordered runs (see below).
 *
 * The module is an optional build (setup.py): without a C compiler, numpy does it all.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int column(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t rows, const char *what) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    if (view->itemsize != itemsize || (rows >= 0 && view->len != rows * itemsize)) {
        PyErr_Format(PyExc_ValueError, "totals: %s has the wrong type or length", what);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *totals(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *index_object, *basis_object, *counted_object, *host_object, *device_object, *selected_object = Py_None;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OnOOOO|O:totals", &index_object, &size, &basis_object, &counted_object,
                          &host_object, &device_object, &selected_object))
        return NULL;
    if (size < 0 || size > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "totals: size out of range");
        return NULL;
    }
    Py_buffer views[6];
    int held = 0;
    PyObject *result = NULL, *outs[7] = {NULL};
    if (PyObject_GetBuffer(index_object, &views[held], PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Py_ssize_t width = views[held].itemsize, rows = width ? views[held].len / width : 0;
    const void *index = views[held++].buf;
    if (width != 4 && width != 8) {
        PyErr_SetString(PyExc_ValueError, "totals: index must be int32 or int64");
        goto done;
    }
    if (!column(basis_object, &views[held], 8, rows, "basis"))
        goto done;
    const int64_t *basis = views[held++].buf;
    const uint8_t *counted = NULL;
    const int64_t *host = NULL, *device = NULL;
    if (counted_object != Py_None) {
        if (!column(counted_object, &views[held], 1, rows, "counted"))
            goto done;
        counted = views[held++].buf;
    }
    if (host_object != Py_None) {
        if (!column(host_object, &views[held], 8, rows, "host"))
            goto done;
        host = views[held++].buf;
    }
    if (device_object != Py_None) {
        if (!column(device_object, &views[held], 8, rows, "device"))
            goto done;
        device = views[held++].buf;
    }
    const uint8_t *selected = NULL;
    if (selected_object != Py_None) {
        if (!column(selected_object, &views[held], 1, rows, "selected"))
            goto done;
        selected = views[held++].buf;
    }
    int64_t *out[7];
    for (int k = 0; k < 7; k++) {
        outs[k] = PyByteArray_FromStringAndSize(NULL, size * 8);
        if (!outs[k])
            goto done;
        out[k] = (int64_t *)PyByteArray_AS_STRING(outs[k]);
        memset(out[k], 0, (size_t)size * 8);
    }
    int64_t *occurring = out[0], *count = out[1], *lows = out[5], *highs = out[6];
    uint64_t *sums = (uint64_t *)out[2], *hosts = (uint64_t *)out[3], *devices = (uint64_t *)out[4];
    for (Py_ssize_t k = 0; k < size; k++)
        lows[k] = INT64_MAX;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (selected && !selected[i])
            continue;
        int64_t key = width == 4 ? ((const int32_t *)index)[i] : ((const int64_t *)index)[i];
        if (key < 0 || key >= size) {
            bad = i;
            break;
        }
        int64_t b = basis[i];
        occurring[key]++;
        sums[key] += (uint64_t)b;
        if (host)
            hosts[key] += (uint64_t)host[i];
        if (device)
            devices[key] += (uint64_t)device[i];
        if (!counted || counted[i]) {
            count[key]++;
            if (b < lows[key])
                lows[key] = b;
            if (b > highs[key])
                highs[key] = b;
        }
    }
    if (!host && bad < 0)
        memcpy(hosts, sums, (size_t)size * 8);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "totals: row %zd's key is outside 0..%zd", bad, size - 1);
        goto done;
    }
    result = PyTuple_New(7);
    if (result)
        for (int k = 0; k < 7; k++) {
            PyTuple_SET_ITEM(result, k, outs[k]);
            outs[k] = NULL;
        }
done:
    for (int k = 0; k < 7; k++)
        Py_XDECREF(outs[k]);
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

/* busy(start, end, runs, selected) -> int: the length of the union of the intervals
 * [start[i], end[i]] (int64 columns, end >= start) of the rows where `selected` (a bool per
 * row, or None: every row), given as `runs` (int64 row offsets, ascending, from 0 to the row
 * count) of rows in ascending start order each: the runs are merged by start, a head per
 * run, and the union is walked once, with no sorted copies (the lines of an XSpace are such
 * runs: 3M rows of 3 lines, where sorting copies of the starts and ends takes 48 MB). A run
 * out of order, an end before its start, or runs that do not cover the rows raise ValueError. */
#define MAX_RUNS 64

static PyObject *busy(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *start_object, *end_object, *runs_object, *selected_object = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:busy", &start_object, &end_object, &runs_object, &selected_object))
        return NULL;
    Py_buffer views[4];
    int held = 0;
    PyObject *result = NULL;
    if (!column(start_object, &views[held++], 8, -1, "start"))
        return NULL;
    Py_ssize_t rows = views[0].len / 8;
    if (!column(end_object, &views[held++], 8, rows, "end") || !column(runs_object, &views[held++], 8, -1, "runs"))
        goto done;
    const int64_t *start = views[0].buf, *end = views[1].buf, *runs = views[2].buf;
    const uint8_t *selected = NULL;
    if (selected_object != Py_None) {
        if (!column(selected_object, &views[held], 1, rows, "selected"))
            goto done;
        selected = views[held++].buf;
    }
    Py_ssize_t count = views[2].len / 8 - 1;
    if (count < 0 || count > MAX_RUNS || runs[0] != 0 || runs[count] != rows) {
        PyErr_SetString(PyExc_ValueError, "busy: runs must go from 0 to the row count, at most 64 of them");
        goto done;
    }
    Py_ssize_t head[MAX_RUNS], stop[MAX_RUNS];
    int bad = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        head[r] = runs[r];
        stop[r] = runs[r + 1];
        if (stop[r] < head[r])
            bad = 1;
    }
    uint64_t total = 0;
    int64_t low = 0, reach = 0;
    int open = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!bad) {
        Py_ssize_t best = -1;
        for (Py_ssize_t r = 0; r < count; r++)
            if (head[r] < stop[r] && (best < 0 || start[head[r]] < start[head[best]]))
                best = r;
        if (best < 0)
            break;
        Py_ssize_t i = head[best]++;
        int64_t s = start[i], e = end[i];
        if (e < s || (head[best] < stop[best] && start[head[best]] < s)) {
            bad = 1;
            break;
        }
        if (selected && !selected[i])
            continue;
        if (!open) {
            low = s, reach = e, open = 1;
        } else if (s > reach) {
            total += (uint64_t)(reach - low);
            low = s, reach = e;
        } else if (e > reach) {
            reach = e;
        }
    }
    if (open)
        total += (uint64_t)(reach - low);
    Py_END_ALLOW_THREADS
    if (bad)
        PyErr_SetString(PyExc_ValueError, "busy: a run is not in start order, an end is before its start, or the "
                                          "runs go backwards");
    else
        result = PyLong_FromLongLong((long long)total);
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

/* union(start, end, runs, selected) -> (starts, ends): the union of the intervals of busy()'s
 * rows as sorted, disjoint stretches (int64 bytearrays), intervals of no length left out (as
 * tracebridge.analysis.run.breakdown.union does with its sorted copies). Two walks: one counts
 * the stretches, one writes them. */
static Py_ssize_t union_walk(const int64_t *start, const int64_t *end, const int64_t *runs, Py_ssize_t count,
                             const uint8_t *selected, int64_t *starts, int64_t *ends, int *bad) {
    Py_ssize_t head[MAX_RUNS], stop[MAX_RUNS], found = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        head[r] = runs[r];
        stop[r] = runs[r + 1];
        if (stop[r] < head[r])
            *bad = 1;
    }
    int64_t low = 0, reach = 0;
    int open = 0;
    while (!*bad) {
        Py_ssize_t best = -1;
        for (Py_ssize_t r = 0; r < count; r++)
            if (head[r] < stop[r] && (best < 0 || start[head[r]] < start[head[best]]))
                best = r;
        if (best < 0)
            break;
        Py_ssize_t i = head[best]++;
        int64_t s = start[i], e = end[i];
        if (head[best] < stop[best] && start[head[best]] < s) {
            *bad = 1;
            break;
        }
        if ((selected && !selected[i]) || e <= s)
            continue;
        if (!open) {
            low = s, reach = e, open = 1;
        } else if (s > reach) {
            if (starts) {
                starts[found] = low;
                ends[found] = reach;
            }
            found++;
            low = s, reach = e;
        } else if (e > reach) {
            reach = e;
        }
    }
    if (open) {
        if (starts) {
            starts[found] = low;
            ends[found] = reach;
        }
        found++;
    }
    return found;
}

static PyObject *interval_union(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *start_object, *end_object, *runs_object, *selected_object = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:union", &start_object, &end_object, &runs_object, &selected_object))
        return NULL;
    Py_buffer views[4];
    int held = 0;
    PyObject *result = NULL, *starts_object = NULL, *ends_object = NULL;
    if (!column(start_object, &views[held++], 8, -1, "start"))
        return NULL;
    Py_ssize_t rows = views[0].len / 8;
    if (!column(end_object, &views[held++], 8, rows, "end") || !column(runs_object, &views[held++], 8, -1, "runs"))
        goto done;
    const int64_t *start = views[0].buf, *end = views[1].buf, *runs = views[2].buf;
    const uint8_t *selected = NULL;
    if (selected_object != Py_None) {
        if (!column(selected_object, &views[held], 1, rows, "selected"))
            goto done;
        selected = views[held++].buf;
    }
    Py_ssize_t count = views[2].len / 8 - 1;
    if (count < 0 || count > MAX_RUNS || runs[0] != 0 || runs[count] != rows) {
        PyErr_SetString(PyExc_ValueError, "union: runs must go from 0 to the row count, at most 64 of them");
        goto done;
    }
    int bad = 0;
    Py_ssize_t found;
    Py_BEGIN_ALLOW_THREADS
    found = union_walk(start, end, runs, count, selected, NULL, NULL, &bad);
    Py_END_ALLOW_THREADS
    if (!bad) {
        starts_object = PyByteArray_FromStringAndSize(NULL, found * 8);
        ends_object = starts_object ? PyByteArray_FromStringAndSize(NULL, found * 8) : NULL;
        if (!ends_object)
            goto done;
        int64_t *starts = (int64_t *)PyByteArray_AS_STRING(starts_object);
        int64_t *ends = (int64_t *)PyByteArray_AS_STRING(ends_object);
        Py_BEGIN_ALLOW_THREADS
        union_walk(start, end, runs, count, selected, starts, ends, &bad);
        Py_END_ALLOW_THREADS
    }
    if (bad)
        PyErr_SetString(PyExc_ValueError, "union: a run is not in start order, or the runs go backwards");
    else
        result = Py_BuildValue("(OO)", starts_object, ends_object);
done:
    Py_XDECREF(starts_object);
    Py_XDECREF(ends_object);
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"totals", totals, METH_VARARGS,
     "totals(index, size, basis, counted, host, device, selected=None) -> (occurring, count, sums, hosts, devices, "
     "lows, highs)"},
    {"union", interval_union, METH_VARARGS,
     "union(start, end, runs, selected=None) -> (starts, ends): the union of the intervals as stretches"},
    {"busy", busy, METH_VARARGS, "busy(start, end, runs) -> the length of the union of the intervals"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_groupc", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__groupc(void) { return PyModule_Create(&module); }
