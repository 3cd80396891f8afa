/* The protobuf wire decoder of tracebridge.readers.wire, as one sequential C loop.
 *
 * Why: the numpy decoder (wire.py) decodes all messages of a nesting level in lockstep,
 * one numpy pass per field position. That is fast for many short messages, but an XSpace
 * line holding 3M events costs it a pointer-doubling search to split the run, then a pass
 * per event field, then a scatter of each field into a column: about a second for the
 * 48 MB benchmark profile. This loop reads the input twice (a pass to count rows, a
 * pass to write them) and each row once.
 *
 * Same contract as wire.decode: decode(raw, starts, ends, dense) returns every field of
 * every message raw[starts[i]:ends[i]], grouped by field number, as a list of
 * (number, message, wire_type, value, offset) where the last four are buffers (bytearrays,
 * or what the optional `allocate(size)` makes) holding int64, int8, uint64 and int64
 * columns (numpy views them without a copy). Within a field,
 * rows are in message order, and each message's occurrences are in wire order. Fields
 * named in `dense` (singular varints such as an event's offset and duration) come instead
 * as one uint64 column of a value per message, 0 where absent and the last where
 * repeated: what Fields.scalar would make of their rows, without the rows.
 *
 * Malformed input returns None instead of raising: the caller then runs the numpy
 * decoder on the same bytes, which names the error and its byte offset. One decoder owns
 * the error messages, and this one stays small. Input that another thread writes to
 * while it is decoded (a bytearray or numpy array: the GIL is released for both passes)
 * raises RuntimeError when the second pass does not find exactly the rows the first
 * counted: no column is returned with a row left unwritten or written past its end.
 *
 * The module is an optional build (setup.py): without a C compiler, wire.py does it all.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#include <unistd.h>
#else
#include <io.h>
#define read _read
#endif

enum { VARINT = 0, FIXED64 = 1, LENGTH = 2, FIXED32 = 5 };
#define MAX_FIELD ((1u << 29) - 1)
#define SMALL_FIELDS 1024 /* field numbers below this are looked up directly */

/* The distinct field numbers seen: rows counted by the first pass, columns (buffers)
 * written by the second. Two passes over the input cost less than growing columns and
 * copying them into Python objects: the input is small beside the rows it yields. */
typedef struct {
    uint32_t number;
    Py_ssize_t rows, next;
    PyObject *columns[4]; /* message, wire_type, value, offset */
    int64_t *message, *offset;
    int8_t *wire_type;
    uint64_t *value;
} Group;

#define MAX_DENSE 8

typedef struct {
    Group *groups;
    Py_ssize_t used, room;
    int32_t small[SMALL_FIELDS]; /* number -> group index + 1; 0: not seen yet */
    /* Dense fields: singular varints kept as one value per message (last wins), no rows. */
    int dense_count;
    uint32_t dense_number[MAX_DENSE];
    PyObject *dense_column[MAX_DENSE];
    uint64_t *dense[MAX_DENSE];
    /* Skipped fields: checked as every field is, but no rows kept. */
    int skip_count;
    uint32_t skip_number[MAX_DENSE];
} Table;

static Group *group_of(Table *table, uint32_t number) {
    if (number < SMALL_FIELDS && table->small[number])
        return &table->groups[table->small[number] - 1];
    if (number >= SMALL_FIELDS)
        for (Py_ssize_t g = 0; g < table->used; g++)
            if (table->groups[g].number == number)
                return &table->groups[g];
    if (table->used == table->room) {
        Py_ssize_t room = table->room ? 2 * table->room : 16;
        if ((size_t)room > SIZE_MAX / sizeof(Group))
            return NULL;
        Group *grown = realloc(table->groups, (size_t)room * sizeof(Group));
        if (!grown)
            return NULL;
        table->groups = grown;
        table->room = room;
    }
    Group *group = &table->groups[table->used++];
    memset(group, 0, sizeof(Group));
    group->number = number;
    if (number < SMALL_FIELDS)
        table->small[number] = (int32_t)table->used;
    return group;
}

static void free_table(Table *table) {
    if (!table)
        return;
    for (Py_ssize_t g = 0; g < table->used; g++)
        for (int c = 0; c < 4; c++)
            Py_XDECREF(table->groups[g].columns[c]);
    free(table->groups);
    for (int d = 0; d < table->dense_count; d++)
        Py_XDECREF(table->dense_column[d]);
    free(table);
}

/* The varint at *p (ending before end) into *out; 0 when malformed. Bits past the 64th
 * are dropped, as protobuf's parser drops them; an eleventh byte is an error. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out, int max_bytes) {
    uint64_t result = 0;
    const uint8_t *q = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (q >= end)
            return 0;
        uint8_t byte = *q++;
        result |= (uint64_t)(byte & 0x7F) << (7 * i); /* the tenth byte: only its low bit fits */
        if (byte < 0x80) {
            *p = q;
            *out = result;
            return 1;
        }
    }
    return 0;
}

/* Every field of every message: counted into the table (fill == 0), or written into its
 * columns (fill == 1). Returns 1, 0 on malformed input (a span outside the data or
 * reversed, or a dense field that is not a varint), -1 out of memory, -2 when filling
 * finds a row that was not counted (rows counted but not found: see filled_as_counted).
 * Each span is read once and checked here, in both passes: starts and ends may be arrays
 * another thread writes to while the GIL is released. */
