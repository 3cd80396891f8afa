"""Steps of an XSpace, and the step each event belongs to.

Three sources, in order of preference: ``step_num`` markers on the host (TF2's
``Trace("train", step_num=i, _r=1)``, and tracebridge's TensorBoard output), a device's
``Steps`` line (xprof derives it from a GPU's or TPU's own step markers), and tf.function
calls. :func:`add_steps` records the steps in the builder and returns each event's step.
"""

from __future__ import annotations

import numpy as np

from ..model.builder import TraceBuilder
from ..model.schema import NO_STEP
from . import wire

EVENT_CHUNK = 200_000  # events handled at a time where a temporary per event would be large


def add_steps(builder: TraceBuilder, stats: dict, is_op: np.ndarray, start_ns, end_ns, name_id,
               device_of_event, step_line_events: np.ndarray) -> np.ndarray:
    """Steps from ``step_num`` markers, else from device ``Steps`` lines, else from
    tf.function calls; ops (events where ``is_op``) are assigned to the step whose span
    contains their start. Returns the step of every event (NO_STEP where none)."""
    step_of_event = np.full(len(start_ns), NO_STEP, dtype=np.int32)
    names = builder.strings.as_tuple()
    markers = []
    if "step_num" in stats:
        # One step per number: a marker may be repeated on several threads (tracebridge's
        # TensorBoard output puts one on every host line) and spans all of them.
        found: dict[int, list] = {}
        for event, number in zip(*stats["step_num"]):
            if isinstance(number, int):
                marker = found.setdefault(number, [int(start_ns[event]), int(end_ns[event]), number,
                                                   f"{names[int(name_id[event])]} {number}"])
                marker[0], marker[1] = min(marker[0], int(start_ns[event])), max(marker[1], int(end_ns[event]))
        markers = [tuple(marker) for marker in found.values()]
    elif len(step_line_events):
        _add_device_steps(builder, step_of_event, is_op, start_ns, end_ns, name_id, device_of_event,
                          step_line_events)
        return step_of_event
    elif "tf_function_call" in stats:
        # Outermost calls only: a function called while another is traced (Keras's
        # one_step_on_data inside multi_step_on_iterator's first call) is no step of its own.
        reach = np.iinfo(np.int64).min
        for event in sorted(stats["tf_function_call"][0], key=lambda e: (start_ns[e], -end_ns[e])):
            if int(end_ns[event]) <= reach:
                continue
            reach = int(end_ns[event])
            k = len(markers)
            markers.append((int(start_ns[event]), int(end_ns[event]), k, f"{names[int(name_id[event])]} {k}"))
    if not markers:
        return step_of_event
    markers.sort()
    step_ids = np.array([builder.step(number, name, start, end) for start, end, number, name in markers])
    _assign_steps(step_of_event, start_ns, is_op, markers, step_ids)
    return step_of_event


def _add_device_steps(builder: TraceBuilder, step_of_event: np.ndarray, is_op: np.ndarray, start_ns,
                      end_ns, name_id, device_of_event, step_line_events: np.ndarray) -> None:
    """Each device's ``Steps`` line gives that device's steps
    (:func:`~tracebridge.model.accelerator.device_steps` reads them back from the kept
    rows). Devices step on their own clocks (a multi-GPU job's
    step 0 starts seconds apart on two GPUs), so the trace's step N is not a merge of
    their spans: it is the longest device's step N (xprof's step time for a number is
    its longest core's), and an op belongs to step N when its start lies in its own
    device's step N, or, for a device without a ``Steps`` line (the host), in any's."""
    names = builder.strings.as_tuple()
    spans: dict[tuple[int, int], list[int]] = {}
    for event in step_line_events.tolist():
        text = names[int(name_id[event])]
        device = int(device_of_event[event])
        number = int(text) if text.isdigit() else sum(1 for d, _ in spans if d == device)
        span = spans.setdefault((device, number), [int(start_ns[event]), int(end_ns[event])])
        span[0], span[1] = min(span[0], int(start_ns[event])), max(span[1], int(end_ns[event]))
    longest: dict[int, tuple[int, int]] = {}
    for (_, number), (lo, hi) in spans.items():
        if number not in longest or hi - lo > longest[number][1] - longest[number][0]:
            longest[number] = (lo, hi)
    numbers = sorted(longest, key=lambda n: (longest[n], n))
    step_of = {n: builder.step(n, f"step {n}", *longest[n]) for n in numbers}
    stepping = {device for device, _ in spans}
    on_stepping = np.isin(device_of_event, list(stepping))
    for device in sorted(stepping):
        mine = sorted((lo, hi, n, "") for (d, n), (lo, hi) in spans.items() if d == device)
        _assign_steps(step_of_event, start_ns, is_op & (device_of_event == device), mine,
                      np.array([step_of[m[2]] for m in mine]))
    every = sorted((lo, hi, n, "") for (_, n), (lo, hi) in spans.items())
    _assign_steps(step_of_event, start_ns, is_op & ~on_stepping, every,
                  np.array([step_of[m[2]] for m in every]))


def _assign_steps(step_of_event: np.ndarray, start_ns: np.ndarray, chosen: np.ndarray, markers: list,
                  step_ids: np.ndarray) -> None:
    """Set ``step_of_event`` of the ``chosen`` events (a mask) to the step of ``markers``
    (sorted ``(start, end, ...)``) whose span holds their start; with overlapping spans,
    the latest one that started before them. Done a chunk of events at a time, so that
    the temporaries stay small (3M events made each one 24 MB)."""
    # Index 0 is "before every marker": a span that holds nothing, and no step.
    starts = np.array([m[0] for m in markers], dtype=np.int64)
    ends = np.r_[np.iinfo(np.int64).min, np.array([m[1] for m in markers], dtype=np.int64)]
    ids = np.r_[NO_STEP, np.asarray(step_ids)].astype(np.int32)
    if wire.compiled() and step_of_event.dtype == np.int32:  # one pass of the C loop, no search per event
        wire._wirec.steps(np.ascontiguousarray(start_ns, dtype=np.int64), np.ascontiguousarray(chosen, dtype=bool),
                          starts, ends, ids, step_of_event)
        return
    for lo in range(0, len(start_ns), EVENT_CHUNK):
        hi = min(len(start_ns), lo + EVENT_CHUNK)
        start = start_ns[lo:hi]
        position = np.searchsorted(starts, start, side="right")
        inside = chosen[lo:hi] & (start <= ends[position])
        step_of_event[lo:hi][inside] = ids[position[inside]]
