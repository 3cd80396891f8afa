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

/* merge_times(times, low, end_order, order): merge() with the keys made from the times as it
 * goes: times holds the n begins then the n ends of a track's slices (perfetto._event_order);
 * a begin's key is 4 (t - low) + 1, an end's 4 (t - low), or + 2 for a slice of no duration
 * (end == begin). No key columns: for 5M slices they are 80 MB beside the order. Every time
 * must lie within [low, low + 2**60). */
static PyObject *merge_times(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[3];
    long long low;
    if (!PyArg_ParseTuple(args, "OLOO:merge_times", &objects[0], &low, &objects[1], &objects[2]))
        return NULL;
    Py_buffer views[3];
    int held = 0;
    PyObject *result = NULL;
    for (; held < 3; held++)
        if (!get_column(objects[held], &views[held], -1, "merge_times", held == 2))
            goto done;
    Py_ssize_t n = views[0].len / 16;
    if (views[0].len != n * 16 || views[1].len != n * 8 || views[2].len != 2 * n * 8) {
        PyErr_SetString(PyExc_ValueError, "merge_times: expected 2n times, n end rows and 2n places");
        goto done;
    }
    const int64_t *times = views[0].buf, *end_order = views[1].buf;
    int64_t *order = views[2].buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t m = 0; m < 2 * n && !bad; m++)
        if (times[m] < low || (uint64_t)(times[m] - low) >= ((uint64_t)1 << 60))
            bad = 1;
    for (Py_ssize_t m = 0; m < n && !bad; m++)
        if (end_order[m] < 0 || end_order[m] >= n)
            bad = 1;
    Py_ssize_t i = 0, j = 0, k = 0;
    while (!bad && (i < n || j < n)) {
        int64_t begin_key = 0, end_key = 0;
        if (i < n)
            begin_key = ((times[i] - low) << 2) + 1;
        if (j < n) {
            int64_t slice = end_order[j];
            end_key = ((times[n + slice] - low) << 2) + (times[n + slice] > times[slice] ? 0 : 2);
        }
        if (j < n && (i == n || end_key < begin_key))
            order[k++] = n + end_order[j++];
        else
            order[k++] = i++;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "merge_times: a time out of range, or an end row out of range");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

/* --- a track's events, encoded straight from the op columns ----------------------------------
 *
 * track_events(times, events, previous, rows, sequence, columns, extras) -> bytes: the
 * TracePackets of a chunk of one track's events (tracebridge.writers.perfetto): for each
 * event e of `events` (a slice of the track's time order; e < n begins the track's slice e,
 * whose op is rows[e], e >= n ends slice e - n), the packet
 *   {timestamp: times[e] - the previous event's, sequence id, track_event: {type, and for a
 *    begin: name iid, category iid (not for an op), the name, op type and step annotations,
 *    the op's extra fields}}
 * byte for byte as protowire's pieces make it (tests/test_perfetto.py compares them), in one
 * pass that sizes the output and one that writes it: no column per field, no gather.
 *
 * columns: (name_iid of each string id (int32, -1: not on this track), kernel, name, op_type
 * (int32 per op), category, name_key, shows_name, shows_type (uint8 per op), step (int32 per
 * op), step_numbers (int64 per step, then one more), name-less keys (op_type key, step key)).
 * extras: (data, rows, lengths, starts) or None: the ops that have extra fields (int64, ascending)
 * and their bytes' spans in data (int64 each; an op's extra bytes are data[start:start + length]).
 * Any index out of its column raises ValueError. */

enum { C_IID, C_KERNEL, C_NAME, C_TYPE, C_CATEGORY, C_NAME_KEY, C_SHOWS_NAME, C_SHOWS_TYPE, C_STEP, C_STEPS,
       C_COUNT };
static const Py_ssize_t column_width[C_COUNT] = {4, 4, 4, 4, 1, 1, 1, 1, 4, 8};

static int varint_length(uint64_t v) {
    int length = 1;
    while (v >= 0x80) {
        v >>= 7;
        length++;
    }
    return length;
}