static int walk(const uint8_t *data, Py_ssize_t size, const int64_t *starts, const int64_t *ends, Py_ssize_t n,
                Table *table, int fill) {
    for (Py_ssize_t m = 0; m < n; m++) {
        int64_t first = starts[m], last = ends[m];
        if (first < 0 || first > last || last > size)
            return fill ? -2 : 0;
        const uint8_t *p = data + first, *end = data + last;
        while (p < end) {
            const uint8_t *field_start = p;
            uint64_t tag, value;
            if (*p < 0x80) { /* one-byte tags: nearly all of them */
                tag = *p++;
            } else if (!read_varint(&p, end, &tag, 5)) {
                return 0;
            }
            uint64_t number = tag >> 3;
            int kind = (int)(tag & 7);
            if (number == 0 || number > MAX_FIELD)
                return 0;
            int64_t offset;
            switch (kind) {
            case VARINT:
                if (!read_varint(&p, end, &value, 10))
                    return 0;
                offset = field_start - data;
                break;
            case LENGTH:
                if (!read_varint(&p, end, &value, 10) || value > (uint64_t)(end - p))
                    return 0;
                offset = p - data;
                p += value;
                break;
            case FIXED64:
            case FIXED32: {
                int width = kind == FIXED64 ? 8 : 4;
                if (end - p < width)
                    return 0;
                value = 0;
                for (int i = 0; i < width; i++)
                    value |= (uint64_t)p[i] << (8 * i);
                offset = p - data;
                p += width;
                break;
            }
            default:
                return 0; /* groups and reserved wire types */
            }
            int skipped = 0;
            for (int k = 0; k < table->skip_count; k++)
                skipped |= table->skip_number[k] == number;
            if (skipped)
                continue;
            int d = 0;
            while (d < table->dense_count && table->dense_number[d] != number)
                d++;
            if (d < table->dense_count) {
                if (kind != VARINT)
                    return fill ? -2 : 0;
                if (fill)
                    table->dense[d][m] = value;
                continue;
            }
            Group *group = group_of(table, (uint32_t)number);
            if (!group)
                return -1;
            if (!fill) {
                if (group->rows == PY_SSIZE_T_MAX)
                    return -1;
                group->rows++;
                continue;
            }
            if (group->next == group->rows)
                return -2; /* more rows than counted (or a field it never saw): the input changed */
            Py_ssize_t row = group->next++;
            group->message[row] = m;
            group->wire_type[row] = (int8_t)kind;
            group->value[row] = value;
            group->offset[row] = offset;
        }
    }
    return 1;
}

/* Whether the fill pass wrote every row the count pass counted: fewer (the buffer changed
 * between the passes) would hand back columns whose last rows are uninitialised memory. */
static int filled_as_counted(const Table *table) {
    for (Py_ssize_t g = 0; g < table->used; g++)
        if (table->groups[g].next != table->groups[g].rows)
            return 0;
    return 1;
}

static int get_int64s(PyObject *object, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    if (view->itemsize != 8 || view->len % 8) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int64 array", what);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* A new column of `bytes` bytes (zeroed when asked) and where its data is: from the
 * caller's `allocate(size)` when given (wire.py passes numpy's, whose large blocks the
 * kernel may back with huge pages: 3M rows of a big XSpace are 75 MB, ~18k page faults
 * as a bytearray), else a bytearray. The object must offer a writable buffer of at least
 * that size; its data stays where it is, since no one else holds a reference to resize it. */
static PyObject *new_column(PyObject *allocator, Py_ssize_t bytes, int zeroed, void *data) {
    PyObject *column;
    if (allocator && allocator != Py_None) {
        column = PyObject_CallFunction(allocator, "n", bytes);
        if (!column)
            return NULL;
        Py_buffer view;
        if (PyObject_GetBuffer(column, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(column);
            return NULL;
        }
        int fits = view.len >= bytes;
        *(void **)data = view.buf;
        PyBuffer_Release(&view);
        if (!fits) {
            Py_DECREF(column);
            PyErr_SetString(PyExc_ValueError, "allocate() returned a buffer smaller than asked");
            return NULL;
        }
    } else {
        column = PyByteArray_FromStringAndSize(NULL, bytes);
        if (!column)
            return NULL;
        *(void **)data = PyByteArray_AS_STRING(column);
    }
    if (zeroed)
        memset(*(void **)data, 0, bytes);
    return column;
}

/* The bytes of a column of `rows` items of `width` bytes; -1 with MemoryError set where
 * the product does not fit a Py_ssize_t (no allocation could hold it anyway). */
static Py_ssize_t column_bytes(Py_ssize_t rows, Py_ssize_t width) {
    if (rows < 0 || width <= 0 || rows > PY_SSIZE_T_MAX / width) {
        PyErr_NoMemory();
        return -1;
    }
    return rows * width;
}

/* The columns the second pass writes, sized by the first. */
static int allocate(Table *table, Py_ssize_t n, PyObject *allocator) {
    for (Py_ssize_t g = 0; g < table->used; g++) {
        Group *group = &table->groups[g];
        Py_ssize_t wide = column_bytes(group->rows, 8); /* message, value, offset; wire_type: 1 byte */
        if (wide < 0 ||
            !(group->columns[0] = new_column(allocator, wide, 0, &group->message)) ||
            !(group->columns[1] = new_column(allocator, group->rows, 0, &group->wire_type)) ||
            !(group->columns[2] = new_column(allocator, wide, 0, &group->value)) ||
            !(group->columns[3] = new_column(allocator, wide, 0, &group->offset)))
            return 0;
    }
    Py_ssize_t per_message = column_bytes(n, 8);
    if (per_message < 0)
        return 0;
    for (int d = 0; d < table->dense_count; d++)
        if (!(table->dense_column[d] = new_column(allocator, per_message, 1, &table->dense[d])))
            return 0;
    return 1;
}

static PyObject *results(Table *table) {
    PyObject *groups = PyList_New(table->used), *dense = PyDict_New();
    if (!groups || !dense)
        goto fail;
    for (Py_ssize_t g = 0; g < table->used; g++) {
        Group *group = &table->groups[g];
        PyObject *item = Py_BuildValue("(IOOOO)", group->number, group->columns[0], group->columns[1],
                                       group->columns[2], group->columns[3]);
        if (!item)
            goto fail;
        PyList_SET_ITEM(groups, g, item);
    }
    for (int d = 0; d < table->dense_count; d++) {
        PyObject *key = PyLong_FromUnsignedLong(table->dense_number[d]);
        int failed = !key || PyDict_SetItem(dense, key, table->dense_column[d]) < 0;
        Py_XDECREF(key);
        if (failed)
            goto fail;
    }
    return Py_BuildValue("(NN)", groups, dense);
fail:
    Py_XDECREF(groups);
    Py_XDECREF(dense);
    return NULL;
}

/* The `skip` argument of decode: at most MAX_DENSE field numbers into the table; 0 with
 * an exception set when it is not that. */
static int read_skipped(PyObject *skip_object, Table *table) {
    PyObject *numbers = PySequence_Fast(skip_object, "skip must be a sequence of field numbers");
    if (!numbers)
        return 0;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(numbers);
    if (count > MAX_DENSE)
        PyErr_SetString(PyExc_ValueError, "at most 8 skipped fields");
    for (Py_ssize_t k = 0; k < count && !PyErr_Occurred(); k++) {
        unsigned long long number = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(numbers, k));
        if (PyErr_Occurred())
            break;
        if (number == 0 || number > MAX_FIELD) {
            PyErr_Format(PyExc_ValueError, "skipped field number %llu out of range 1..%u", number, MAX_FIELD);
            break;
        }
        table->skip_number[k] = (uint32_t)number;
        table->skip_count = (int)k + 1;
    }
    Py_DECREF(numbers);
    return !PyErr_Occurred();
}

