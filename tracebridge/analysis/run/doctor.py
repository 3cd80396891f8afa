"""Why a profile is empty, or lacks time, memory, steps or devices, and what to change.

The checks here read a :class:`Trace` only (what a trace file says about itself); the
checks that need the files around it (an empty file, a logdir laid out where TensorBoard
does not look) are :mod:`tracebridge.readers.layout`'s, and :mod:`tracebridge.diagnosis`
runs both. Each finding is a :class:`Problem` with a stable ``code``; ``tracebridge
info``, ``summary`` and ``compare`` print the same findings as one-line notes
(:func:`trace_notes`), so there is one place that decides what is wrong with a trace.

Codes, most serious first (:data:`CODES`): a capture that recorded nothing
(``layout``, ``no_trace_level``, ``empty_window``), the profiler's own complaints
(``profiler_errors``, ``dropped_events``), missing parts (``no_device_activity``,
``clock_skew``, ``no_steps``, ``few_steps``, ``ops_without_time``, ``no_memory_records``).
``few_steps`` is ``tracebridge doctor``'s alone (given :class:`~.common.thresholds.Thresholds`):
``compare`` and ``advise`` say it in a note of their own.

Warnings and failures: a problem whose code is in :data:`WARNINGS` says what a capture made
with TensorFlow's defaults leaves out by design (memory: TF records CPU allocations only with
``TF_CPU_ALLOCATOR_USE_BFC=true``; ``timeline.py`` and tracebridge's Chrome writer only when
asked). It is printed with its fix, but a healthy default capture has it, so it does not fail
the check: :attr:`Diagnosis.ok` is True and ``tracebridge doctor`` exits 0 when every problem
found is a warning (``--json``: each problem's ``severity``, "warning" or "error").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from ...model.hlo import HLO_INSTRUCTION, LINK_STATS, framework_ops, xla_framework
from ...model.schema import NO_STEP, Category, OpFlag, is_eager_name, is_framework_eager_op
from ...model.trace import Trace
from ..common.tables import csv_text, ms
from ..common.thresholds import Thresholds
from .steady import one_time_steps

CODES = ("layout", "no_trace_level", "empty_window", "profiler_errors", "dropped_events",
         "no_device_activity", "clock_skew", "no_steps", "few_steps", "ops_without_time", "no_memory_records")
# Codes that are warnings, not failures (see the module's docstring): a profile of one step
# reads, converts and views as it should; only timing findings need more of them.
WARNINGS = ("few_steps", "no_memory_records")

# CUPTI's default caps on the events one capture keeps (XLA's CuptiTracerCollectorOptions:
# max_callback_api_events and max_activity_api_events, 2 * 1024 * 1024 each): a device
# plane with this many events was cut off there, whether or not a warning says so.
CUPTI_EVENT_CAP = 2 * 1024 * 1024
# The warning TF's GPU tracer adds to XSpace.warnings when CUPTI dropped events
# (cupti_collector: "Detected GPU events dropped on <host>: ... N events dropped because R").
_DROPPED = re.compile(r"(\d+) events dropped because ([^;.]*)")
_MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
_CPU_MEMORY_FIX = f"set {_MEMORY_ENV}=true before TensorFlow starts (tracebridge.capture.enable_cpu_memory_events())"
_GPU_MEMORY_FIX = ("keep the GPU's BFC allocator (do not set TF_GPU_ALLOCATOR=cuda_malloc_async, which records no "
                   "allocations)")
# A capture's own no_memory_records note, as a tracebridge .json keeps it: what is missing, the evidence.
_CAPTURE_MEMORY_NOTE = re.compile(r"no_memory_records: ([^(]*?) \(([^()]*)\)")
_STEP_MARKER = 'with tf.profiler.experimental.Trace("train", step_num=step, _r=1): <one training step>'
# XSpace formats: the TF2 profiler's own files and tracebridge's TF2 capture of them.
_XSPACE_FORMATS = ("xspace", "tf2")
_STEPSTATS_FORMATS = ("runmetadata", "pbtxt", "events", "pickle", "session", "tfvis")
_ACCELERATOR = re.compile(r"/device:(GPU|TPU):\d+$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a profile: ``code`` (one of :data:`CODES`), what is
    ``missing``, the ``evidence`` (counts, file names, the profiler's own text) and the
    ``fix`` in the user's world (a TF1 or TF2 call, an environment variable, a path)."""

    code: str
    missing: str
    evidence: str
    fix: str
    path: str = ""

    def line(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.code}: {where}{self.missing} ({self.evidence}); fix: {self.fix}"

    def note(self) -> str:
        """The short form ``info``, ``summary`` and ``compare`` print."""
        return f"{self.code}: {self.missing} ({self.evidence})"

    @property
    def severity(self) -> str:
        """"warning" (:data:`WARNINGS`: reported, not failed) or "error"."""
        return "warning" if self.code in WARNINGS else "error"


