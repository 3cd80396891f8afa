"""Property tests: for random traces, every writer's output reads back to the same ops
(Chrome .json and .json.gz, RunMetadata .pb and .pbtxt, XSpace, event files, tfvis
pickles), the HTML page embeds every name without breaking out of its data, and random
or mutated bytes given to any reader give a trace or tracebridge's own error.

Example counts come from a Hypothesis profile (tests/conftest.py): "ci" by default,
"fuzz" under ``make fuzz`` (TRACEBRIDGE_HYPOTHESIS_PROFILE=fuzz).

Properties whose reading goes through the protobuf wire decoder draw the decoder as one more
random choice (``decoders``: the C loop where built, and numpy alone), so both are tested
with no more examples.
"""

from __future__ import annotations

import base64
import json
import random
import re
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tracebridge
from tests.conftest import CORPUS, HYPOTHESIS_PROFILE, reading_with, wire_decoders
from tests.helpers import malformed
from tracebridge.model.accelerator import busy_ns
from tracebridge.model import lanes
from tracebridge.model.builder import TraceBuilder

names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=24).filter(lambda s: s.strip() == s and ", " not in s
                                                  and " = " not in s and "(" not in s and ")" not in s
                                                  and not s.startswith("^") and "\n" not in s)
hostile = st.sampled_from(["</script>", "<img src=x onerror=alert(1)>", 'quote"d', "naïve/ünïcode", "tab\there"])
op_names = st.one_of(names, hostile)
# Names that would end or confuse an HTML page's script elements if embedded raw.
html_hostile = st.sampled_from(["</script>", "</SCRIPT ", "</script\t>", "<!--", "-->", "<script>", "]]>",
                                "</style>", "\u2028\u2029", "<\\/script>", "&lt;/script&gt;", "\\u003c",
                                "\x00nul", "\ufeff", "'\"`", "${x}"])
html_names = st.one_of(st.text(min_size=1, max_size=30), html_hostile,
                       st.lists(html_hostile, min_size=2, max_size=4).map("".join))
decoders = st.sampled_from(wire_decoders())
devices = st.sampled_from(["/job:localhost/replica:0/task:0/device:CPU:0",
                           "/job:worker/replica:0/task:1/device:GPU:0", "/host:CPU"])


@st.composite
def traces(draw, op_names=op_names):
    builder = TraceBuilder({"source_format": "generated"})
    step_count = draw(st.integers(1, 3))
    base = 1_700_000_000_000_000_000
    made = []
    for step_number in range(step_count):
        step = builder.step(step_number)
        for _ in range(draw(st.integers(1, 12))):
            name = draw(op_names)
            kernel = draw(st.sampled_from(["MatMul", "_MklMatMul", "AddV2", "NoOp", "Conv2D"]))
            start = base + draw(st.integers(0, 10**9))
            duration = draw(st.integers(0, 10**7))
            inputs = tuple(draw(st.lists(st.sampled_from(made), max_size=3))) if made else ()
            device = builder.device(draw(devices))
            builder.add_op(name=name, op_type=kernel, start_ns=start, end_ns=start + duration,
                           device=device, inputs=inputs, step=step, flags=1 | 8)
            made.append(name)
    return builder.build()


def op_keys(trace):
    return sorted((o.name, o.kernel, o.start_ns, o.end_ns, o.inputs, o.device) for o in trace.records())


common = settings(settings.get_profile(HYPOTHESIS_PROFILE))


@common
@given(traces())
def test_chrome_round_trip(trace):
    with tempfile.TemporaryDirectory() as folder:
        for name in ("t.json", "t.json.gz"):
            path = Path(folder) / name
            trace.save(path, memory=True)
            again = tracebridge.load(path)
            assert op_keys(again) == op_keys(trace)
            assert [s.number for s in again.steps] == [s.number for s in trace.steps]


@common
@given(traces(), decoders)
def test_run_metadata_round_trip(trace, decoder):
    # StepStats gives the node name "RecvTensor" to the RPC layer's records, whose labels the
    # reader parses as transfers: an op of that name is one by definition there.
    assume(all(op.name != "RecvTensor" for op in trace.records()))
    with tempfile.TemporaryDirectory() as folder:
        for name in ("t.pb", "t.pbtxt"):
            path = Path(folder) / name
            # One run a file: several steps go to one file each, and together hold every op.
            written = trace.save(path, split_steps=True)
            assert len(written) == max(len(trace.steps), 1)
            with reading_with(decoder):
                again = sorted(key for file in written for key in op_keys(tracebridge.load(file)))
            assert again == op_keys(trace)