static PyObject *decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *raw_object, *starts_object, *ends_object, *dense_object = NULL, *allocate_object = NULL,
             *skip_object = NULL;
    if (!PyArg_ParseTuple(args, "OOO|OOO", &raw_object, &starts_object, &ends_object, &dense_object,
                          &allocate_object, &skip_object))
        return NULL;
    Py_buffer raw, starts, ends;
    if (PyObject_GetBuffer(raw_object, &raw, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!get_int64s(starts_object, &starts, "starts")) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    if (!get_int64s(ends_object, &ends, "ends")) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&raw);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8;
    const int64_t *first = starts.buf, *last = ends.buf;
    Table *table = calloc(1, sizeof(Table));
    if (!table) {
        PyErr_NoMemory();
        goto done;
    }
    if (dense_object && dense_object != Py_None) {
        PyObject *numbers = PySequence_Fast(dense_object, "dense must be a sequence of field numbers");
        if (!numbers)
            goto done;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(numbers);
        if (count > MAX_DENSE)
            PyErr_SetString(PyExc_ValueError, "at most 8 dense fields");
        /* Stops at the first error: the C API is not called with an exception set. */
        for (Py_ssize_t d = 0; d < count && !PyErr_Occurred(); d++) {
            unsigned long long number = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(numbers, d));
            if (PyErr_Occurred())
                break;
            if (number == 0 || number > MAX_FIELD) {
                PyErr_Format(PyExc_ValueError, "dense field number %llu out of range 1..%u", number, MAX_FIELD);
                break;
            }
            table->dense_number[d] = (uint32_t)number;
            table->dense_count = (int)d + 1;
        }
        Py_DECREF(numbers);
        if (PyErr_Occurred())
            goto done;
    }
    if (skip_object && skip_object != Py_None && !read_skipped(skip_object, table))
        goto done;
    if (ends.len != starts.len) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = walk(raw.buf, raw.len, first, last, n, table, 0);
    Py_END_ALLOW_THREADS
    if (status <= 0) {
        result = status < 0 ? PyErr_NoMemory() : Py_NewRef(Py_None);
        goto done;
    }
    if (!allocate(table, n, allocate_object))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    status = walk(raw.buf, raw.len, first, last, n, table, 1);
    Py_END_ALLOW_THREADS
    if (status == 1 && filled_as_counted(table))
        result = results(table);
    else if (status == -1)
        PyErr_NoMemory();
    else /* the first pass accepted these bytes and counted their rows: another thread wrote to them */
        PyErr_SetString(PyExc_RuntimeError, "the buffer changed while it was decoded");
done:
    free_table(table);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&raw);
    return result;
}

/* --- XSpace events in one pass -------------------------------------------------------------
 *
 * Why: decode() above yields a row per field (25 bytes) and wire.py then gathers the
 * columns from them; for the 3M events of a 49 MB XSpace that is the 75 MB of rows of the
 * lines' `events` field, then rows per event field in chunks, then a copy into columns.
 * events() walks the lines once to count their events, then once more to decode every event
 * straight into its columns, allocated at their final size: the event's line, metadata id,
 * offset and duration (varints, last wins, 0 where absent), whether it has
 * num_occurrences, and the spans of its stats (few: they are decoded in Python). The
 * second pass is the costly one (every event's fields): threads share it, each a run of
 * events from a place the count marked, writing rows of its own only (nearly all of a TF
 * profile's events lie on one line, so the runs cut lines, not between them).
 *
 * The same contract as decode(): malformed input (a field a decoder would reject, or one
 * of these fields with another wire type than protobuf's for it) returns None, and the
 * caller reads the same bytes with wire.py's decoder, which names the error. It checks
 * at least everything wire.py checks, so that whatever it accepts, wire.py accepts and
 * decodes to the same columns (tests/test_xspace.py compares them). */

enum { E_EVENTS, E_METADATA_ID, E_OFFSET, E_DURATION, E_STATS, E_OCCURRENCES, E_NUMBERS };

