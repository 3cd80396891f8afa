"""Chrome trace JSON into the model: files written by TF's timeline.py (``timeline.json``,
ProfilerHook's ``timeline-<step>.json``, hand-merged multi-run files) and by tracebridge.

timeline.py writes a process per device named ``"<device> Compute"`` (ops) and
``"<device> Tensors"`` (tensor snapshots), an ``Allocators`` process for counters, op
events ``{"ph":"X","cat":"Op","name":<op>,"args":{"name":<node>,"op":<op>,"input0":...}}``
with integer microseconds, and flow events that are derivable from the inputs and are
not read. Runs merged into one file are told apart by their ``_SOURCE`` ops.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ..errors import TraceFormatError, one_line
from ..model.builder import TIME_LIMIT_NS, TraceBuilder
from ..model.hlo import HLO_MODULES, LINK_STATS, TF_OP_SPAN_CAT, hlo_modules_of_text
from ..model.schema import CALL_STATS, STEP_INPUTS, Category, OpFlag
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source, gunzip, is_gzip

_INPUT_KEY = re.compile(r"input([0-9]{1,9})\Z")  # longer numbers are not input slots
_STEPS, _ALLOCATORS = "Steps", "Allocators"
# Categories and flags are plain ints in the loop over events (model/schema.py says why).
_CATEGORY_OF_CAT = {category.chrome: int(category) for category in Category}
_OP = int(Category.OP)
_DERIVED = int(Category.DERIVED)


def read(source: Source, parallelism: Parallelism) -> Trace:
    """A Chrome trace file, gzipped or not."""
    data = gunzip(source.data, source.path) if is_gzip(source.data) else source.data
    return read_chrome(parse_json(data, source.path), source.path)


def parse_json(text: str | bytes, path=None):
    """JSON with floats kept as their text, so decimal microseconds stay exact."""
    try:
        return json.loads(text, parse_float=str)
    except RecursionError:
        raise TraceFormatError("JSON nested too deeply", path=path) from None
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"not UTF-8 text ({error.reason})", path=path,
                               where=f"byte {error.start}") from None
    except ValueError as error:  # json.JSONDecodeError
        where = f"line {error.lineno} column {error.colno}" if hasattr(error, "lineno") else None
        raise TraceFormatError(f"not valid JSON: {getattr(error, 'msg', error)}", path=path,
                               where=where) from None


def read_chrome(document, path=None) -> Trace:
    """A parsed Chrome trace (dict with ``traceEvents``, or a bare event list)."""
    if isinstance(document, dict):
        events = document.get("traceEvents")
        other = document.get("otherData") if isinstance(document.get("otherData"), dict) else {}
    else:
        events, other = document, {}
    if not isinstance(events, list):
        raise TraceFormatError("not a Chrome trace: no traceEvents list", path=path)
    ours = other.get("source_format") is not None
    metadata = {"source_format": "chrome", "chrome_writer": "tracebridge" if ours else "timeline.py"}
    if isinstance(other.get(STEP_INPUTS), str):  # the input shapes of traced calls (capture/profiler.py)
        metadata[STEP_INPUTS] = other[STEP_INPUTS]
    # graph: the recorded graph (capture/graph_record.py); notes: what the capture noted (no
    # memory recorded, a profiler that failed to stop), which the file's doctor repeats
    for key in ("tf_version", "host", "graph", "notes"):
        if isinstance(other.get(key), str):
            metadata[key] = other[key]
    modules = hlo_modules_of_text(other.get(HLO_MODULES))
    if modules:
        metadata[HLO_MODULES] = modules
    builder = TraceBuilder(metadata)
    process_names: dict = {}
    process_hosts: dict = {}
    thread_names: dict = {}
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise TraceFormatError(f"event is a {type(event).__name__}, not an object", path=path,
                                   where=f"traceEvents[{index}]")
        if event.get("ph") == "M":
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            where = f"traceEvents[{index}]"
            pid = _key(event, "pid", path, where)
            if event.get("name") == "process_name":
                process_names[pid] = _text(args.get("name", ""))
            elif event.get("name") == "process_labels" and _text(args.get("labels", "")).startswith("host:"):
                process_hosts[pid] = _text(args["labels"])[len("host:"):]
            elif event.get("name") == "thread_name":
                thread_names[(pid, _key(event, "tid", path, where))] = _text(args.get("name", ""))
    # Every device process is a device, even one without ops (an idle GPU plane).
    for pid, process in process_names.items():
        if process not in (_STEPS, _ALLOCATORS) and not process.endswith(" Tensors"):
            device = process[:-len(" Compute")] if process.endswith(" Compute") else process
            builder.device(device, process_hosts.get(pid))
    ops: list[tuple] = []
    steps: list[tuple[int, int, str, int]] = []
    for index, event in enumerate(events):
        phase = event.get("ph")
        if phase not in ("X", "C"):
            continue
        where = f"traceEvents[{index}]"
        pid = _key(event, "pid", path, where)
        tid = _key(event, "tid", path, where)
        process = process_names.get(pid, f"pid {pid}")
        ts = _nanoseconds(event.get("ts"), path, where, "ts")
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if phase == "C":
            if process == _ALLOCATORS:
                _add_counter(builder, event, args, ts, path, where)
            continue
        # A negative duration is kept as it is: the model holds them (RunMetadata nodes can
        # end before they start) and tracebridge's own Chrome files carry them.
        dur = _nanoseconds(event.get("dur", 0), path, where, "dur", 2 * TIME_LIMIT_NS - 1)
        end = min(max(ts + dur, -TIME_LIMIT_NS), TIME_LIMIT_NS)  # as the builder keeps times
        if process == _STEPS:
            number = args.get("step_num", len(steps))
            if not isinstance(number, int) or isinstance(number, bool):
                raise TraceFormatError("step_num is not an integer", path=path, where=where)
            steps.append((ts, end, _text(event.get("name", "")), number))
            continue
        if process.endswith(" Tensors") or process == _ALLOCATORS:
            continue
        if ours and event.get("cat") == TF_OP_SPAN_CAT:  # derived from the XLA events read here
            continue
        device = process[:-len(" Compute")] if process.endswith(" Compute") else process
        ops.append((device, pid, tid, ts, end, event, args))
    _add_ops(builder, ops, steps, thread_names, ours, process_hosts, path)
    return builder.build()


def _add_ops(builder: TraceBuilder, ops: list[tuple], steps: list, thread_names: dict, ours: bool,
             hosts: dict, path=None) -> None:
    # Steps: tracebridge's own step markers, else one per _SOURCE run, else one step.
    if steps:
        boundaries = [start for start, _, _, _ in steps]
        step_ids = [builder.step(number, name, start, end) for start, end, name, number in steps]
    else:
        boundaries = _run_starts(ops)
        step_ids = [builder.step(i) for i in range(len(boundaries))]
    order = np.argsort([start for start in boundaries], kind="stable") if boundaries else []
    sorted_starts = np.array(boundaries, dtype=np.int64)[order] if boundaries else np.zeros(0, np.int64)
    flags = int(OpFlag.LABEL_CANONICAL | (OpFlag.HAS_NANOS if ours else 0))
    plain = flags & ~int(OpFlag.LABEL_CANONICAL)  # labels that are not "name = kernel(inputs)"
    for device_name, pid, tid, ts, end, event, args in ops:
        device = builder.device(device_name, hosts.get(pid))
        name = _text(args.get("name", event.get("name", "")))
        kernel = _text(args.get("op", event.get("name", "unknown")))
        inputs = [_text(args[k]) for k in sorted((k for k in args if _INPUT_KEY.match(k)),
                                                 key=lambda k: int(k[5:]))]
        cat = event.get("cat")
        category = _CATEGORY_OF_CAT.get(cat, _OP) if isinstance(cat, str) else _OP
        lane_name = thread_names.get((pid, tid)) or (f"lane {tid}" if isinstance(tid, int) else "lane 0")
        if ours and category == _DERIVED:  # the writer labels xprof's derived lines so
            lane_name = lane_name.removesuffix(" (derived)")
        lane = builder.lane(device, lane_name, None)
        step = -1
        if len(sorted_starts):
            position = int(np.searchsorted(sorted_starts, ts, side="right")) - 1
            step = step_ids[int(order[max(position, 0)])]
        op_type = _text(args["op_type"]) if "op_type" in args else kernel  # an XLA event's TF op type
        op = builder.add_op(name=name, op_type=op_type, kernel=kernel, start_ns=ts, end_ns=end,
                            device=device, inputs=tuple(inputs), lane=lane, step=step, category=category,
                            flags=flags if name != "RecvTensor" and category == _OP else plain)
        for key in LINK_STATS + CALL_STATS:  # an XLA event's link to its HLO, a call's stats, as written
            if key in args:
                builder.add_row("event_stats", op=op, key=key, value=_text(args[key]))
        if "bytes" in args and "src" in args:
            where = f"op {name!r}"
            builder.add_row("transfers", op=op, bytes=_int(args.get("bytes"), path, where, "transfer bytes"),
                            rate_bps=_float(args.get("rate_bps") or 0, path, where, "rate_bps"),
                            src=_text(args["src"]), dst=_text(args.get("dst", "")),
                            tensor=_text(args.get("tensor", "")))


def _run_starts(ops: list[tuple]) -> list[int]:
    """Start of each run in a file: the k-th ``_SOURCE`` of every device opens run k."""
    per_device: dict[str, list[int]] = {}
    for device, _, _, ts, _, _, args in ops:
        if args.get("name") == "_SOURCE":
            per_device.setdefault(device, []).append(ts)
    if not per_device:
        return [min((op[3] for op in ops), default=0)]
    runs = max(len(v) for v in per_device.values())
    ordered = [sorted(v) for v in per_device.values()]  # once: a file may hold thousands of runs
    # Runs that start at the same time are one run written again (a file that holds the
    # same RunMetadata under several pids, each with its own _SOURCE): one step, not a
    # step per copy with all its ops in the last and 0 ms in the others.
    starts = sorted({min(v[k] for v in ordered if len(v) > k) for k in range(runs)})
    # Ops recorded a little before their run's _SOURCE (other devices) still belong to it.
    first = min(op[3] for op in ops)
    starts[0] = min(starts[0], first)
    return starts


def _add_counter(builder: TraceBuilder, event: dict, args: dict, ts: int, path, where: str) -> None:
    allocator = _text(event.get("name", ""))
    value = args.get("bytes_in_use", args.get(allocator))
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    if value is None:
        return
    builder.add_row("counters", allocator=allocator, time_ns=ts,
                    bytes_in_use=_int(value, path, where, "counter value"))


def _nanoseconds(value, path, where: str, field: str, limit: int = TIME_LIMIT_NS) -> int:
    """Microseconds as JSON gives them (int, or a float kept as text) -> integer ns, within
    ``limit``: times within the model's +-2**62 ns (years 1824 to 2116; further out is
    corrupt, and would not fit int64), durations within the difference of two such times."""
    ns = _parse_micros(value, path, where, field)
    if not -limit <= ns <= limit:
        raise TraceFormatError(f"{field} out of range ({one_line(str(value), 40)} µs)", path=path, where=where)
    return ns


def _parse_micros(value, path, where: str, field: str) -> int:
    if isinstance(value, bool) or value is None:
        raise TraceFormatError(f"{field} is missing or not a number", path=path, where=where)
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):  # NaN and Infinity arrive as floats (json's parse_constant)
        value = repr(value)
    if isinstance(value, str):
        whole, dot, frac = value.partition(".")
        if dot and whole.lstrip("-").isdigit() and frac.isdigit():
            sign = -1 if whole.startswith("-") else 1
            frac = (frac + "000")[:3]
            return sign * (abs(int(whole)) * 1000 + int(frac))
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if number != number or number in (float("inf"), float("-inf")):
            raise TraceFormatError(f"{field} is not a finite number ({one_line(repr(value), 40)})",
                                   path=path, where=where)
        return round(number * 1000)
    raise TraceFormatError(f"{field} is a {type(value).__name__}, not a number", path=path, where=where)


def _int(value, path=None, where=None, field="value") -> int:
    """A byte count: an integer, or a number given as a float or text, that fits int64."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        try:
            number = int(float(value))
        except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity
            raise TraceFormatError(f"{field} is not a number ({one_line(repr(value), 40)})",
                                   path=path, where=where) from None
    if not -(1 << 63) <= number < (1 << 63):
        raise TraceFormatError(f"{field} out of range ({one_line(str(number), 40)})", path=path, where=where)
    return number


def _float(value, path=None, where=None, field="value") -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if number != number or number in (float("inf"), float("-inf")):
        raise TraceFormatError(f"{field} is not a finite number ({one_line(repr(value), 40)})",
                               path=path, where=where)
    return number


def _key(event: dict, key: str, path, where: str):
    """A pid or tid: a number or a string (anything hashable JSON gives), else an error."""
    value = event.get(key)
    if isinstance(value, (list, dict)):
        raise TraceFormatError(f"{key} is a {'list' if isinstance(value, list) else 'object'}, "
                               "not a number or string", path=path, where=where)
    return value


def _text(value) -> str:
    """A name from the file as text; a nested value is shown as JSON (``str`` of a deeply
    nested list would recurse as deep as it is nested)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        try:
            return json.dumps(value, allow_nan=True)
        except RecursionError:
            return "<nested too deeply>"
    return str(value)
