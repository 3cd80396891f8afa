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

from ..errors import TraceFormatError
from ..model.builder import TraceBuilder
from ..model.trace import HAS_NANOS, LABEL_CANONICAL, OP, Trace
from ..writers.chrome import CHROME_CATEGORIES

_INPUT_KEY = re.compile(r"input(\d+)$")
_STEPS, _ALLOCATORS = "Steps", "Allocators"
_CATEGORY_OF_CAT = {name: value for value, name in enumerate(CHROME_CATEGORIES)}


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
    for key in ("tf_version", "host"):
        if isinstance(other.get(key), str):
            metadata[key] = other[key]
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
            if event.get("name") == "process_name":
                process_names[event.get("pid")] = str(args.get("name", ""))
            elif event.get("name") == "process_labels" and str(args.get("labels", "")).startswith("host:"):
                process_hosts[event.get("pid")] = str(args["labels"])[len("host:"):]
            elif event.get("name") == "thread_name":
                thread_names[(event.get("pid"), event.get("tid"))] = str(args.get("name", ""))
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
        pid = event.get("pid")
        process = process_names.get(pid, f"pid {pid}")
        ts = _nanoseconds(event.get("ts"), path, where, "ts")
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if phase == "C":
            if process == _ALLOCATORS:
                _add_counter(builder, event, args, ts, path, where)
            continue
        dur = _nanoseconds(event.get("dur", 0), path, where, "dur")
        if dur < 0:
            raise TraceFormatError("negative duration", path=path, where=where)
        if process == _STEPS:
            number = args.get("step_num", len(steps))
            if not isinstance(number, int):
                raise TraceFormatError("step_num is not an integer", path=path, where=where)
            steps.append((ts, ts + dur, str(event.get("name", "")), number))
            continue
        if process.endswith(" Tensors") or process == _ALLOCATORS:
            continue
        device = process[:-len(" Compute")] if process.endswith(" Compute") else process
        ops.append((device, pid, event.get("tid"), ts, dur, event, args))
    _add_ops(builder, ops, steps, thread_names, ours, process_hosts)
    return builder.build()


def _add_ops(builder: TraceBuilder, ops: list[tuple], steps: list, thread_names: dict, ours: bool,
             hosts: dict) -> None:
    # Steps: tracebridge's own step markers, else one per _SOURCE run, else one step.
    if steps:
        boundaries = [start for start, _, _, _ in steps]
        step_ids = [builder.step(number, name, start, end) for start, end, name, number in steps]
    else:
        boundaries = _run_starts(ops)
        step_ids = [builder.step(i) for i in range(len(boundaries))]
    order = np.argsort([start for start in boundaries], kind="stable") if boundaries else []
    sorted_starts = np.array(boundaries, dtype=np.int64)[order] if boundaries else np.zeros(0, np.int64)
    flags = LABEL_CANONICAL | (HAS_NANOS if ours else 0)
    for device_name, pid, tid, ts, dur, event, args in ops:
        device = builder.device(device_name, hosts.get(pid))
        name = str(args.get("name", event.get("name", "")))
        kernel = str(args.get("op", event.get("name", "unknown")))
        inputs = [str(args[k]) for k in sorted((k for k in args if _INPUT_KEY.match(k)),
                                               key=lambda k: int(k[5:]))]
        lane_name = thread_names.get((pid, tid)) or (f"lane {tid}" if isinstance(tid, int) else "lane 0")
        lane = builder.lane(device, lane_name, None)
        step = -1
        if len(sorted_starts):
            position = int(np.searchsorted(sorted_starts, ts, side="right")) - 1
            step = step_ids[int(order[max(position, 0)])]
        category = _CATEGORY_OF_CAT.get(event.get("cat"), OP)
        op = builder.add_op(name=name, op_type=kernel, kernel=kernel, start_ns=ts, end_ns=ts + dur,
                            device=device, inputs=tuple(inputs), lane=lane, step=step, category=category,
                            flags=flags if name != "RecvTensor" and category == OP else flags & ~LABEL_CANONICAL)
        if "bytes" in args and "src" in args:
            builder.add_row("transfers", op=op, bytes=_int(args.get("bytes")),
                            rate_bps=float(args.get("rate_bps") or 0), src=str(args["src"]),
                            dst=str(args.get("dst", "")), tensor=str(args.get("tensor", "")))


def _run_starts(ops: list[tuple]) -> list[int]:
    """Start of each run in a file: the k-th ``_SOURCE`` of every device opens run k."""
    per_device: dict[str, list[int]] = {}
    for device, _, _, ts, _, _, args in ops:
        if args.get("name") == "_SOURCE":
            per_device.setdefault(device, []).append(ts)
    if not per_device:
        return [min((op[3] for op in ops), default=0)]
    runs = max(len(v) for v in per_device.values())
    starts = []
    for k in range(runs):
        starts.append(min(sorted(v)[k] for v in per_device.values() if len(v) > k))
    # Ops recorded a little before their run's _SOURCE (other devices) still belong to it.
    first = min(op[3] for op in ops)
    starts[0] = min(starts[0], first)
    return starts


def _add_counter(builder: TraceBuilder, event: dict, args: dict, ts: int, path, where: str) -> None:
    allocator = str(event.get("name", ""))
    value = args.get("bytes_in_use", args.get(allocator))
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    if value is None:
        return
    builder.add_row("counters", allocator=allocator, time_ns=ts,
                    bytes_in_use=_int(value, path, where, "counter value"))


def _nanoseconds(value, path, where: str, field: str) -> int:
    """Microseconds as JSON gives them (int, or a float kept as text) -> integer ns."""
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
            raise TraceFormatError(f"{field} is not a finite number ({value!r})", path=path, where=where)
        return round(number * 1000)
    raise TraceFormatError(f"{field} is a {type(value).__name__}, not a number", path=path, where=where)


def _int(value, path=None, where=None, field="value") -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(float(value))
    except (TypeError, ValueError):
        raise TraceFormatError(f"{field} is not a number ({value!r})", path=path, where=where) from None