/* One field at *p (before end): its number, wire type, value (a varint's value, a length,
 * or a fixed value) and where its payload starts; 0 when malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, uint64_t *number, int *kind, uint64_t *value,
                      const uint8_t **payload) {
    uint64_t tag;
    if (**p < 0x80) {
        tag = *(*p)++;
    } else if (!read_varint(p, end, &tag, 5)) {
        return 0;
    }
    *number = tag >> 3;
    *kind = (int)(tag & 7);
    if (*number == 0 || *number > MAX_FIELD)
        return 0;
    switch (*kind) {
    case VARINT:
        *payload = *p;
        return read_varint(p, end, value, 10);
    case LENGTH:
        if (!read_varint(p, end, value, 10) || *value > (uint64_t)(end - *p))
            return 0;
        *payload = *p;
        *p += *value;
        return 1;
    case FIXED64:
    case FIXED32: {
        int width = *kind == FIXED64 ? 8 : 4;
        if (end - *p < width)
            return 0;
        *value = 0;
        for (int i = 0; i < width; i++)
            *value |= (uint64_t)(*p)[i] << (8 * i);
        *payload = *p;
        *p += width;
        return 1;
    }
    default:
        return 0;
    }
}

typedef struct {
    int64_t *event, *start, *end;
    Py_ssize_t used, room;
} Spans;

static int add_span(Spans *spans, int64_t event, int64_t start, int64_t end) {
    if (spans->used == spans->room) {
        Py_ssize_t room = spans->room ? 2 * spans->room : 1024;
        if ((size_t)room > SIZE_MAX / sizeof(int64_t))
            return 0;
        int64_t *grown[3];
        int64_t **column[3] = {&spans->event, &spans->start, &spans->end};
        for (int c = 0; c < 3; c++) {
            grown[c] = realloc(*column[c], (size_t)room * sizeof(int64_t));
            if (!grown[c])
                return 0;
            *column[c] = grown[c];
        }
        spans->room = room;
    }
    spans->event[spans->used] = event;
    spans->start[spans->used] = start;
    spans->end[spans->used] = end;
    spans->used++;
    return 1;
}

typedef struct {
    int32_t *line;
    uint64_t *metadata_id, *offset, *duration;
    uint8_t *aggregated;
} EventColumns;

/* Where the count pass stood at every `every`-th event (CHECKPOINT_EVERY unless a test
 * asks for another): the line and the byte offset of that event's field. The fill pass
 * splits there between threads. */
#define CHECKPOINT_EVERY 32768
#define MAX_PIECES 8

typedef struct {
    Py_ssize_t line, event;
    int64_t at;
} Checkpoint;

typedef struct {
    Checkpoint *at;
    Py_ssize_t used, room;
} Checkpoints;

static int add_checkpoint(Checkpoints *checkpoints, Py_ssize_t line, int64_t at, Py_ssize_t event) {
    if (checkpoints->used == checkpoints->room) {
        Py_ssize_t room = checkpoints->room ? 2 * checkpoints->room : 64;
        Checkpoint *grown = realloc(checkpoints->at, (size_t)room * sizeof(Checkpoint));
        if (!grown)
            return 0;
        checkpoints->at = grown;
        checkpoints->room = room;
    }
    checkpoints->at[checkpoints->used++] = (Checkpoint){line, event, at};
    return 1;
}

/* The count pass: the lines' events counted into *count, a checkpoint kept every
 * `every` events. 1, 0 when malformed, -1 out of memory. */
static int count_events(const uint8_t *data, Py_ssize_t size, const int64_t *starts, const int64_t *ends,
                        Py_ssize_t lines, const uint64_t *numbers, Py_ssize_t *count, Checkpoints *checkpoints,
                        Py_ssize_t every) {
    Py_ssize_t found = 0;
    for (Py_ssize_t m = 0; m < lines; m++) {
        int64_t first = starts[m], last = ends[m];
        if (first < 0 || first > last || last > size)
            return 0;
        const uint8_t *p = data + first, *end = data + last;
        while (p < end) {
            const uint8_t *field = p, *payload;
            uint64_t number, value;
            int kind;
            if (!next_field(&p, end, &number, &kind, &value, &payload))
                return 0;
            if (number != numbers[E_EVENTS])
                continue;
            if (kind != LENGTH)
                return 0;
            if (found % every == 0 && found && !add_checkpoint(checkpoints, m, field - data, found))
                return -1;
            found++;
        }
    }
    *count = found;
    return 1;
}

/* One thread's share of the fill pass: events [first, last) of the count, from the line
 * and byte offset where the count pass met event `first`; its stats' spans, and its status. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t size, lines;
    const int64_t *starts, *ends;
    const uint64_t *numbers;
    Checkpoint from;
    Py_ssize_t last;
    int last_piece; /* the last piece: an event past `last` means the buffer changed */
    EventColumns *columns;
    Spans spans;
    int status;
} Piece;

/* Decode a piece's events into the columns and its spans. Every row of the piece is
 * written, 0 where a field is absent: the columns come unzeroed, and the thread that
 * writes a row takes its page fault. status: 1, 0 when malformed, -1 out of memory, -2
 * when the events found are not those counted (the buffer changed between the passes:
 * no row outside the piece is written). */
