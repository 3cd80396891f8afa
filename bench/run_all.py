"""Every benchmark of the earlier issues against its anchor, in one run: bench/RESULTS.md.

``make bench`` runs this. The bench scripts run one after another, each in its own
subprocess (two at once would share the 2 cores they time), and each measures its anchor
in the same run on the same input:

* bench_stepstats.py: StepStats -> Chrome JSON vs TF's timeline.py (issue 2);
* bench_compat_timeline.py: compat.timeline vs TF's timeline.py (issue 6, no target);
* bench_xspace.py: XSpace -> Chrome JSON vs xprof's trace_viewer converter (issue 3);
* bench_capture.py: capture overhead vs bare tf.profiler start/stop and vs no tracing (issue 3);
* bench_hosts.py: one host's summary vs xprof's framework_op_stats, and a 16-host logdir
  summarized host by host in process and on 2 Dask workers (issue 18);
* bench_html.py: the HTML view's first draw in headless Chromium, redraws and file size
  vs timeline.py's JSON (issue 4);
* bench_perfetto.py: XSpace -> .pftrace vs tracebridge's Chrome JSON writer, a 10M-event
  logdir host by host, and both in the Perfetto UI (issue 26);
* bench_peers.py: summary vs xprof-rs (a cold server, the ``bench`` extra) and xprof, convert
  to .pftrace vs to JSON, in paired runs with median ratios, and one 10M-event XSpace to
  .pftrace (issue 35).

Each writes its result rows (``--json``, see bench/targets.py); this collects them and
writes RESULTS.md atomically: the date (UTC), the machine, the command, one table of
medians, peak memory and ratios, every target of the earlier issues as met or not with its
figure, and notes. A benchmark that fails is reported as failed, the others still run, and
the exit status is 1. No timing is asserted anywhere in CI: tests/test_bench.py runs
``--quick`` and checks the file's structure only.

``--quick`` is a smoke run of the whole pipeline (tiny inputs, one repeat, about 1-2
minutes); its figures mean nothing and no target is judged. It writes
bench/out/RESULTS-quick.md, never the committed file; so does ``--only`` (a subset) with
bench/out/RESULTS-partial.md.

    python bench/run_all.py                    # the full run (about 10 minutes; needs ~15 GB RAM)
    python bench/run_all.py --quick
    python bench/run_all.py --only xspace,html
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from measure import compile_package, machine  # noqa: E402
from targets import INTERACTIVE_REDRAW_MS, TARGETS  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COMMITTED = HERE / "RESULTS.md"
OUT = HERE / "out"


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    full: tuple[str, ...]  # the issues' setups; repeats as in the earlier closing notes
    quick: tuple[str, ...]  # tiny, one repeat: exercises every path, measures nothing


BENCHMARKS = [
    Benchmark("stepstats", "bench_stepstats.py", ("--sizes", "100000,1000000", "--repeat", "5"),
              # a low --tf-memory-max so that the quick run also takes the "timeline.py without memory" path
              ("--sizes", "2000,20000", "--repeat", "1", "--tf-memory-max", "2000")),
    Benchmark("compat_timeline", "bench_compat_timeline.py", ("--size", "100000", "--repeat", "3"),
              ("--size", "2000", "--repeat", "1")),
    Benchmark("xspace", "bench_xspace.py", ("--ops", "2000", "--steps", "1500", "--repeat", "3"),
              ("--ops", "30", "--steps", "20", "--repeat", "1")),
    Benchmark("capture", "bench_capture.py", ("--steps", "100", "--rounds", "9", "--processes", "3"),
              ("--steps", "10", "--rounds", "1", "--processes", "1")),
    Benchmark("hosts", "bench_hosts.py", ("--repeat", "3", "--hosts", "16"),
              ("--ops", "30", "--steps", "20", "--repeat", "1", "--hosts", "2")),
    Benchmark("html", "bench_html.py", ("--sizes", "10000,100000,1000000", "--repeat", "3", "--tf-max", "100000"),
              ("--sizes", "1000,5000", "--repeat", "1", "--tf-max", "1000")),
]
BENCHMARKS.append(Benchmark("perfetto", "bench_perfetto.py", ("--repeat", "3", "--ui"),
                            ("--ops", "30", "--steps", "20", "--repeat", "1", "--hosts", "2")))
BENCHMARKS.append(Benchmark("peers", "bench_peers.py", ("--pairs", "5", "--large-repeat", "3"),
                            ("--ops", "30", "--steps", "20", "--pairs", "1", "--large-steps", "40",
                             "--large-repeat", "1")))
BENCHMARKS.append(Benchmark("findings_long", "bench_findings_long.py", ("--repeat", "3"),
                            ("--ops", "30", "--steps", "20", "--repeat", "1")))
BY_NAME = {benchmark.name: benchmark for benchmark in BENCHMARKS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 repeat: a smoke run (figures mean nothing)")
    parser.add_argument("--only", type=lambda text: text.split(","),
                        help=f"comma-separated subset of: {', '.join(BY_NAME)}")
    parser.add_argument("--results", type=Path, help="the Markdown file to write (default: bench/RESULTS.md for "
                        "the full run, bench/out/RESULTS-quick.md or RESULTS-partial.md otherwise)")
    parser.add_argument("--json", type=Path, help="all result rows as JSON (default: beside the results, or "
                        "bench/out/RESULTS.json for the full run)")
    parser.add_argument("--work", type=Path, help="each benchmark's rows and log (default: bench/out/run_all*/)")
    parser.add_argument("--timeout", type=float, help="seconds per benchmark before it is killed (default: none)")
    args = parser.parse_args(argv)

    chosen = BENCHMARKS if not args.only else [b for b in BENCHMARKS if all(map(_known, args.only))
                                               and b.name in args.only]
    partial = len(chosen) < len(BENCHMARKS)
    suffix = "-quick" if args.quick else "-partial" if partial else ""
    results = args.results or (COMMITTED if not suffix else OUT / f"RESULTS{suffix}.md")
    if suffix and results.resolve() == COMMITTED.resolve():
        parser.error(f"a {'quick' if args.quick else 'partial'} run never writes {COMMITTED.relative_to(ROOT)}")
    rows_json = args.json or (OUT / "RESULTS.json" if results.resolve() == COMMITTED.resolve()
                              else results.with_suffix(".json"))
    work = args.work or OUT / f"run_all{suffix}"
    work.mkdir(parents=True, exist_ok=True)

    # A terminated run (make killed, a CI timeout) must still stop the benchmark in flight:
    # SIGTERM becomes an exception, so the finally clause in _run kills its process group.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    compile_package()
    started, begun = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    ran = []
    for benchmark in chosen:
        ran.append(_run(benchmark, quick=args.quick, work=work, timeout=args.timeout))
    seconds = time.monotonic() - begun

    text = render(ran, quick=args.quick, partial=partial, started=started, seconds=seconds,
                  command=_command(argv), machine=f"{machine()}{_chromium()}")
    _write_atomically(results, text)
    _write_atomically(rows_json, json.dumps([row for run in ran for row in run["rows"]], indent=2))
    print(f"\n{text}")
    print(f"wrote {_shown(results)} and {_shown(rows_json)}; logs in {_shown(work)}")
    failed = [run["name"] for run in ran if run["failed"]]
    if failed:
        print(f"FAILED: {', '.join(failed)} (see the logs)", file=sys.stderr)
    return 1 if failed else 0


def _known(name: str) -> bool:
    if name not in BY_NAME:
        raise SystemExit(f"unknown benchmark {name!r}; choose from {', '.join(BY_NAME)}")
    return True


def _run(benchmark: Benchmark, *, quick: bool, work: Path, timeout: float | None) -> dict:
    """Run one bench script in its own subprocess (and process group), echo its output and
    keep it in a log; return its rows, or why it failed."""
    rows_path, log_path = work / f"{benchmark.name}.json", work / f"{benchmark.name}.log"
    if rows_path.exists():
        rows_path.unlink()  # a stale file must not pass for this run's rows
    arguments = [*(benchmark.quick if quick else benchmark.full), "--json", str(rows_path)]
    shown = " ".join(["bench/" + benchmark.script, *benchmark.quick] if quick else
                     ["bench/" + benchmark.script, *benchmark.full])
    print(f"\n=== {benchmark.name}: {shown}", flush=True)
    tail: deque[str] = deque(maxlen=30)
    begun = time.monotonic()
    process = subprocess.Popen([sys.executable, str(HERE / benchmark.script), *arguments], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                               env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    killed = []
    timer = None
    if timeout:
        timer = _Killer(process, timeout, killed)
        timer.start()
    try:
        with open(log_path, "w") as log:
            for line in process.stdout:
                sys.stdout.write(line)
                log.write(line)
                tail.append(line)
        returncode = process.wait()
    finally:
        if timer:
            timer.cancel()
        if process.poll() is None:  # interrupted: leave no measured process (13 GB at 1M) behind
            _kill_group(process)
            process.wait()
    seconds = time.monotonic() - begun
    failed = None
    rows = []
    if killed:
        failed = f"killed after the {timeout:.0f} s timeout"
    elif returncode:
        failed = f"exit status {returncode}"
    else:
        try:
            rows = json.loads(rows_path.read_text())
        except (OSError, ValueError) as error:
            failed = f"no result rows ({error})"
    if failed:
        print(f"=== {benchmark.name}: FAILED ({failed})", flush=True)
    return {"name": benchmark.name, "command": shown, "seconds": seconds, "rows": rows, "failed": failed,
            "tail": "".join(tail)}


class _Killer:
    """Kills a benchmark's process group after ``timeout`` seconds."""

    def __init__(self, process, timeout: float, killed: list):
        import threading
        self._timer = threading.Timer(timeout, self._kill)
        self._process, self._killed = process, killed

    def _kill(self) -> None:
        self._killed.append(True)
        _kill_group(self._process)

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def _kill_group(process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def render(ran: list[dict], *, quick: bool, partial: bool, started: datetime.datetime, seconds: float,
           command: str, machine: str) -> str:
    """RESULTS.md's text from the runs' rows."""
    rows = [row for run in ran for row in run["rows"]]
    lines = ["# Benchmarks", ""]
    if quick:
        lines += ["**Quick smoke run** (`--quick`): tiny inputs and one repeat, to check that every benchmark "
                  "runs and reports. Its figures mean nothing, and no target is judged.", ""]
    elif partial:
        lines += [f"**Partial run**: only {', '.join(run['name'] for run in ran)}.", ""]
    lines += [
        "Every benchmark of the earlier issues against its anchor, measured in the same run on the same input.",
        "",
        f"- **Date:** {started:%Y-%m-%d %H:%M} UTC (the run took {_duration(seconds)})",
        f"- **Machine:** {machine}",
        f"- **Command:** {command}",
        "",
        "## Results",
        "",
        "Medians; times in the unit given, peak memory in MiB (peak RSS of the measured process, "
        "from `wait4`). *anchor / tracebridge* above 1 means tracebridge is faster (or its file smaller).",
        "",
        "| # | benchmark | input | unit | tracebridge | peak MiB | anchor | anchor value | anchor peak MiB "
        "| anchor / tracebridge | target | met? |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, row in enumerate(rows, 1):
        lines.append("| " + " | ".join([
            str(number), f"{row['benchmark']} (issue {row['issue']})", row["input"], row["unit"],
            _number(row["tracebridge"]), _number(row["tracebridge_peak_mib"]), row["anchor_name"] or "—",
            _number(row["anchor"]), _number(row["anchor_peak_mib"]), _number(row["ratio"]),
            row["target"] or "—", _met(row["met"])]).replace("\n", " ") + " |")
    for run in ran:
        if run["failed"]:
            lines.append(f"| — | **{run['name']} FAILED** ({run['failed']}) |" + " — |" * 10)

    lines += ["", "## Targets", "",
              "Every performance target the earlier issues set, quoted as the issue states it.", "",
              "| target | issue | as the issue states it | measured on | figure | met? |",
              "|---|---|---|---|---|---|"]
    for target in TARGETS:
        lines.append(_target_line(target, rows, ran, quick))
    lines += ["", "Issues 5 and 6 set no performance target. Issue 6's `compat.timeline` is measured against "
              "TF's `timeline.py` for reference (its rows above have no target).", "",
              f"T7 gives no number: it is judged here as one synchronous redraw of every panel after a zoom "
              f"or a pan within one 60 Hz frame ({INTERACTIVE_REDRAW_MS:.1f} ms). That reading is ours, "
              f"not the issue's."]

    lines += ["", "## Notes", ""] + [f"- {note}" for note in _notes(ran, rows)]
    lines += ["", "### Row notes", ""]
    lines += [f"{number}. {row['notes']}" for number, row in enumerate(rows, 1) if row["notes"]]
    lines += ["", "### Benchmarks run", ""]
    for run in ran:
        count = len(run["rows"])
        state = f"FAILED ({run['failed']})" if run["failed"] else f"{count} row{'s' if count != 1 else ''}"
        lines.append(f"- `{run['command']}`: {_duration(run['seconds'])}, {state}")
        if run["failed"]:
            tail = run["tail"].rstrip().splitlines() or ["(no output)"]
            lines += ["", "  ```", *[f"  {line}" for line in tail], "  ```", ""]
    return "\n".join(lines) + "\n"


def _target_line(target, rows: list[dict], ran: list[dict], quick: bool) -> str:
    judged = [row for row in rows if row["target"] == target.id]
    quote = f"“{target.text}”"
    if judged:
        row = judged[0]
        where = f"{row['benchmark']}, {row['input']}"
        met = _met(row["met"]) if row["met"] is not None else "not judged"
        return f"| {target.id} | {target.issue} | {quote} | {where} | {row['figure'] or '—'} | {met} |"
    script = target.bench.removesuffix(".py").removeprefix("bench_")
    failed = [run for run in ran if run["name"] == script and run["failed"]]
    if failed:
        why = f"not measured: {target.bench} failed"
    elif script not in {run["name"] for run in ran}:
        why = f"not measured: {target.bench} not run"
    elif quick:
        why = "not judged: quick run"
    else:
        why = "not judged: its setup was not run"
    return f"| {target.id} | {target.issue} | {quote} | {target.setup} (not in this run) | — | {why} |"


def _notes(ran: list[dict], rows: list[dict]) -> list[str]:
    repeats = "; ".join(f"{run['name']}: `{run['command'].split(' ', 1)[1] if ' ' in run['command'] else ''}`"
                        for run in ran)
    notes = [
        "Noise: a shared virtual machine with 2 cores. Every measured command is a fresh process, run one "
        "after another, never two at once; figures are medians of the repeats each benchmark was given "
        f"({repeats}). A few percent between runs is normal: earlier runs of the capture benchmark gave "
        "+1.0% to +2.6% on the same code.",
        "Times include the interpreter's start and imports unless a row's note says otherwise. Peak MiB is "
        "the largest resident set of the measured process and the children it waited for (`ru_maxrss`): "
        "MiB = 2^20 bytes; file sizes (unit MB) are 10^6 bytes.",
    ]
    unmemoried = [row["input"].split(" (")[0] for row in rows if row["anchor_name"] == "timeline.py, no memory"]
    if unmemoried:
        notes.append(f"StepStats at {', '.join(unmemoried)}: timeline.py runs **without** `show_memory`, because "
                     "with it 1M nodes need more than 24 GB (issue 2: it ran out of 24 GB), so that anchor does "
                     "less work than tracebridge, which also writes the memory counters.")
    if any(row["benchmark"].startswith("StepStats") for row in rows):
        notes.append("StepStats: timeline.py's value is its `generate_chrome_trace_format` call alone (TF's "
                     "import and the parse are left out, see the row notes) against tracebridge's whole "
                     "process, so the ratio does not flatter tracebridge.")
    if any((row["anchor_name"] or "").endswith("estimated") for row in rows):
        notes.append("HTML file size: above the largest size timeline.py really runs for, its JSON size is "
                     "estimated by linear scaling (rows marked *estimated*).")
    if any(row["benchmark"] == "Capture overhead" for row in rows):
        notes.append("Capture overhead: both sides run interleaved in the same processes, so there is no peak "
                     "memory per side; the ratio is anchor / tracebridge as everywhere (below 1 = overhead).")
    return notes


def _met(met: bool | None) -> str:
    return "—" if met is None else "**met**" if met else "**NOT met**"


def _number(value) -> str:
    """Three significant digits (more above 1,000): enough for a benchmark, and the ratios
    stay checkable from the printed values."""
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _command(argv: list[str] | None) -> str:
    """The command as typed from the repository (no machine-specific paths)."""
    arguments = sys.argv[1:] if argv is None else argv
    python = Path(sys.executable)
    try:
        python = python.relative_to(ROOT)
    except ValueError:
        python = Path("python")
    text = f"`{shlex.join([str(python), 'bench/run_all.py', *arguments])}`"
    if os.environ.get("MAKELEVEL") and not arguments:
        text = f"`make bench`, which runs {text}"
    return text


def _chromium() -> str:
    """The browser the HTML view was timed in (bench_html.py uses Debian's chromium)."""
    path = shutil.which("chromium")
    if not path:
        return ""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return f", {out.split(' built')[0].strip()}" if out.strip() else ""


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(scratch, 0o644)  # mkstemp's 0600 would make the committed file private
        os.replace(scratch, path)
    except BaseException:
        os.unlink(scratch)
        raise


if __name__ == "__main__":
    raise SystemExit(main())
