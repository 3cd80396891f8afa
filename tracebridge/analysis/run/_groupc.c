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
 * busy(), union() and measures(): the union of rows in a few start-ordered runs, its length,
 * its stretches, or how much of it lies before given moments (see below).
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
        PyErr_Format(PyExc_ValueError, "column %s has the wrong type or length", what);
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

/* Rows in a few runs, each in ascending start order (the lines of an XSpace: 3M rows of 3
 * lines), walked in start order by merging the runs, a head per run, with no sorted copies
 * (sorting copies of 3M starts and ends takes 48 MB): busy(), union() and measures() walk
 * them. `runs` are int64 row offsets, ascending, from 0 to the row count; a run out of start
 * order is found as the walk meets it. */
#define MAX_RUNS 64

typedef struct {
    Py_buffer views[4];
    int held;
    const int64_t *start, *end;
    const uint8_t *selected; /* a byte per row (a bool, or measures()'s part bits), or NULL: every row */
    Py_ssize_t rows, count, head[MAX_RUNS], stop[MAX_RUNS];
    Py_ssize_t current; /* the run taken from last (-1: none yet) */
    int64_t limit;      /* the least next start of the other runs when it was chosen */
} Walk;

static void walk_release(Walk *walk) {
    while (walk->held > 0)
        PyBuffer_Release(&walk->views[--walk->held]);
}

static int walk_column(Walk *walk, PyObject *object, Py_ssize_t itemsize, Py_ssize_t rows, const char *what) {
    if (!column(object, &walk->views[walk->held], itemsize, rows, what))
        return 0;
    walk->held++;
    return 1;
}

/* Holds the columns and sets the heads; 0 (an exception set, nothing held) where they are wrong. */
static int walk_open(Walk *walk, const char *name, PyObject *start_object, PyObject *end_object,
                     PyObject *runs_object, PyObject *selected_object) {
    walk->held = 0;
    walk->selected = NULL;
    walk->current = -1;
    walk->limit = INT64_MAX;
    if (!walk_column(walk, start_object, 8, -1, "start"))
        return 0;
    walk->rows = walk->views[0].len / 8;
    if (!walk_column(walk, end_object, 8, walk->rows, "end") || !walk_column(walk, runs_object, 8, -1, "runs"))
        goto fail;
    walk->start = walk->views[0].buf;
    walk->end = walk->views[1].buf;
    const int64_t *runs = walk->views[2].buf;
    if (selected_object != Py_None) {
        if (!walk_column(walk, selected_object, 1, walk->rows, "selected"))
            goto fail;
        walk->selected = walk->views[3].buf;
    }
    walk->count = walk->views[2].len / 8 - 1;
    if (walk->count < 0 || walk->count > MAX_RUNS || runs[0] != 0 || runs[walk->count] != walk->rows) {
        PyErr_Format(PyExc_ValueError, "%s: runs must go from 0 to the row count, at most 64 of them", name);
        goto fail;
    }
    for (Py_ssize_t r = 0; r < walk->count; r++) {
        walk->head[r] = runs[r];
        walk->stop[r] = runs[r + 1];
        if (walk->stop[r] < walk->head[r]) {
            PyErr_Format(PyExc_ValueError, "%s: the runs go backwards", name);
            goto fail;
        }
    }
    return 1;
fail:
    walk_release(walk);
    return 0;
}

/* The next row in start order: its index, -1 once every row is walked, -2 where a run is
 * out of start order. The run last taken from goes on while its next start comes no later
 * than every other run's (`limit`): the heads are compared only when the walk changes runs
 * (an XSpace's lines take turns a few thousand times in 3M rows). Of rows that start
 * together, which comes first changes no union. */
static inline Py_ssize_t walk_next(Walk *walk) {
    const int64_t *start = walk->start;
    const Py_ssize_t *head = walk->head, *stop = walk->stop;
    Py_ssize_t best = walk->current;
    if (best < 0 || head[best] >= stop[best] || start[head[best]] > walk->limit) {
        best = -1;
        for (Py_ssize_t r = 0; r < walk->count; r++)
            if (head[r] < stop[r] && (best < 0 || start[head[r]] < start[head[best]]))
                best = r;
        if (best < 0)
            return -1;
        walk->current = best;
        walk->limit = INT64_MAX;
        for (Py_ssize_t r = 0; r < walk->count; r++)
            if (r != best && head[r] < stop[r] && start[head[r]] < walk->limit)
                walk->limit = start[head[r]];
    }
    Py_ssize_t i = walk->head[best]++;
    if (head[best] < stop[best] && start[head[best]] < start[i])
        return -2;
    return i;
}

/* The union being walked: its open stretch [low, reach). */
typedef struct {
    int64_t low, reach;
    int open;
} Stretch;