static int fill_events(Piece *piece) {
    const uint8_t *data = piece->data;
    const uint64_t *numbers = piece->numbers;
    EventColumns *columns = piece->columns;
    Py_ssize_t found = piece->from.event;
    for (Py_ssize_t m = piece->from.line; m < piece->lines; m++) {
        int64_t first = m == piece->from.line && piece->from.at >= 0 ? piece->from.at : piece->starts[m];
        int64_t last = piece->ends[m];
        if (first < 0 || first > last || last > piece->size || piece->starts[m] > first)
            return -2;
        const uint8_t *p = data + first, *end = data + last;
        while (p < end) {
            uint64_t number, value;
            int kind;
            const uint8_t *payload;
            if (!next_field(&p, end, &number, &kind, &value, &payload))
                return 0;
            if (number != numbers[E_EVENTS])
                continue;
            if (kind != LENGTH)
                return 0;
            if (found == piece->last)
                return piece->last_piece ? -2 : 1; /* else the next piece's first event */
            Py_ssize_t event = found++;
            uint64_t fields[3] = {0, 0, 0}; /* metadata id, offset, duration */
            uint8_t aggregated = 0;
            const uint8_t *q = payload, *event_end = payload + value;
            while (q < event_end) {
                uint64_t inner, inner_value;
                int inner_kind;
                const uint8_t *inner_payload;
                if (*q < 0x80 && (*q & 7) == VARINT && *q >= 8) {
                    /* the usual field: a one-byte tag and a varint (metadata id, offset, duration) */
                    inner = *q++ >> 3;
                    inner_kind = VARINT;
                    if (!read_varint(&q, event_end, &inner_value, 10))
                        return 0;
                } else if (!next_field(&q, event_end, &inner, &inner_kind, &inner_value, &inner_payload)) {
                    return 0;
                }
                if (inner == numbers[E_OCCURRENCES]) {
                    aggregated = 1;
                } else if (inner == numbers[E_STATS]) {
                    if (inner_kind != LENGTH)
                        return 0;
                    if (!add_span(&piece->spans, event, inner_payload - data,
                                  inner_payload - data + (int64_t)inner_value))
                        return -1;
                } else if (inner == numbers[E_METADATA_ID] || inner == numbers[E_OFFSET] ||
                           inner == numbers[E_DURATION]) {
                    if (inner_kind != VARINT)
                        return 0;
                    fields[inner == numbers[E_METADATA_ID] ? 0 : inner == numbers[E_OFFSET] ? 1 : 2] = inner_value;
                }
            }
            columns->line[event] = (int32_t)m;
            columns->metadata_id[event] = fields[0];
            columns->offset[event] = fields[1];
            columns->duration[event] = fields[2];
            columns->aggregated[event] = aggregated;
        }
    }
    return found == piece->last ? 1 : -2;
}

#ifndef _WIN32
#include <pthread.h>

static void *fill_thread(void *piece) {
    ((Piece *)piece)->status = fill_events(piece);
    return NULL;
}
#endif

/* The fill pass over `pieces` pieces, all but the first on threads of their own where
 * threads can be started (else one after the other here). The worst status wins. */
static int fill_pieces(Piece *pieces, int count) {
#ifndef _WIN32
    pthread_t threads[MAX_PIECES];
    int started[MAX_PIECES] = {0};
    for (int k = 1; k < count; k++)
        started[k] = pthread_create(&threads[k], NULL, fill_thread, &pieces[k]) == 0;
    pieces[0].status = fill_events(&pieces[0]);
    for (int k = 1; k < count; k++) {
        if (started[k])
            pthread_join(threads[k], NULL);
        else
            pieces[k].status = fill_events(&pieces[k]);
    }
#else
    for (int k = 0; k < count; k++)
        pieces[k].status = fill_events(&pieces[k]);
#endif
    int status = 1;
    for (int k = 0; k < count; k++) /* malformed (None) over out of memory over a changed buffer */
        if (pieces[k].status == 0 || (pieces[k].status < status && status != 0))
            status = pieces[k].status;
    return status;
}

/* The pieces of the fill pass: up to `wanted` runs of about equal numbers of events, split
 * at checkpoints. Returns how many. */
static int split_pieces(Piece *pieces, int wanted, const Checkpoints *checkpoints, Py_ssize_t count) {
    int made = 0;
    Py_ssize_t next = 0; /* the first checkpoint not yet used */
    pieces[0].from = (Checkpoint){0, 0, -1};
    for (int k = 1; k < wanted; k++) {
        Py_ssize_t target = count / wanted * k;
        while (next < checkpoints->used && checkpoints->at[next].event < target)
            next++;
        if (next == checkpoints->used)
            break;
        if (checkpoints->at[next].event <= pieces[made].from.event)
            continue;
        pieces[made].last = checkpoints->at[next].event;
        pieces[++made].from = checkpoints->at[next];
    }
    pieces[made].last = count;
    pieces[made].last_piece = 1;
    return made + 1;
}

/* A new zeroed column of `rows` items of `width` bytes, through new_column. */
static PyObject *zeroed_column(PyObject *allocator, Py_ssize_t rows, Py_ssize_t width, void *data) {
    Py_ssize_t bytes = column_bytes(rows, width);
    return bytes < 0 ? NULL : new_column(allocator, bytes, 1, data);
}

/* A column of `rows` items of `width` bytes for the fill pass, which zeroes it. */
static PyObject *event_column(PyObject *allocator, Py_ssize_t rows, Py_ssize_t width, void *data) {
    Py_ssize_t bytes = column_bytes(rows, width);
    return bytes < 0 ? NULL : new_column(allocator, bytes, 0, data);
}

/* The result tuple: the five event columns, then the stats' spans (event, start, end),
 * each the pieces' spans one after the other (their events are in that order). */
static PyObject *spans_result(PyObject **made, const Piece *pieces, int count, PyObject *allocator) {
    Py_ssize_t rows = 0;
    for (int k = 0; k < count; k++)
        rows += pieces[k].spans.used;
    PyObject *spans[3] = {NULL, NULL, NULL};
    for (int c = 0; c < 3; c++) {
        void *data;
        if (!(spans[c] = zeroed_column(allocator, rows, 8, &data))) {
            for (int d = 0; d < c; d++)
                Py_DECREF(spans[d]);
            return NULL;
        }
        char *into = data;
        for (int k = 0; k < count; k++) {
            const Spans *part = &pieces[k].spans;
            const int64_t *values = c == 0 ? part->event : c == 1 ? part->start : part->end;
            if (part->used)
                memcpy(into, values, (size_t)part->used * sizeof(int64_t));
            into += part->used * sizeof(int64_t);
        }
    }
    return Py_BuildValue("(OOOOONNN)", made[0], made[1], made[2], made[3], made[4], spans[0], spans[1], spans[2]);
}