@common
@given(traces())
def test_filters_partition_ops(trace):
    total = sum(len(trace.filter(step=s.number)) for s in trace.steps)
    assert total == len(trace)
    devices = {d.name for d in trace.devices}
    assert sum(len(trace.filter(device=f"^{d}$")) for d in devices) == len(trace)


@common
@given(st.lists(st.tuples(st.integers(-10**12, 10**12), st.integers(0, 10**6)), min_size=1, max_size=60),
       st.booleans())
def test_busy_time_is_the_union_of_the_intervals(spans, scratch):
    # busy_ns pairs sorted starts with sorted ends; the union walked in start order,
    # one interval at a time, must give the same length.
    start = np.array([s for s, _ in spans], dtype=np.int64)
    end = start + np.array([d for _, d in spans], dtype=np.int64)
    union, reach = 0, None
    for s, e in sorted(zip(start.tolist(), end.tolist())):
        if reach is None or s > reach:
            union, reach = union + e - s, e
        elif e > reach:
            union, reach = union + e - reach, e
    given_start, given_end = start.copy(), end.copy()
    assert busy_ns(start, end, scratch=scratch) == union
    if not scratch:  # the caller's arrays are left as they were
        assert np.array_equal(start, given_start) and np.array_equal(end, given_end)


def _placed_one_at_a_time(readings, nested: bool) -> list[int]:
    """The rows nested_fit (``nested``) or first_fit must give, found the plain way: each
    interval on the lowest row where, in every reading, it nests in (nested_fit) or starts
    after (first_fit) everything of the row that has not ended before it starts."""
    rows: list[list[int]] = []
    placed = []
    for i in range(len(readings[0][0])):
        for k, members in enumerate(rows):
            if all(e[j] <= s[i] or (nested and e[i] <= e[j]) for s, e in readings for j in members):
                break
        else:
            k = len(rows)
            rows.append([])
        rows[k].append(i)
        placed.append(k)
    return placed


@common
@given(st.lists(st.tuples(st.integers(0, 80), st.integers(-3, 30)), min_size=1, max_size=50),
       st.lists(st.tuples(st.integers(2, 300), st.integers(0, 299)), max_size=2))