@dataclass
class Diagnosis:
    """The problems found in one input, most serious first, and what could not be
    checked there (``not_checked``: a format that cannot say)."""

    problems: list[Problem] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing wrong, or warnings only (:data:`WARNINGS`): what exit status 0 means."""
        return all(p.severity == "warning" for p in self.problems)

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def add(self, other: "Diagnosis") -> None:
        self.problems += other.problems
        self.not_checked += [n for n in other.not_checked if n not in self.not_checked]
        self.sort()

    def sort(self) -> None:
        self.problems.sort(key=lambda p: CODES.index(p.code) if p.code in CODES else len(CODES))

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problems": [{**asdict(p), "severity": p.severity} for p in self.problems],
                "not_checked": self.not_checked}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        """One row per problem (most serious first), then one per thing not checked (code
        ``not_checked``, what in ``missing``)."""
        return csv_text(("code", "path", "missing", "evidence", "fix"),
                        [(p.code, p.path, p.missing, p.evidence, p.fix) for p in self.problems]
                        + [("not_checked", "", n, "", "") for n in self.not_checked])

    def to_text(self) -> str:
        return "\n".join([p.line() for p in self.problems] + [f"not checked: {n}" for n in self.not_checked])


def diagnose(trace: Trace, path: str = "", thresholds: Thresholds | None = None) -> Diagnosis:
    """Every check of this module on ``trace``; with ``thresholds``, also whether it has the
    steps timing findings need (``few_steps``)."""
    found = Diagnosis()
    checks = [_empty_window, _no_trace_level, _profiler_errors, _dropped_events, _no_device_activity,
              _clock_skew, _no_steps, _ops_without_time, _no_memory_records]
    if thresholds is not None:
        checks.append(lambda t: _few_steps(t, thresholds))
    for check in checks:
        for item in check(trace):
            if isinstance(item, Problem):
                found.problems.append(Problem(item.code, item.missing, item.evidence, item.fix, path))
            else:
                found.not_checked.append(item)
    found.sort()
    return found


def trace_notes(trace: Trace, codes: Iterable[str] | None = None) -> list[str]:
    """The problems of ``trace`` as one-line notes (all, or those of ``codes``): what
    ``tracebridge info``, ``summary`` and ``compare`` print."""
    wanted = set(codes) if codes is not None else None
    return [p.note() for p in diagnose(trace).problems if wanted is None or p.code in wanted]


# --- the checks: each yields Problems, and strings for what it could not check --------------
def _empty_window(trace: Trace):
    meta = trace.metadata
    work = _work_rows(trace)
    jax = xla_framework(trace) == "jax"
    if meta.get("runs_seen") and not meta.get("runs_traced") and not len(trace):
        yield Problem("empty_window", "no session.run was traced",
                      f"{meta['runs_seen']} runs seen, 0 traced",
                      "the capture's schedule (warmup, every, steps) selected none of the runs made: "
                      "lower warmup or make more runs inside the with-block")
    elif "steps_seen" in meta and not len(trace):
        yield Problem("empty_window", "the profiling window recorded nothing",
                      f"{meta.get('steps_seen', 0)} steps seen; {meta.get('notes', 'no events')}",
                      "start the profiler before the steps and stop it after them; with a schedule, "
                      "lower warmup or run more steps")
    elif len(trace) and not work.any() and _stats_read(trace):
        yield Problem("empty_window", "the profiling window covers no traced steps",
                      f"{len(trace)} events, none of them a {'JAX' if jax else 'TF'} op, kernel or copy; "
                      f"{len(trace.steps)} steps",
                      "start the profiler before the training steps and stop it after them " + (
                          "(jax.profiler.start_trace(logdir)/stop_trace() around the loop, or with "
                          "jax.profiler.trace(logdir):)" if jax else
                          "(tf.profiler.experimental.start/stop around the loop; Keras: "
                          "TensorBoard(profile_batch=(first, last)) within the batches of one epoch)"))


def _no_trace_level(trace: Trace):
    meta = trace.metadata
    notes = str(meta.get("notes", ""))
    if "no step stats" in notes:
        level = meta.get("trace_level", "the trace level")
        yield Problem("no_trace_level", "session.run calls returned no step_stats",
                      notes.split(";")[0], f"{level} recorded nothing here: on a cluster (grpc:// target) "
                      "use RunOptions(trace_level=RunOptions.FULL_TRACE)")


def _profiler_errors(trace: Trace):
    if trace.source_format not in _XSPACE_FORMATS:
        return
    for text in _split(trace.metadata.get("xspace_errors")):
        yield Problem("profiler_errors", "the profiler reported an error", f'"{text}"', _error_fix(text))
    for text in _split(trace.metadata.get("xspace_warnings")):
        if not _DROPPED.search(text):
            yield Problem("profiler_errors", "the profiler reported a warning", f'"{text}"', _error_fix(text))


def _error_fix(text: str) -> str:
    lowered = text.lower()
    if "privilege" in lowered or "insufficient_privileges" in lowered:
        return ("CUPTI needs access to the GPU performance counters: run as root, or allow them for all "
                "users (options nvidia NVreg_RestrictProfilingToAdminUsers=0, then reload the driver); "
                "in Docker: docker run --privileged (or --cap-add SYS_ADMIN)")
    if "libcupti" in lowered:
        return "put CUPTI's library folder on LD_LIBRARY_PATH (e.g. /usr/local/cuda/extras/CUPTI/lib64)"
    if "no gpu" in lowered:
        return "no GPU was visible to TensorFlow: check tf.config.list_physical_devices('GPU') and CUDA_VISIBLE_DEVICES"
    return "see the profiler's text; the capture may be incomplete"


def _dropped_events(trace: Trace):
    if trace.source_format not in _XSPACE_FORMATS:
        return
    for text in _split(trace.metadata.get("xspace_warnings")):
        counts = _DROPPED.findall(text)
        if counts:
            total = sum(int(n) for n, _ in counts)
            reasons = ", ".join(sorted({r.strip() for _, r in counts}))
            yield Problem("dropped_events", f"{total} profiler events were dropped ({reasons})", f'"{text}"',
                          "profile fewer steps at a time (a shorter window, e.g. 2-5 steps); JAX/xprof: raise "
                          "ProfileOptions advanced_configuration gpu_max_activity_api_events and "
                          "gpu_max_callback_api_events")
    rows = np.bincount(trace.ops["device"], minlength=len(trace.devices)) if len(trace) else []
    for index, device in enumerate(trace.devices):
        if _ACCELERATOR.search(device.name) and len(rows) and rows[index] >= CUPTI_EVENT_CAP:
            yield Problem("dropped_events", f"{device.name} hit the profiler's event cap",
                          f"{int(rows[index]):,} events, CUPTI keeps {CUPTI_EVENT_CAP:,}",
                          "profile fewer steps at a time; later events of the window are missing")


def _no_device_activity(trace: Trace):
    if trace.source_format not in _XSPACE_FORMATS:
        return
    rows = np.bincount(trace.ops["device"], minlength=len(trace.devices)) if len(trace) else \
        np.zeros(len(trace.devices), dtype=np.int64)
    accelerators = [(i, d) for i, d in enumerate(trace.devices) if _ACCELERATOR.search(d.name)]
    empty = [d.name for i, d in accelerators if rows[i] == 0]
    if empty:
        busy = len(accelerators) - len(empty)
        yield Problem("no_device_activity", f"{len(empty)} of {len(accelerators)} device planes hold no events",
                      f"empty: {', '.join(empty)}; {busy} with events",
                      "those devices ran nothing in the window: place work on them (tf.distribute strategy, "
                      "tf.device) or, if they did run, see profiler_errors (CUPTI) and device_tracer_level=1")
        return
    if accelerators:
        return
    # A host that used a GPU says so twice: its driver launches, and TF's GPU allocators.
    names = {trace.strings[i] for i in np.unique(trace.ops["name"]).tolist()}  # not a string per row
    launches = sorted(n for n in names if n.startswith(("cuLaunchKernel", "cudaLaunchKernel", "cuMemcpy")))
    allocators = sorted({a for a in trace.column_strings("counters", "allocator") if re.match(r"GPU_\d+_bfc", a)}) \
        if trace.counters.rows else []
    if launches or allocators:
        evidence = ", ".join(([f"launch events {', '.join(launches[:3])}"] if launches else []) +
                             ([f"GPU allocators {', '.join(allocators[:4])}"] if allocators else []))
        yield Problem("no_device_activity", "a GPU host without a device plane",
                      f"{evidence}; no /device:GPU plane",
                      "the GPU tracer did not run: see profiler_errors (CUPTI), and keep device_tracer_level=1")


def _clock_skew(trace: Trace):
    hosts = sorted({d.host for d in trace.devices if d.host})
    if len(hosts) < 2 or not len(trace):
        return
    host_of_device = np.array([hosts.index(d.host) if d.host in hosts else -1 for d in trace.devices])
    ops = trace.ops
    op_host = host_of_device[ops["device"]]
    markers = _step_markers(trace)
    starts = {h: int(ops["start_ns"][op_host == k].min()) for k, h in enumerate(hosts) if (op_host == k).any()}
    per_host: dict[str, dict[int, tuple[int, int]]] = {}
    for row, number in markers:
        host = hosts[op_host[row]] if op_host[row] >= 0 else None
        if host is not None:
            per_host.setdefault(host, {})[number] = (int(ops["start_ns"][row]), int(ops["end_ns"][row]))
    lengths = [end - start for steps in per_host.values() for start, end in steps.values()]
    if not lengths:
        yield "clock_skew: the hosts have no step markers to compare their clocks by"
        return
    step_ns = int(np.median(lengths))
    reference = hosts[0] if hosts[0] in starts else min(starts, key=starts.get)
    for host in hosts:
        if host == reference or host not in starts:
            continue
        start_gap = starts[host] - starts[reference]
        common = sorted(set(per_host.get(host, {})) & set(per_host.get(reference, {})))
        step_gap = int(np.median([per_host[host][n][0] - per_host[reference][n][0] for n in common])) \
            if common else None
        # A clock that is off moves both the first event and the shared steps; hosts that
        # merely run their steps at different times (asynchronous training) share the window.
        if abs(start_gap) > step_ns and (step_gap is None or abs(step_gap) > step_ns):
            gap = step_gap if step_gap is not None else start_gap
            yield Problem("clock_skew", f"{host}'s clock disagrees with {reference}'s",
                          f"{ms(gap)} apart over {len(common)} shared steps; a step takes {ms(step_ns)}",
                          "synchronize the hosts' clocks (chrony/NTP) before profiling; until then compare "
                          "hosts step by step (tracebridge summary --by-host), not on one time axis")


def _few_steps(trace: Trace, limits: Thresholds):
    """Steps there are, but fewer than timing findings are judged on (none: no_steps' case).
    Not of a format that holds one step by design (a RunMetadata, timeline.py's JSON): its
    steps are read together from several files, which compare's own note says."""
    one_step = trace.source_format in ("runmetadata", "pbtxt", "pickle", "tfvis", "session") or _timeline_py(trace)
    if not one_step and 0 < len(trace.steps) < limits.min_steps:
        yield Problem("few_steps", "too few steps to judge timing findings by",
                      f"{len(trace.steps)} step(s); op_regression, host_gaps, input_wait and device_idle need "
                      f"{limits.min_steps} or more",
                      f"capture {max(limits.min_steps, 5)} steps or more: tracebridge.trace(..., steps=5), "
                      "TraceCallback(steps=5), or profile_batch=(first, first + 4); a TF1 RunMetadata .pb holds "
                      "one step: save several (.json, or one .pb a step) and read them together")


def _no_steps(trace: Trace):
    # Step markers are what xprof needs of an XSpace. timeline.py's files hold one run (a step)
    # each, and tracebridge's own keep the steps of the trace they were written from.
    if trace.source_format not in _XSPACE_FORMATS:
        if trace.source_format == "chrome" and not _timeline_py(trace) and not _tracebridge_json(trace):
            yield "no_steps: a Chrome trace from another writer has no step markers to look for"
        return
    if not _stats_read(trace):
        yield "no_steps: read without event stats (ops only), the step markers cannot be seen"
        return
    if _step_markers(trace) or any(lane.name == "Steps" for lane in trace.lanes):
        return
    ops = int((trace.ops["category"] == Category.OP).sum())
    jax = xla_framework(trace) == "jax"
    where = (f"{len(trace.steps)} steps taken from tf.function calls instead" if trace.steps
             else "no tf.function calls either")
    evidence = f"0 events with a step_num stat among {len(trace):,} events"
    if not jax:  # JAX has no tf.function calls to take steps from, and its op rows are thunks
        evidence += f" ({ops:,} TF ops); {where}"
    if ops and not jax:
        fix = (f"mark each training step: {_STEP_MARKER}; Keras 3 fit writes no markers: enter that Trace in a "
               "callback's on_train_batch_begin and exit it in on_train_batch_end")
    else:  # no TF ops: an XLA program (JAX, a TPU runtime)
        fix = 'mark each step: with jax.profiler.StepTraceAnnotation("train", step_num=step): <one step>'
    yield Problem("no_steps", "no step markers: xprof reports \"No step marker observed\"", evidence, fix)


def _ops_without_time(trace: Trace):
    yield from _unlinked_xla_ops(trace)  # first: XLA thunks that found no HLO are no ops at all
    ops = trace.ops
    is_op = ops["category"] == Category.OP
    if not is_op.any():
        return
    duration = (ops["end_ns"] - ops["start_ns"]).astype(np.int64)
    total_ns = int(duration[is_op].sum()) or 1
    names = trace.strings
    eager = _user_eager_ops(trace, is_op)
    if trace.steps:  # set-up before the first step (a Keras iterator, say) is not the step's
        eager &= (ops["step"] != NO_STEP) & _in_steps(trace)
        # nor are a first call's (variables checked and made while it is traced): one-time work
        one_time = [step.position for step in one_time_steps(trace)]
        if one_time and len(one_time) < len(trace.steps):
            eager &= ~np.isin(ops["step"], one_time)
    if eager.any():
        count = int(eager.sum())
        yield Problem("ops_without_time", f"{count} ops ran eagerly: no kernel time of their own",
                      f"{count} of {int(is_op.sum())} TF ops, {100 * int(duration[eager].sum()) / total_ns:.0f}% "
                      "of TF op time, recorded as EagerExecute dispatch",
                      "run the step inside a tf.function (@tf.function def train_step(...)); Keras: do not "
                      "pass run_eagerly=True")
    if trace.source_format in _STEPSTATS_FORMATS:
        micros = is_op & ((ops["flags"] & int(OpFlag.HAS_NANOS)) == 0)
        if micros.any():
            types = sorted({names[i] for i in np.unique(ops["op_type"][micros]).tolist()})
            count = int(micros.sum())
            yield Problem("ops_without_time", f"{count} ops have no kernel timing, only a transfer's micros",
                          f"{count} of {int(is_op.sum())} ops ({', '.join(types[:4])}); "
                          f"{100 * int(duration[micros].sum()) / total_ns:.0f}% of op time",
                          "the RPC layer records remote transfers (RecvTensor) in whole microseconds, with no "
                          "kernel: read them as transfer time, on the receiving worker")


def _no_memory_records(trace: Trace):
    fmt = trace.source_format
    if fmt == "chrome":
        captured = _CAPTURE_MEMORY_NOTE.search(str(trace.metadata.get("notes", "")))
        if _tracebridge_json(trace) and captured and not trace.counters.rows:
            # the capture recorded none (its note, kept in the file): writing it again will not help
            missing, evidence = captured.groups()
            fixes = [fix for device, fix in (("/host:CPU", _CPU_MEMORY_FIX), ("/device:GPU", _GPU_MEMORY_FIX))
                     if device in missing]
            yield Problem("no_memory_records", missing, f"{evidence}; noted by the capture",
                          "; ".join(fixes) or _CPU_MEMORY_FIX)
        elif _tracebridge_json(trace):
            if not trace.counters.rows:
                yield Problem("no_memory_records", "no allocator records in this file",
                              "no memory counter events (tracebridge writes them only when asked, from a "
                              "capture that recorded memory)",
                              "write it with trace.save(path, memory=True) or tracebridge convert IN OUT.json "
                              "--memory; on a CPU, TF2 records memory only with TF_CPU_ALLOCATOR_USE_BFC=true "
                              "set before TensorFlow starts")
        elif _timeline_py(trace):
            if not trace.counters.rows and not trace.memory.rows:
                yield Problem("no_memory_records", "no allocator records in this timeline",
                              "no memory counter events (timeline.py writes them only with show_memory=True)",
                              "Timeline(run_metadata.step_stats).generate_chrome_trace_format(show_memory=True), "
                              "or tracebridge convert run_metadata.pb timeline.json --memory")
        else:
            yield "no_memory_records: a Chrome trace from another writer may leave memory out"
        return
    if not len(trace):
        return
    devices_with_ops = sorted(set(np.unique(trace.ops["device"]).tolist()))
    if fmt in _STEPSTATS_FORMATS:
        with_memory = set(np.unique(trace.ops["device"][trace.memory["op"]]).tolist()) if trace.memory.rows else set()
        missing = [trace.devices[d].name for d in devices_with_ops
                   if d not in with_memory and trace.devices[d].kind == "compute"
                   and not _only_transfers(trace, d)]
        if missing:
            yield Problem("no_memory_records", f"no allocator records on {len(missing)} device(s)",
                          f"no memory in the step_stats of {', '.join(missing)}",
                          "trace with RunOptions(trace_level=RunOptions.FULL_TRACE) (or SOFTWARE_TRACE), which "
                          "record each op's allocations")
        return
    if fmt not in _XSPACE_FORMATS:
        return
    allocators = set(trace.column_strings("counters", "allocator")) if trace.counters.rows else set()
    if not (trace.ops["category"] == Category.OP).any() or xla_framework(trace) == "jax":
        return  # no TF ops (JAX's thunks are op rows, a TPU runtime's none): TF's allocators did not run
    missing = []
    # With accelerators, TF's allocations that matter are theirs; the host's CPU allocator
    # records none unless asked, and no one profiles it there.
    accelerated = any(_ACCELERATOR.search(d.name) for d in trace.devices)
    for d in devices_with_ops:
        device = trace.devices[d]
        if device.name.startswith("/host:CPU") and not accelerated and not allocators:
            missing.append((device.name, _CPU_MEMORY_FIX))
        elif "/device:GPU:" in device.name and not any(f"GPU_{device.index}" in a for a in allocators):
            missing.append((device.name, _GPU_MEMORY_FIX))
    if missing:
        names = ", ".join(name for name, _ in missing)
        fixes = "; ".join(dict.fromkeys(fix for _, fix in missing))
        yield Problem("no_memory_records", f"no memory events on {names}",
                      f"0 MemoryAllocation events in {len(trace):,} events; allocators seen: "
                      f"{', '.join(sorted(allocators)) or 'none'}", fixes)


# --- helpers ------------------------------------------------------------------------------------
def _split(text) -> list[str]:
    return [part.strip() for part in str(text).split("; ") if part.strip()] if text else []


def _timeline_py(trace: Trace) -> bool:
    """A Chrome trace that TF's timeline.py wrote: its processes are TF devices (the
    reader calls every Chrome trace not tracebridge's own timeline.py's; another writer's
    processes are hosts, threads or numbers, and what it left out cannot be told)."""
    return trace.metadata.get("chrome_writer") == "timeline.py" and all(d.type for d in trace.devices)


def _tracebridge_json(trace: Trace) -> bool:
    """A Chrome trace tracebridge wrote (the reader knows it by its ``otherData``)."""
    return trace.metadata.get("chrome_writer") == "tracebridge"


def _user_eager_ops(trace: Trace, is_op: np.ndarray) -> np.ndarray:
    """TF op rows the user's code ran eagerly: eager ops less those TF and Keras run
    themselves (model/schema.py: is_framework_eager_op), tried once per string."""
    ops, names = trace.ops, trace.strings
    eager_names = [i for i in np.unique(ops["name"][is_op]).tolist() if is_eager_name(names[i])]
    eager = is_op & np.isin(ops["name"], eager_names)
    framework = [i for i in np.unique(ops["op_type"][eager]).tolist() if is_framework_eager_op(names[i])]
    return eager & ~np.isin(ops["op_type"], framework)


def _in_steps(trace: Trace) -> np.ndarray:
    """Rows that start inside a step's time. A Chrome reader puts every op in some step
    (the one last started), so ops between steps (Keras's iterator between tf.function calls,
    its metrics at the end of an epoch) are told apart by time, as in the XSpace they came
    from."""
    spans = sorted((s.start_ns, s.end_ns) for s in trace.steps)
    merged: list[list[int]] = []
    for start, end in spans:  # nested or overlapping steps as one span
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    lo = np.array([s for s, _ in merged], dtype=np.int64)
    hi = np.array([e for _, e in merged], dtype=np.int64)
    starts = trace.ops["start_ns"]
    at = np.searchsorted(lo, starts, side="right") - 1
    return (at >= 0) & (starts < hi[np.maximum(at, 0)])


def _stats_read(trace: Trace) -> bool:
    """False for an XSpace read for its op rows only (``load(..., ops_only=True)``, as a
    summary reads): without event stats, eager ops and step markers cannot be told. Such a
    read keeps only the stats that link XLA events to their HLO (a JAX run's has hundreds)."""
    if trace.source_format not in _XSPACE_FORMATS:
        return True
    stats = trace.table("event_stats")
    links = [trace.string_id(key) for key in LINK_STATS]
    return bool(stats.rows) and not np.isin(stats["key"], links).all()


def _work_rows(trace: Trace) -> np.ndarray:
    """TF ops, kernels and copies, and XLA's thunks even where their HLO is missing (a host
    event with an ``hlo_op`` stat: ops_without_time says what they lack)."""
    category = trace.ops["category"]
    work = (category == Category.OP) | (category == Category.DEVICE) | (category == Category.MEMCPY)
    work[trace.event_stat("hlo_op")[0]] = True
    return work


def _stat_rows(trace: Trace, key: str) -> tuple[np.ndarray, list[str]]:
    """The op rows carrying event stat ``key``, and its values."""
    rows, values = trace.event_stat(key)
    return rows, [trace.strings[v] for v in values.tolist()]


def _step_markers(trace: Trace) -> list[tuple[int, int]]:
    rows, values = _stat_rows(trace, "step_num")
    return [(int(row), int(value)) for row, value in zip(rows.tolist(), values) if value.lstrip("-").isdigit()]


def _unlinked_xla_ops(trace: Trace):
    """XLA events whose HLO instruction the reader could not find (readers/xspace_xla.py)."""
    xla = _xla_ops(trace)
    unlinked = xla - len(np.unique(_stat_rows(trace, HLO_INSTRUCTION)[0]))  # the reader linked the others
    if unlinked > 0:
        modules = len(trace.metadata.get("hlo_modules") or ())
        what = framework_ops(trace)
        if xla_framework(trace) == "jax":
            fix = ("the time stays on XLA instructions (fusions): to name their JAX ops, keep the profile's "
                   "/host:metadata plane (jax.profiler writes each module's HLO there), or dump the HLO with "
                   "jax.jit(f).lower(*args).compile().as_text() or XLA_FLAGS=--xla_dump_to=DIR")
        else:
            fix = ("the time stays on XLA instructions (fusions): to name their TF ops, dump the HLO with "
                   "f.experimental_get_compiler_ir(*args)(stage='optimized_hlo') or "
                   "XLA_FLAGS=--xla_dump_to=DIR, or profile without jit_compile to see TF ops")
        yield Problem("ops_without_time", f"{unlinked} XLA ops cannot be tied to {what}: their HLO is not in the trace",
                      f"{unlinked} of {xla} events carry hlo_op that no instruction of the trace's {modules} "
                      "HLO modules has", fix)


def _xla_ops(trace: Trace) -> int:
    rows, _ = _stat_rows(trace, "hlo_op")
    return len(np.unique(rows))


def _only_transfers(trace: Trace, device: int) -> bool:
    """A TF1 device block of RPC transfer records only (RecvTensor), which carry no memory."""
    mine = trace.ops["device"] == device
    types = {trace.strings[i] for i in np.unique(trace.ops["op_type"][mine]).tolist()}
    return types <= {"RecvTensor"}


__all__ = ["CODES", "WARNINGS", "Diagnosis", "Problem", "diagnose", "trace_notes"]