static uint8_t *put_varint(uint8_t *at, uint64_t v) {
    while (v >= 0x80) {
        *at++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *at++ = (uint8_t)v;
    return at;
}

typedef struct {
    const int64_t *times, *events, *rows, *steps, *extra_rows, *extra_lengths, *extra_starts;
    const int32_t *iid, *kernel, *name, *op_type, *step;
    const uint8_t *category, *name_key, *shows_name, *shows_type, *extra_data;
    Py_ssize_t n, count, ops, strings, step_count, extra_size, extra_count;
    int64_t previous;
    uint64_t sequence;
    long type_key, step_key;
} Track;

/* The TrackEvent bytes of begin event `slice` (its fields after the type); -1 when an index is
 * out of range. Writes them at `at` when it is not NULL. */
static int64_t begin_fields(const Track *t, int64_t slice, uint8_t *at) {
    int64_t row = t->rows[slice];
    if (row < 0 || row >= t->ops)
        return -1;
    int32_t kernel = t->kernel[row];
    if (kernel < 0 || kernel >= t->strings || t->iid[kernel] < 0)
        return -1;
    uint64_t iid = (uint64_t)t->iid[kernel];
    int64_t size = 1 + varint_length(iid);
    uint8_t category = t->category[row];
    if (category)
        size += 2;
    uint64_t name = 0, type = 0, number = 0;
    if (t->shows_name[row]) {
        name = (uint64_t)((int64_t)t->name[row] + 1);
        size += 6 + varint_length(name);
    }
    if (t->shows_type[row]) {
        type = (uint64_t)((int64_t)t->op_type[row] + 1);
        size += 6 + varint_length(type);
    }
    int32_t step = t->step[row];
    if (step != -1) {
        if (step < 0 || step >= t->step_count)
            return -1;
        number = (uint64_t)t->steps[step];
        size += 5 + varint_length(number);
    }
    int64_t extra = 0, extra_start = 0;
    if (t->extra_rows) { /* the op's extra fields, if it is among the ops that have any */
        Py_ssize_t lo = 0, hi = t->extra_count;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (t->extra_rows[mid] < row)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < t->extra_count && t->extra_rows[lo] == row) {
            extra = t->extra_lengths[lo];
            extra_start = t->extra_starts[lo];
            if (extra < 0 || extra_start < 0 || extra_start > t->extra_size - extra)
                return -1;
            size += extra;
        }
    }
    if (!at)
        return size;
    *at++ = 10 << 3; /* name_iid */
    at = put_varint(at, iid);
    if (category) {
        *at++ = 3 << 3; /* category_iids */
        *at++ = (uint8_t)(category + 1);
    }
    if (t->shows_name[row]) { /* debug annotation {name_iid: key, string_value_iid: name + 1} */
        *at++ = (4 << 3) | 2;
        *at++ = (uint8_t)(4 + varint_length(name));
        *at++ = 1 << 3;
        *at++ = t->name_key[row];
        *at++ = 0x88; /* field 17, varint */
        *at++ = 0x01;
        at = put_varint(at, name);
    }
    if (t->shows_type[row]) {
        *at++ = (4 << 3) | 2;
        *at++ = (uint8_t)(4 + varint_length(type));
        *at++ = 1 << 3;
        *at++ = (uint8_t)t->type_key;
        *at++ = 0x88;
        *at++ = 0x01;
        at = put_varint(at, type);
    }
    if (step != -1) { /* {name_iid: step key, int_value: number} */
        *at++ = (4 << 3) | 2;
        *at++ = (uint8_t)(3 + varint_length(number));
        *at++ = 1 << 3;
        *at++ = (uint8_t)t->step_key;
        *at++ = 4 << 3;
        at = put_varint(at, number);
    }
    if (extra)
        memcpy(at, t->extra_data + extra_start, (size_t)extra);
    return size;
}

/* Every packet: sized (out NULL: returns the total) or written; -1 when an index is out of range. */
static int64_t track_packets(const Track *t, uint8_t *out) {
    int64_t total = 0, previous = t->previous;
    int sequence_length = varint_length(t->sequence);
    for (Py_ssize_t k = 0; k < t->count; k++) {
        int64_t event = t->events[k];
        if (event < 0 || event >= 2 * t->n)
            return -1;
        int64_t time = t->times[event];
        uint64_t delta = (uint64_t)(time - previous);
        previous = time;
        int64_t fields = event < t->n ? begin_fields(t, event, NULL) : 0;
        if (fields < 0)
            return -1;
        int64_t track_event = 2 + fields;
        int64_t body = 1 + varint_length(delta) + 1 + sequence_length + 1 + varint_length((uint64_t)track_event) +
                       track_event;
        if (out) {
            uint8_t *at = out + total;
            *at++ = (1 << 3) | 2; /* Trace.packet */
            at = put_varint(at, (uint64_t)body);
            *at++ = 8 << 3; /* timestamp */
            at = put_varint(at, delta);
            *at++ = 10 << 3; /* trusted_packet_sequence_id */
            at = put_varint(at, t->sequence);
            *at++ = (11 << 3) | 2; /* track_event */
            at = put_varint(at, (uint64_t)track_event);
            *at++ = 9 << 3; /* type */
            *at++ = event < t->n ? 1 : 2;
            if (event < t->n)
                begin_fields(t, event, at);
        }
        total += 1 + varint_length((uint64_t)body) + body;
    }
    return total;
}