def test_sub_rows_are_those_placed_one_at_a_time(spans, roundings):
    """lanes.nested_fit and first_fit (numpy passes, then a loop over the few intervals that
    need one) against the plain placement, with other readings of the times as a viewer
    rounds the starts (each start to a grid, the duration kept)."""
    from tracebridge.model.lanes import first_fit, nested_fit
    spans = sorted(((s * 100, (s + d) * 100) for s, d in spans), key=lambda span: (span[0], -span[1]))
    start = np.array([s for s, _ in spans], dtype=np.int64)
    end = np.array([e for _, e in spans], dtype=np.int64)
    also = [((start + offset % grid) // grid * grid, (start + offset % grid) // grid * grid + end - start)
            for grid, offset in roundings]
    readings = [(start.tolist(), end.tolist())] + [(s.tolist(), e.tolist()) for s, e in also]
    placed = _placed_one_at_a_time(readings, nested=True)
    assert nested_fit(start, end, also).tolist() == placed  # the C loop where it is built
    assert lanes.nested_fit_numpy(start, end, also).tolist() == placed
    with mock.patch.object(lanes, "_KNOTS_AT_A_TIME", 3):  # a long lane's knots, found a few parts at a time
        assert lanes.nested_fit_numpy(start, end, also).tolist() == placed
    if (end >= start).all():
        assert first_fit(start, end, also).tolist() == _placed_one_at_a_time(readings, nested=False)


@st.composite
def close_ops(draw):
    """Ops as a viewer finds them hard to place: neighbours a few hundred ns apart or
    overlapping, at nanoseconds since the epoch of today; ops on a source's lane (an XSpace
    line) with children that end with them, a little before or after; transfers that
    overlap; steps that overlap."""
    builder = TraceBuilder({"source_format": "generated"})
    device = builder.device(draw(devices))
    line = builder.lane(device, "python")
    t = 1_795_842_827_258_000_000 + draw(st.integers(0, 999))
    for number in range(draw(st.integers(1, 2))):
        step = builder.step(number, start_ns=t + draw(st.integers(-500, 500)))
        for _ in range(draw(st.integers(1, 12))):
            duration = draw(st.integers(0, 3000))
            on_line = draw(st.booleans())
            builder.add_op(name="op", op_type="MatMul", start_ns=t, end_ns=t + duration, device=device, step=step,
                           **({"lane": line} if on_line else {}))
            for _ in range(draw(st.integers(0, 2)) if on_line else 0):
                child_start = t + draw(st.integers(0, duration))
                child_end = max(child_start, t + duration + draw(st.integers(-300, 300)))
                builder.add_op(name="child", op_type="AddV2", start_ns=child_start, end_ns=child_end, device=device,
                               lane=line, step=step)
            if draw(st.integers(0, 5)) == 0:
                recv = builder.add_op(name="RecvTensor", op_type="RecvTensor", start_ns=t + draw(st.integers(0, 500)),
                                      end_ns=t + duration + draw(st.integers(0, 900)), device=device, step=step)
                builder.add_row("transfers", op=recv, bytes=64, rate_bps=1e6, src="/job:ps/task:0",
                                dst="/job:worker/task:0", tensor="t")
            t += duration + draw(st.integers(-400, 600))
    return builder.build()


@common
@given(close_ops())
def test_chrome_threads_nest_as_viewers_read_them(trace):
    """Every thread of the Chrome trace holds X events that nest or are disjoint: as
    written, as Perfetto reads the decimals and as a reader of doubles does
    (tests/helpers/chrome_nesting.py); no device thread has its process's pid as tid."""
    from tests.helpers import chrome_nesting
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        trace.save(path)
        events = chrome_nesting.events(path)
        assert chrome_nesting.overlaps_in_any_reading(events) == {}
        assert not [e for e in events if e.get("ph") == "X" and e["pid"] not in ("0", "1") and e["tid"] == e["pid"]]
        again = tracebridge.load(path)
        assert op_keys(again) == op_keys(trace)


@common
@given(traces())
def test_summary_accounts_for_all_time(trace):
    summary = trace.summary()
    assert sum(r["total_ns"] for r in summary.by_op) == summary.total_ns
    assert sum(r["count"] for r in summary.by_device) == summary.op_count == len(trace)


def test_profile_counts():
    assert common.max_examples == settings.get_profile(HYPOTHESIS_PROFILE).max_examples


def _without_step_markers(trace, original):
    """The XSpace writer adds a ``train`` event per step on every host line (step markers,
    read back as ops); ops of the original named ``train`` stay."""
    steps = {(s.start_ns, s.end_ns) for s in trace.steps}
    kept = Counter((o.start_ns, o.end_ns) for o in original.records() if o.name == "train")
    ops = []
    for op in trace.records():
        key = (op.start_ns, op.end_ns)
        if op.name == "train" and key in steps:
            if not kept[key]:
                continue
            kept[key] -= 1
        ops.append(op)
    return ops


def _on_host_plane(device) -> bool:
    """Where the XSpace writer puts a device's ops: accelerator planes hold /device:GPU:N
    (TPU) devices and TF1's tracer streams; TF1's own GPU device records dispatches, which
    run on host threads."""
    return device.stream is None and not (device.name.startswith("/device:") and device.type not in (None, "CPU"))


@common
@given(traces(), decoders)
def test_xspace_round_trip(trace, decoder):
    """XSpace keeps every op's times and type, host ops' names (``name:Type`` events; a
    name with a colon is not one), and the steps; accelerator kernels are named by type."""
    from tracebridge.writers.tensorboard import write_tensorboard_xplane
    with tempfile.TemporaryDirectory() as folder, reading_with(decoder):
        again = tracebridge.load(write_tensorboard_xplane(trace, folder, run="run", host="host"))
    ops = _without_step_markers(again, trace)
    assert sorted((o.start_ns, o.end_ns, o.op_type) for o in ops) == \
        sorted((o.start_ns, o.end_ns, o.op_type) for o in trace.records()), \
        ([(o.name, o.op_type, o.device) for o in trace.records()], trace.steps)
    host = lambda t, o: not t.devices[t.ops["device"][o.index]].name.startswith("/device:")  # noqa: E731
    assert sorted((o.name, o.start_ns) for o in ops if host(again, o) and ":" not in o.name) == \
        sorted((o.name, o.start_ns) for o in trace.records()
               if ":" not in o.name and _on_host_plane(trace.devices[trace.ops["device"][o.index]]))
    # The reader orders steps by time (their markers'); the trace had them in any order.
    assert sorted((s.number, s.start_ns, s.end_ns) for s in again.steps) == \
        sorted((s.number, s.start_ns, s.end_ns) for s in trace.steps)


@common
@given(traces(), decoders)
def test_event_file_round_trip(trace, decoder):
    from tracebridge.writers.tensorboard import write_events
    with tempfile.TemporaryDirectory() as folder, reading_with(decoder):
        path = Path(folder) / "events.out.tfevents.1.host"
        write_events(trace, path)
        again = tracebridge.load(path)
    assert op_keys(again) == op_keys(trace)
    assert [s.number for s in again.steps] == [s.number for s in trace.steps]


@common
@given(traces(), decoders)
def test_tfvis_pickle_round_trip(trace, decoder):
    from tracebridge import protos
    from tracebridge.compat.tfvis import Timeline
    run_metadata = protos.RunMetadata.FromString(trace.to_run_metadata().SerializeToString())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.pickle"
        Timeline(run_metadata=run_metadata).to_pickle(path)
        with reading_with(decoder):
            again = tracebridge.load(path)
    assert op_keys(again) == op_keys(trace)


def _embedded(document: str, prefix: str = "tb0") -> tuple[dict, list[str]]:
    """The page's meta object and its op names in page order, decoded as the page does."""
    meta_text = re.search(rf'<script type="application/json" id="{prefix}-meta"[^>]*>(.*?)</script>',
                          document, re.S).group(1)
    meta = json.loads(meta_text)

    def block(key: str) -> bytes:
        text = re.search(rf'<script type="application/octet-stream" id="{prefix}-{key}">(.*?)</script>',
                         document, re.S).group(1)
        data = base64.b64decode(text, validate=True)
        return zlib.decompress(data, -15) if key in meta["deflated"] else data

    strings = json.loads(block("strings"))
    dtype = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "f64": "<f8"}[meta["columns"]["name"]["dtype"]]
    ids = np.frombuffer(block("name"), dtype=dtype).astype(np.int64)
    return meta, [strings[i] for i in ids.tolist()]