/* Adds [s, e) (rows in start order); 1 where that closed the stretch before it, given in
 * *low and *high. Stretches that touch are one. */
static inline int stretch_add(Stretch *stretch, int64_t s, int64_t e, int64_t *low, int64_t *high) {
    if (!stretch->open) {
        stretch->low = s, stretch->reach = e, stretch->open = 1;
        return 0;
    }
    if (s > stretch->reach) {
        *low = stretch->low, *high = stretch->reach;
        stretch->low = s, stretch->reach = e;
        return 1;
    }
    if (e > stretch->reach)
        stretch->reach = e;
    return 0;
}

/* busy(start, end, runs, selected=None) -> int: the length of the union of the intervals
 * [start[i], end[i]] (end >= start) of the rows where `selected` (a bool per row, or None:
 * every row). A run out of start order or an end before its start raises ValueError. */
static PyObject *busy(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *start_object, *end_object, *runs_object, *selected_object = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:busy", &start_object, &end_object, &runs_object, &selected_object))
        return NULL;
    Walk walk;
    if (!walk_open(&walk, "busy", start_object, end_object, runs_object, selected_object))
        return NULL;
    Stretch stretch = {0, 0, 0};
    uint64_t total = 0;
    int64_t low, high;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        Py_ssize_t i = walk_next(&walk);
        if (i == -1)
            break;
        if (i < 0 || walk.end[i] < walk.start[i]) {
            bad = 1;
            break;
        }
        if (walk.selected && !walk.selected[i])
            continue;
        if (stretch_add(&stretch, walk.start[i], walk.end[i], &low, &high))
            total += (uint64_t)(high - low);
    }
    if (stretch.open)
        total += (uint64_t)(stretch.reach - stretch.low);
    Py_END_ALLOW_THREADS
    walk_release(&walk);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "busy: a run is not in start order, or an end is before its start");
        return NULL;
    }
    return PyLong_FromLongLong((long long)total);
}

/* union(start, end, runs, selected=None) -> (starts, ends): the union of the intervals of
 * busy()'s rows as sorted, disjoint stretches (int64 bytearrays), intervals of no length or
 * ending before they start left out (as tracebridge.analysis.run.breakdown.union does with
 * its sorted copies). One walk, into columns of the row count shrunk to the stretches found
 * (their untouched pages cost no memory). */
static PyObject *interval_union(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *start_object, *end_object, *runs_object, *selected_object = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:union", &start_object, &end_object, &runs_object, &selected_object))
        return NULL;
    Walk walk;
    if (!walk_open(&walk, "union", start_object, end_object, runs_object, selected_object))
        return NULL;
    PyObject *result = NULL, *starts_object = PyByteArray_FromStringAndSize(NULL, walk.rows * 8);
    PyObject *ends_object = starts_object ? PyByteArray_FromStringAndSize(NULL, walk.rows * 8) : NULL;
    if (!ends_object)
        goto done;
    int64_t *starts = (int64_t *)PyByteArray_AS_STRING(starts_object);
    int64_t *ends = (int64_t *)PyByteArray_AS_STRING(ends_object);
    Stretch stretch = {0, 0, 0};
    Py_ssize_t found = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        Py_ssize_t i = walk_next(&walk);
        if (i == -1)
            break;
        if (i < 0) {
            bad = 1;
            break;
        }
        int64_t s = walk.start[i], e = walk.end[i];
        if ((walk.selected && !walk.selected[i]) || e <= s)
            continue;
        if (stretch_add(&stretch, s, e, &starts[found], &ends[found]))
            found++;
    }
    if (stretch.open) {
        starts[found] = stretch.low, ends[found] = stretch.reach;
        found++;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "union: a run is not in start order");
        goto done;
    }
    if (PyByteArray_Resize(starts_object, found * 8) < 0 || PyByteArray_Resize(ends_object, found * 8) < 0)
        goto done;
    result = PyTuple_Pack(2, starts_object, ends_object);
done:
    Py_XDECREF(starts_object);
    Py_XDECREF(ends_object);
    walk_release(&walk);
    return result;
}

/* measures(start, end, runs, parts, masks, moments) -> bytearray of len(masks) x len(moments)
 * int64, mask by mask: how much of the union of the rows whose `parts` byte shares a bit
 * with the mask (one byte each in `masks`, at most 16) lies before each of the ascending
 * `moments`; rows of no length or ending before they start left out, as union() does.
 *
 * Why: a step breakdown asks how much of each part's union lies in each step. Each union of
 * 3M ops is 3M stretches (48 MB) that numpy would make and then measure; here every union is
 * measured as the one walk makes it, and nothing of it is kept. */
#define MAX_MASKS 16

