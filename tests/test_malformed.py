"""The malformed corpus: every reader, and the codemod's notebook reader, on truncated,
flipped, mistyped, oversized, deeply nested and duplicated inputs (tests/helpers/malformed.py).

Each case must give a usable trace (or a migration) or the library's own error, whose
message is one line naming the file; never another exception, a hang or an allocation far
beyond the input's size (``malformed.memory_limit``). A sample goes through the CLI too
(``main`` in this process): exit status 2, one ``error:`` line naming the file, and nothing
left behind.

``make fuzz`` (tests/fuzz.py) runs many more random cases from the same generator.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import CORPUS, run_cli
from tests.helpers import malformed

SEEDS_FROM = CORPUS if CORPUS.is_dir() else None  # generated seeds alone without the corpus
# Seconds a case may take: CI machines are slow, the cases are small (the slowest, a
# notebook cell of 3,000 blank lines through LibCST, takes about 2 s with tracemalloc on).
READ_LIMIT, NOTEBOOK_LIMIT = 10.0, 30.0
GROUPS = malformed.groups()
# Groups that take more than a few seconds (measured on 2 cores): `make test` runs them,
# `make check` leaves them out.
SLOW_GROUPS = {("notebook", "notebook_cells"), ("notebook", "notebook_code_depth"), ("notebook", "flip_byte"),
               ("xspace", "repeat_many"), ("runmetadata", "repeat_many"), ("events", "event_record"),
               ("events", "run_metadata"), ("chrome", "duplicate_event"), ("chrome", "json_sources"),
               ("chrome_gz", "gz_bomb"), ("chrome_gz", "gz_of"), ("pbtxt", "text_duplicate")}


@pytest.mark.parametrize("fmt,kind", [pytest.param(fmt, kind, id=f"{fmt}/{kind}",
                                                   marks=[pytest.mark.slow] if (fmt, kind) in SLOW_GROUPS else [])
                                      for fmt, kind in GROUPS])
def test_malformed_inputs_give_a_trace_or_our_error(fmt, kind, tmp_path):
    failures, count = [], 0
    for case in malformed.ci_cases(SEEDS_FROM, fmt=fmt, kind=kind):
        count += 1
        outcome = malformed.run_case(case, tmp_path, timeout=NOTEBOOK_LIMIT if fmt == "notebook" else READ_LIMIT)
        if outcome.status == "bug":
            failures.append(f"{case.name}: {outcome.detail}\n  input: {case.folder(tmp_path)}")
            continue
        shutil.rmtree(case.folder(tmp_path))  # failing inputs stay, for reproduction
    if not count:
        pytest.skip(f"no seed of {fmt} has anything for {kind} to work on")
    assert not failures, f"{len(failures)} of {count} cases failed:\n" + "\n".join(failures)


def _cli_groups() -> list[tuple[str, str]]:
    """Per format: a truncation, then each of its own kinds; the protobuf kinds, which are
    the same code for every protobuf format, on RunMetadata, and two on XSpace."""
    chosen = []
    for fmt in malformed.FORMATS:
        chosen.append((fmt, "truncate"))
        for kind in malformed.kinds_for(fmt):
            if kind in malformed.BYTE_KINDS:
                continue
            if kind in malformed.PROTO_KINDS and fmt != "runmetadata" and \
                    (fmt, kind) not in (("xspace", "huge_length"), ("xspace", "wire_type")):
                continue
            chosen.append((fmt, kind))
    return chosen


def _first_error_cases(tmp_path) -> list[malformed.Case]:
    """One case per CLI group that the library rejects, found by reading in-process."""
    chosen = []
    for fmt, kind in _cli_groups():
        for case in malformed.ci_cases(SEEDS_FROM, fmt=fmt, kind=kind):
            outcome = malformed.run_case(case, tmp_path / "probe", timeout=30.0, measure_memory=False,
                                         check_output=False)
            shutil.rmtree(case.folder(tmp_path / "probe"), ignore_errors=True)
            if outcome.status == "error" and len(case.data) < 4 * malformed.MB:
                chosen.append(case)
                break
    return chosen


@pytest.mark.slow
def test_cli_sample_exits_2_with_one_line(tmp_path):
    cases = _first_error_cases(tmp_path)
    assert {case.format for case in cases} == set(malformed.FORMATS)

    problems = []
    for index, case in enumerate(cases):  # in this process (test_cli runs the real one)
        folder = tmp_path / f"cli{index}"
        path = case.write(folder)
        out_dir = folder / "out"
        out_dir.mkdir()
        if case.format == "notebook":
            result = run_cli("migrate", "--quiet", path)
        else:
            result = run_cli("convert", path, out_dir / "out.json")
        lines = result.stderr.splitlines()
        errors = [line for line in lines if line.startswith("error: ")]
        expected_lines = 2 if case.format == "notebook" else 1  # migrate adds its tally
        if (result.returncode != 2 or len(lines) != expected_lines or len(errors) != 1
                or str(path) not in errors[0] or "Traceback" in result.stderr):
            problems.append(f"{case.name}: exit {result.returncode}, stderr {result.stderr!r}")
        left = sorted(p.name for p in out_dir.iterdir())
        left += [p.name for p in path.parent.iterdir() if p.name.startswith(".tracebridge-")]
        if left:
            problems.append(f"{case.name}: left behind {left}")
    assert not problems, "\n".join(problems)


def test_malformed_logdirs_name_the_bad_file(tmp_path):
    """Folders: a profile run whose XSpace is cut short or is a folder, a folder of event
    files with a damaged one. The error names the file inside, on one line."""
    import tracebridge
    from tracebridge import TraceFormatError
    from tracebridge.writers.tensorboard import write_events, write_tensorboard_xplane

    trace = malformed.small_trace()
    good = write_tensorboard_xplane(trace, tmp_path / "logdir", run="2024_01_01_00_00_00", host="a")
    damaged = tmp_path / "logdir" / "plugins" / "profile" / "2024_01_01_00_00_00" / "b.xplane.pb"
    damaged.write_bytes(open(good, "rb").read()[:-5])
    not_a_file = tmp_path / "logdir2" / "plugins" / "profile" / "run" / "c.xplane.pb"
    not_a_file.mkdir(parents=True)
    events = tmp_path / "events"
    events.mkdir()
    write_events(trace, events / "events.out.tfevents.1.a")
    (events / "events.out.tfevents.2.b").write_bytes((events / "events.out.tfevents.1.a").read_bytes()[:40] + b"\xff" * 20)
    for folder, bad in ((tmp_path / "logdir", damaged), (tmp_path / "logdir2", not_a_file),
                        (events, events / "events.out.tfevents.2.b")):
        with pytest.raises(TraceFormatError) as info:
            tracebridge.load(folder)
        message = str(info.value)
        assert str(bad) in message and len(message.splitlines()) == 1, message