/* A C-contiguous buffer of items of `width` bytes into view; `count` items, or any (-1). */
static int get_items(PyObject *object, Py_buffer *view, Py_ssize_t width, Py_ssize_t count, const char *what) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    if (view->len % width || (count >= 0 && view->len != count * width)) {
        PyErr_Format(PyExc_ValueError, "track_events: %s has the wrong size", what);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *track_events(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *times_object, *events_object, *rows_object, *columns_object, *extras_object;
    long long previous;
    unsigned long long sequence;
    long type_key, step_key;
    if (!PyArg_ParseTuple(args, "OOLOKO!llO:track_events", &times_object, &events_object, &previous, &rows_object,
                          &sequence, &PyTuple_Type, &columns_object, &type_key, &step_key, &extras_object))
        return NULL;
    if (PyTuple_GET_SIZE(columns_object) != C_COUNT || type_key < 0 || type_key > 127 || step_key < 0 ||
        step_key > 127) {
        PyErr_SetString(PyExc_ValueError, "track_events: 10 columns and keys below 128 expected");
        return NULL;
    }
    Py_buffer views[C_COUNT + 8]; /* times, events, rows, the columns, the four of extras */
    int held = 0;
    PyObject *result = NULL;
    Track t;
    memset(&t, 0, sizeof t);
    if (!get_items(times_object, &views[held], 8, -1, "times"))
        goto done;
    t.times = views[held].buf;
    t.n = views[held++].len / 16;
    if (!get_items(events_object, &views[held], 8, -1, "events"))
        goto done;
    t.events = views[held].buf;
    t.count = views[held++].len / 8;
    if (!get_items(rows_object, &views[held], 8, t.n, "rows"))
        goto done;
    t.rows = views[held++].buf;
    const void *column[C_COUNT];
    Py_ssize_t length[C_COUNT];
    for (int c = 0; c < C_COUNT; c++) {
        if (!get_items(PyTuple_GET_ITEM(columns_object, c), &views[held], column_width[c], -1, "a column"))
            goto done;
        column[c] = views[held].buf;
        length[c] = views[held++].len / column_width[c];
    }
    t.iid = column[C_IID];
    t.strings = length[C_IID];
    t.kernel = column[C_KERNEL];
    t.name = column[C_NAME];
    t.op_type = column[C_TYPE];
    t.category = column[C_CATEGORY];
    t.name_key = column[C_NAME_KEY];
    t.shows_name = column[C_SHOWS_NAME];
    t.shows_type = column[C_SHOWS_TYPE];
    t.step = column[C_STEP];
    t.steps = column[C_STEPS];
    t.step_count = length[C_STEPS];
    t.ops = length[C_KERNEL];
    for (int c = C_KERNEL; c <= C_STEP; c++)
        if (length[c] != t.ops) {
            PyErr_SetString(PyExc_ValueError, "track_events: the op columns differ in length");
            goto done;
        }
    if (extras_object != Py_None) {
        if (!PyTuple_Check(extras_object) || PyTuple_GET_SIZE(extras_object) != 4) {
            PyErr_SetString(PyExc_ValueError, "track_events: extras is (data, rows, lengths, starts) or None");
            goto done;
        }
        if (!get_items(PyTuple_GET_ITEM(extras_object, 0), &views[held], 1, -1, "extras data"))
            goto done;
        t.extra_data = views[held].buf;
        t.extra_size = views[held++].len;
        if (!get_items(PyTuple_GET_ITEM(extras_object, 1), &views[held], 8, -1, "extras rows"))
            goto done;
        t.extra_rows = views[held].buf;
        t.extra_count = views[held++].len / 8;
        if (!get_items(PyTuple_GET_ITEM(extras_object, 2), &views[held], 8, t.extra_count, "extras lengths"))
            goto done;
        t.extra_lengths = views[held++].buf;
        if (!get_items(PyTuple_GET_ITEM(extras_object, 3), &views[held], 8, t.extra_count, "extras starts"))
            goto done;
        t.extra_starts = views[held++].buf;
    }
    t.previous = previous;
    t.sequence = sequence;
    t.type_key = type_key;
    t.step_key = step_key;
    int64_t size;
    Py_BEGIN_ALLOW_THREADS
    size = track_packets(&t, NULL);
    Py_END_ALLOW_THREADS
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "track_events: an event, row, string, step or extra is out of range");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!result)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    track_packets(&t, out);
    Py_END_ALLOW_THREADS
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"merge_times", merge_times, METH_VARARGS,
     "merge_times(times, low, end_order, order): merge(), the keys made from the times (see the function)."},
    {"merge", merge, METH_VARARGS,
     "merge(begin_key, end_key, end_order, order): begins and ends of a track in time order (see the module)."},
    {"varints", varints, METH_VARARGS,
     "varints(values, matrix, column): each uint64 value's varint into its row of matrix, from column."},
    {"gather", gather, METH_VARARGS,
     "gather(out, position, pieces): record i, the concatenation of each piece's "
     "data[starts[i]:starts[i] + lengths[i]], written at out[position[i]:]."},
    {"track_events", track_events, METH_VARARGS,
     "track_events(times, events, previous, rows, sequence, columns, type_key, step_key, extras) -> bytes: "
     "the packets of a chunk of a track's events (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_protowirec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__protowirec(void) { return PyModule_Create(&module); }