static PyObject *events(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *raw_object, *starts_object, *ends_object, *numbers_object, *allocate_object = NULL;
    int threads = 1;
    Py_ssize_t every = CHECKPOINT_EVERY;
    if (!PyArg_ParseTuple(args, "OOOO|Oin", &raw_object, &starts_object, &ends_object, &numbers_object,
                          &allocate_object, &threads, &every))
        return NULL;
    if (every < 1)
        every = CHECKPOINT_EVERY;
    threads = threads < 1 ? 1 : threads > MAX_PIECES ? MAX_PIECES : threads;
    uint64_t numbers[E_NUMBERS];
    PyObject *sequence = PySequence_Fast(numbers_object, "numbers must be a sequence of field numbers");
    if (!sequence)
        return NULL;
    if (PySequence_Fast_GET_SIZE(sequence) != E_NUMBERS) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "numbers: events, metadata_id, offset_ps, duration_ps, stats, "
                                          "num_occurrences");
        return NULL;
    }
    for (int k = 0; k < E_NUMBERS; k++) {
        numbers[k] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(sequence, k));
        if (PyErr_Occurred()) {
            Py_DECREF(sequence);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    Py_buffer raw, starts, ends;
    if (PyObject_GetBuffer(raw_object, &raw, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!get_int64s(starts_object, &starts, "starts")) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    if (!get_int64s(ends_object, &ends, "ends")) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&raw);
        return NULL;
    }
    PyObject *result = NULL, *made[5] = {NULL, NULL, NULL, NULL, NULL};
    Checkpoints checkpoints = {NULL, 0, 0};
    Piece pieces[MAX_PIECES];
    int piece_count = 0;
    Py_ssize_t lines = starts.len / 8, count = 0;
    if (ends.len != starts.len || lines > INT32_MAX) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = count_events(raw.buf, raw.len, starts.buf, ends.buf, lines, numbers, &count, &checkpoints, every);
    Py_END_ALLOW_THREADS
    if (status <= 0) {
        result = status < 0 ? PyErr_NoMemory() : Py_NewRef(Py_None);
        goto done;
    }
    EventColumns columns;
    if (!(made[0] = event_column(allocate_object, count, 4, &columns.line)) ||
        !(made[1] = event_column(allocate_object, count, 8, &columns.metadata_id)) ||
        !(made[2] = event_column(allocate_object, count, 8, &columns.offset)) ||
        !(made[3] = event_column(allocate_object, count, 8, &columns.duration)) ||
        !(made[4] = event_column(allocate_object, count, 1, &columns.aggregated)))
        goto done;
    for (int k = 0; k < threads; k++)
        pieces[k] = (Piece){raw.buf, raw.len, lines, starts.buf, ends.buf, numbers, {0, 0, -1}, 0, 0, &columns,
                            {NULL, NULL, NULL, 0, 0}, 0};
    piece_count = split_pieces(pieces, threads, &checkpoints, count);
    Py_BEGIN_ALLOW_THREADS
    status = fill_pieces(pieces, piece_count);
    Py_END_ALLOW_THREADS
    if (status == 0) {
        result = Py_NewRef(Py_None);
    } else if (status == -1) {
        PyErr_NoMemory();
    } else if (status == -2) {
        PyErr_SetString(PyExc_RuntimeError, "the buffer changed while it was decoded");
    } else {
        result = spans_result(made, pieces, piece_count, allocate_object);
    }
done:
    for (int c = 0; c < 5; c++)
        Py_XDECREF(made[c]);
    for (int k = 0; k < piece_count; k++) {
        free(pieces[k].spans.event);
        free(pieces[k].spans.start);
        free(pieces[k].spans.end);
    }
    free(checkpoints.at);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&raw);
    return result;
}

/* steps(start, chosen, starts, ends, ids, out): the step of each chosen event (xspace_steps.py,
 * _assign_steps): p = how many of the markers' sorted `starts` are at or before the event's
 * start; where the event starts no later than ends[p] (ends and ids have p = 0, "before every
 * marker", first), out[i] = ids[p]. Events come in runs in start order (a line's), so p moves
 * forward from the event before, and is searched for afresh only where the start goes back:
 * one pass, where numpy searches every event's place. */
static PyObject *steps(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objects[6];
    if (!PyArg_ParseTuple(args, "OOOOOO:steps", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5]))
        return NULL;
    Py_buffer views[6];
    int held = 0;
    PyObject *result = NULL;
    static const Py_ssize_t width[6] = {8, 1, 8, 8, 4, 4};
    for (; held < 6; held++) {
        if (PyObject_GetBuffer(objects[held], &views[held], PyBUF_C_CONTIGUOUS | (held == 5 ? PyBUF_WRITABLE : 0)) < 0)
            goto done;
        if (views[held].itemsize != width[held] || views[held].len % width[held]) {
            held++;
            PyErr_SetString(PyExc_TypeError, "steps: int64 start, bool chosen, int64 starts and ends, int32 ids and out");
            goto done;
        }
    }
    Py_ssize_t n = views[0].len / 8, m = views[2].len / 8;
    if (views[1].len != n || views[5].len != n * 4 || views[3].len != (m + 1) * 8 || views[4].len != (m + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "steps: n events and chosen and out, m marker starts, m + 1 ends and ids");
        goto done;
    }
    const int64_t *start = views[0].buf, *starts = views[2].buf, *ends = views[3].buf;
    const uint8_t *chosen = views[1].buf;
    const int32_t *ids = views[4].buf;
    int32_t *out = views[5].buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t p = 0;
    int64_t previous = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = start[i];
        if (s < previous) { /* a new run: search p again (the first marker start after s) */
            Py_ssize_t lo = 0, hi = m;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (starts[mid] <= s)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            p = lo;
        } else {
            while (p < m && starts[p] <= s)
                p++;
        }
        previous = s;
        if (chosen[i] && s <= ends[p])
            out[i] = ids[p];
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

/* read_file(fd, size): up to `size` bytes read from the file descriptor into a new bytes
 * object (fewer where the file ends sooner). Why not the file's read(): the bytes of a
 * large profile are asked for in huge pages where the kernel has them (madvise), so that
 * reading 48 MB takes some 20 page faults instead of 12,000, each costly on a VM. */