@common
@given(traces(op_names=html_names))
def test_html_embeds_every_name_safely(trace):
    """No op name ends a script element or opens a comment; the embedded data decodes
    back to the same names."""
    from tracebridge.writers.html import html_document
    document = html_document(trace)
    opened = len(re.findall(r"<script\b", document, re.I))
    assert opened == len(re.findall(r"</script", document, re.I))
    assert "<!--" not in document and "]]>" not in document
    assert document.isascii()
    meta, shown = _embedded(document)
    assert meta["op_count"] == len(trace)
    assert sorted(shown) == sorted(o.name for o in trace.records())


# --- any bytes, to any reader -------------------------------------------------------------
SUFFIXES = ["x.pb", "x.pbtxt", "x.json", "x.json.gz", "x.xplane.pb", "x.pickle", "events.out.tfevents.1.h",
            "x.bin"]
SEEDS = malformed.seeds(CORPUS if CORPUS.is_dir() else None)
_CONTEXTS: dict[int, malformed.Context] = {}


def _assert_contract(case: malformed.Case, decoder: str) -> None:
    with tempfile.TemporaryDirectory() as folder, reading_with(decoder):
        outcome = malformed.run_case(case, Path(folder), timeout=30.0 if case.format == "notebook" else 10.0)
    assert outcome.status != "bug", f"{case.name}: {outcome.detail}"


@common
@given(st.binary(min_size=1, max_size=4096), st.sampled_from(SUFFIXES), decoders)
def test_random_bytes_give_a_trace_or_our_error(data, filename, decoder):
    _assert_contract(malformed.Case(f"random/{filename}", "random", "random", filename, data), decoder)


@pytest.mark.slow  # the longest of the check tier (every reader on many mutated files)
@common
@given(st.integers(0, len(SEEDS) - 1), st.data(), decoders)
def test_mutated_files_give_a_trace_or_our_error(seed_index, data, decoder):
    seed = SEEDS[seed_index]
    context = _CONTEXTS.setdefault(seed_index, malformed.Context(seed))
    kind = data.draw(st.sampled_from(sorted(malformed.kinds_for(seed.format))), label="kind")
    variant = data.draw(st.integers(0, 63), label="variant")
    rng = random.Random(data.draw(st.integers(0, 2**32), label="rng"))
    try:
        case = malformed.make_case(context, kind, variant, rng)
    except malformed.NotApplicable:
        assume(False)
    _assert_contract(case, decoder)