static PyObject *measures(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *start_object, *end_object, *runs_object, *parts_object, *masks_object, *moments_object;
    if (!PyArg_ParseTuple(args, "OOOOOO:measures", &start_object, &end_object, &runs_object, &parts_object,
                          &masks_object, &moments_object))
        return NULL;
    if (parts_object == Py_None) {
        PyErr_SetString(PyExc_ValueError, "measures: parts must be a byte per row");
        return NULL;
    }
    Walk walk;
    if (!walk_open(&walk, "measures", start_object, end_object, runs_object, parts_object))
        return NULL;
    Py_buffer masks_view, moments_view;
    PyObject *result = NULL;
    if (!column(masks_object, &masks_view, 1, -1, "masks"))
        goto release_walk;
    if (!column(moments_object, &moments_view, 8, -1, "moments"))
        goto release_masks;
    Py_ssize_t levels = masks_view.len, count = moments_view.len / 8;
    const uint8_t *masks = masks_view.buf;
    const int64_t *moments = moments_view.buf;
    if (levels > MAX_MASKS) {
        PyErr_SetString(PyExc_ValueError, "measures: at most 16 masks");
        goto release_moments;
    }
    for (Py_ssize_t j = 1; j < count; j++)
        if (moments[j] < moments[j - 1]) {
            PyErr_SetString(PyExc_ValueError, "measures: the moments must ascend");
            goto release_moments;
        }
    if (count && levels > PY_SSIZE_T_MAX / 8 / count) {
        PyErr_SetString(PyExc_ValueError, "measures: too many moments");
        goto release_moments;
    }
    result = PyByteArray_FromStringAndSize(NULL, levels * count * 8);
    if (!result)
        goto release_moments;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(result);
    uint16_t levels_of[256]; /* per part byte, the masks it shares a bit with, as bits */
    for (int bits = 0; bits < 256; bits++) {
        levels_of[bits] = 0;
        for (Py_ssize_t l = 0; l < levels; l++)
            if (bits & masks[l])
                levels_of[bits] |= (uint16_t)(1u << l);
    }
    Stretch stretches[MAX_MASKS];
    int64_t total[MAX_MASKS], low, high;
    Py_ssize_t next[MAX_MASKS]; /* per mask, its first moment not yet measured */
    for (Py_ssize_t l = 0; l < levels; l++)
        stretches[l].open = 0, total[l] = 0, next[l] = 0;
    int bad = 0;
/* The stretch [a, b) of mask l is closed: the moments before its end are measured. */
#define CLOSE(l, a, b)                                                                   \
    do {                                                                                 \
        int64_t *row = out + (l) * count;                                                \
        while (next[l] < count && moments[next[l]] < (b)) {                              \
            int64_t at = moments[next[l]];                                               \
            row[next[l]++] = total[l] + (at > (a) ? at - (a) : 0);                       \
        }                                                                                \
        total[l] += (b) - (a);                                                           \
    } while (0)
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        Py_ssize_t i = walk_next(&walk);
        if (i == -1)
            break;
        if (i < 0) {
            bad = 1;
            break;
        }
        unsigned in = levels_of[walk.selected[i]];
        int64_t s = walk.start[i], e = walk.end[i];
        if (!in || e <= s)
            continue;
        for (Py_ssize_t l = 0; in; l++, in >>= 1)
            if ((in & 1) && stretch_add(&stretches[l], s, e, &low, &high))
                CLOSE(l, low, high);
    }
    for (Py_ssize_t l = 0; l < levels; l++) {
        if (stretches[l].open)
            CLOSE(l, stretches[l].low, stretches[l].reach);
        while (next[l] < count)
            out[l * count + next[l]++] = total[l];
    }
    Py_END_ALLOW_THREADS
#undef CLOSE
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "measures: a run is not in start order");
        Py_CLEAR(result);
    }
release_moments:
    PyBuffer_Release(&moments_view);
release_masks:
    PyBuffer_Release(&masks_view);
release_walk:
    walk_release(&walk);
    return result;
}

static PyMethodDef methods[] = {
    {"totals", totals, METH_VARARGS,
     "totals(index, size, basis, counted, host, device, selected=None) -> (occurring, count, sums, hosts, devices, "
     "lows, highs)"},
    {"union", interval_union, METH_VARARGS,
     "union(start, end, runs, selected=None) -> (starts, ends): the union of the intervals as stretches"},
    {"busy", busy, METH_VARARGS, "busy(start, end, runs, selected=None) -> the length of the union of the intervals"},
    {"measures", measures, METH_VARARGS,
     "measures(start, end, runs, parts, masks, moments) -> per mask, its rows' union's length before each moment"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_groupc", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__groupc(void) { return PyModule_Create(&module); }