static PyObject *read_file(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "in", &fd, &size))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "size must not be negative");
        return NULL;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
    if (!bytes)
        return NULL;
    char *into = PyBytes_AS_STRING(bytes);
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t first = ((uintptr_t)into + huge - 1) & ~(huge - 1), last = ((uintptr_t)into + size) & ~(huge - 1);
    if (last > first)
        (void)madvise((void *)first, last - first, MADV_HUGEPAGE); /* advice: its failure changes nothing */
#endif
    Py_ssize_t done = 0;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < size) {
        size_t chunk = (size_t)(size - done) < ((size_t)1 << 30) ? (size_t)(size - done) : ((size_t)1 << 30);
        Py_ssize_t got = read(fd, into + done, chunk);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            error = errno;
            break;
        }
        if (got == 0)
            break;
        done += got;
    }
    Py_END_ALLOW_THREADS
    if (error) {
        Py_DECREF(bytes);
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (done < size && _PyBytes_Resize(&bytes, done) < 0)
        return NULL;
    return bytes;
}

/* line_plan(raw, start, end, numbers, every, step_ids, thresholds): one XLine's events
 * walked once, for reading the line a time window at a time (xspace_windows.py) without
 * decoding its events into columns. numbers: the field numbers of XLine.events, XEvent's
 * offset_ps and stats, and XStat's metadata_id, uint64_value and int64_value.
 *
 * Returns (count, ordered, contiguous, first, last, checkpoints, markers, cuts), or None
 * where the bytes are malformed (the whole read then names the error):
 * - count: events; ordered: their offsets (int64, the last where repeated, 0 where
 *   absent, as the decoder keeps them) never go back; contiguous: no other field of the
 *   line lies between its first and its last event; first: where the first event field
 *   starts (its tag), last: where the last one ends (both `end` without events);
 * - checkpoints: int64 pairs (where the event field starts, its offset) of every
 *   `every`-th event, from the first;
 * - markers: int64 rows (event, offset, value, value field) of every integer value of a
 *   stat whose metadata id is one of `step_ids` (int64 array): the step markers;
 * - cuts: int64 pairs (where, events before) per threshold (sorted int64 offsets): the
 *   first event whose offset is at least the threshold (`last` and count: none is). */
typedef struct {
    int64_t *data;
    Py_ssize_t used, room;
} Int64s;

static int push(Int64s *list, const int64_t *values, int n) {
    if (list->used + n > list->room) {
        Py_ssize_t room = list->room ? 2 * list->room : 1024;
        while (room < list->used + n)
            room *= 2;
        if ((size_t)room > SIZE_MAX / sizeof(int64_t))
            return 0;
        int64_t *grown = realloc(list->data, (size_t)room * sizeof(int64_t));
        if (!grown)
            return 0;
        list->data = grown;
        list->room = room;
    }
    memcpy(list->data + list->used, values, (size_t)n * sizeof(int64_t));
    list->used += n;
    return 1;
}

enum { P_EVENTS, P_OFFSET, P_STATS, P_STAT_ID, P_STAT_UINT64, P_STAT_INT64, P_NUMBERS };

/* The step markers of one XStat at payload[0:length] of event `event`: 1, 0 malformed, -1 no memory. */
static int stat_markers(const uint8_t *payload, uint64_t length, const uint64_t *numbers, const int64_t *ids,
                        Py_ssize_t n_ids, int64_t event, int64_t offset, Int64s *markers) {
    const uint8_t *q = payload, *end = payload + length, *value_payload;
    uint64_t number, value, id = 0;
    int kind;
    while (q < end) { /* the metadata id: the last where repeated */
        if (!next_field(&q, end, &number, &kind, &value, &value_payload))
            return 0;
        if (number == numbers[P_STAT_ID]) {
            if (kind != VARINT)
                return 0;
            id = value;
        }
    }
    int wanted = 0;
    for (Py_ssize_t k = 0; k < n_ids && !wanted; k++)
        wanted = (uint64_t)ids[k] == id;
    if (!wanted)
        return 1;
    for (q = payload; q < end;) {
        if (!next_field(&q, end, &number, &kind, &value, &value_payload))
            return 0;
        if (number == numbers[P_STAT_UINT64] || number == numbers[P_STAT_INT64]) {
            if (kind != VARINT)
                return 0;
            int64_t row[4] = {event, offset, (int64_t)value, (int64_t)number};
            if (!push(markers, row, 4))
                return -1;
        }
    }
    return 1;
}

typedef struct {
    int64_t count, first, last;
    int ordered, contiguous;
} LinePlan;

static int walk_line(const uint8_t *data, const uint8_t *p, const uint8_t *end, const uint64_t *numbers,
                     int64_t every, const int64_t *ids, Py_ssize_t n_ids, const int64_t *thresholds,
                     Py_ssize_t n_thresholds, LinePlan *plan, Int64s *checkpoints, Int64s *markers, int64_t *cuts) {
    Py_ssize_t t = 0;
    int64_t previous = INT64_MIN;
    int after_gap = 0; /* a field other than an event came after the first event */
    plan->count = 0;
    plan->first = plan->last = end - data;
    plan->ordered = plan->contiguous = 1;
    while (p < end) {
        const uint8_t *field_start = p, *payload;
        uint64_t number, value;
        int kind;
        if (!next_field(&p, end, &number, &kind, &value, &payload))
            return 0;
        if (number != numbers[P_EVENTS]) {
            if (plan->count)
                after_gap = 1;
            continue;
        }
        if (kind != LENGTH)
            return 0;
        if (after_gap)
            plan->contiguous = 0;
        if (!plan->count)
            plan->first = field_start - data;
        plan->last = p - data;
        int64_t offset = 0;
        const uint8_t *q = payload, *event_end = payload + value, *inner_payload;
        while (q < event_end) { /* the offset first: the markers need it */
            uint64_t inner, inner_value;
            int inner_kind;
            if (!next_field(&q, event_end, &inner, &inner_kind, &inner_value, &inner_payload))
                return 0;
            if (inner == numbers[P_OFFSET]) {
                if (inner_kind != VARINT)
                    return 0;
                offset = (int64_t)inner_value;
            }
        }
        if (n_ids) {
            for (q = payload; q < event_end;) {
                uint64_t inner, inner_value;
                int inner_kind;
                if (!next_field(&q, event_end, &inner, &inner_kind, &inner_value, &inner_payload))
                    return 0;
                if (inner == numbers[P_STATS]) {
                    if (inner_kind != LENGTH)
                        return 0;
                    int status = stat_markers(inner_payload, inner_value, numbers, ids, n_ids, plan->count, offset,
                                              markers);
                    if (status <= 0)
                        return status;
                }
            }
        }
        if (offset < previous)
            plan->ordered = 0;
        previous = offset;
        while (t < n_thresholds && offset >= thresholds[t]) {
            cuts[2 * t] = field_start - data;
            cuts[2 * t + 1] = plan->count;
            t++;
        }
        if (plan->count % every == 0) {
            int64_t row[2] = {field_start - data, offset};
            if (!push(checkpoints, row, 2))
                return -1;
        }
        plan->count++;
    }
    for (; t < n_thresholds; t++) {
        cuts[2 * t] = plan->last;
        cuts[2 * t + 1] = plan->count;
    }
    return 1;
}

static PyObject *line_plan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *raw_object, *numbers_object, *ids_object, *thresholds_object;
    Py_ssize_t start, end;
    long long every;
    if (!PyArg_ParseTuple(args, "OnnOLOO:line_plan", &raw_object, &start, &end, &numbers_object, &every, &ids_object,
                          &thresholds_object))
        return NULL;
    uint64_t numbers[P_NUMBERS];
    PyObject *sequence = PySequence_Fast(numbers_object, "numbers must be a sequence of field numbers");
    if (!sequence)
        return NULL;
    if (PySequence_Fast_GET_SIZE(sequence) != P_NUMBERS) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "numbers: events, offset_ps, stats, stat metadata_id, uint64_value, "
                                          "int64_value");
        return NULL;
    }
    for (int k = 0; k < P_NUMBERS; k++) {
        numbers[k] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(sequence, k));
        if (PyErr_Occurred()) {
            Py_DECREF(sequence);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    if (every <= 0) {
        PyErr_SetString(PyExc_ValueError, "every must be positive");
        return NULL;
    }
    Py_buffer raw, ids, thresholds;
    if (PyObject_GetBuffer(raw_object, &raw, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!get_int64s(ids_object, &ids, "step_ids")) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    if (!get_int64s(thresholds_object, &thresholds, "thresholds")) {
        PyBuffer_Release(&ids);
        PyBuffer_Release(&raw);
        return NULL;
    }
    PyObject *result = NULL;
    Int64s checkpoints = {NULL, 0, 0}, markers = {NULL, 0, 0};
    Py_ssize_t n_thresholds = thresholds.len / 8;
    int64_t *cuts = malloc((size_t)(n_thresholds ? n_thresholds : 1) * 2 * sizeof(int64_t));
    if (!cuts) {
        PyErr_NoMemory();
        goto done;
    }
    if (start < 0 || start > end || end > raw.len) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    LinePlan plan;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = walk_line(raw.buf, (const uint8_t *)raw.buf + start, (const uint8_t *)raw.buf + end, numbers,
                       (int64_t)every, ids.buf, ids.len / 8, thresholds.buf, n_thresholds, &plan, &checkpoints,
                       &markers, cuts);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        PyErr_NoMemory();
    } else if (status == 0) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("(LiiLLy#y#y#)", (long long)plan.count, plan.ordered, plan.contiguous,
                               (long long)plan.first, (long long)plan.last, (const char *)checkpoints.data,
                               (Py_ssize_t)(checkpoints.used * 8), (const char *)markers.data,
                               (Py_ssize_t)(markers.used * 8), (const char *)cuts, (Py_ssize_t)(n_thresholds * 16));
    }
done:
    free(cuts);
    free(checkpoints.data);
    free(markers.data);
    PyBuffer_Release(&thresholds);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&raw);
    return result;
}

/* For tests: column_bytes, which no input small enough to test with can overflow. */
static PyObject *column_bytes_for_tests(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t rows, width;
    if (!PyArg_ParseTuple(args, "nn", &rows, &width))
        return NULL;
    Py_ssize_t bytes = column_bytes(rows, width);
    return bytes < 0 ? NULL : PyLong_FromSsize_t(bytes);
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(raw, starts, ends, dense=(), allocate=None, skip=()) -> ([(number, message, wire_type, value, offset)],"
     " {number: values}) or None when malformed; allocate(size) makes each column (default: a bytearray);"
     " skip: fields checked but not kept"},
    {"events", events, METH_VARARGS,
     "events(raw, line_starts, line_ends, numbers, allocate=None, threads=1, checkpoint_every=32768) ->"
     " (line, metadata_id, offset_ps, duration_ps, aggregated, stat_event, stat_start, stat_end) or None when"
     " malformed; numbers: the field numbers of XLine.events and XEvent's metadata_id, offset_ps, duration_ps,"
     " stats and num_occurrences; threads: how many threads share the second pass; checkpoint_every: for"
     " tests, events between its possible splits"},
    {"steps", steps, METH_VARARGS,
     "steps(start, chosen, starts, ends, ids, out): the step of each chosen event (xspace_steps._assign_steps)"},
    {"read_file", read_file, METH_VARARGS,
     "read_file(fd, size) -> bytes: up to size bytes of the file descriptor, in huge pages where the kernel has them"},
    {"line_plan", line_plan, METH_VARARGS,
     "line_plan(raw, start, end, numbers, every, step_ids, thresholds) -> (count, ordered, contiguous, first, last,"
     " checkpoints, markers, cuts) or None when malformed: one XLine's events walked once (xspace_windows.py)"},
    {"_column_bytes", column_bytes_for_tests, METH_VARARGS, "_column_bytes(rows, width): for tests"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wirec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wirec(void) { return PyModule_Create(&module); }
