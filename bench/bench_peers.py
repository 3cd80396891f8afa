"""The read floor against the peers, in one command (issue 35): paired runs, median ratios.

The input is the real TF 2.21 profile of bench/gen_xspace.py (2,000 ops x 1,500 steps,
about 49 MB and 3M events). Every run is a fresh process; each pair runs the two sides
one right after the other (their order alternates from pair to pair), and a ratio is the
median of the pairs' ratios, so that a busy moment of this shared machine hits both sides
of a pair alike.

* summary against xprof-rs 0.1.3 (the ``bench`` extra: XProf's backend in Rust):
  ``tracebridge summary IN --json`` against a cold ``xprof-rs --logdir`` server on a copy
  of the file, answering one ``framework_op_stats`` request (its wall time from the
  server's start to the response, and its peak RSS). Target: <= 0.35x its time and
  <= 0.3x its peak memory.
* summary against xprof (Python): ``xspace_to_tool_data([copy], "framework_op_stats")``
  in the same pairs (a triple, in fact). Target: <= 0.12x its time.
* ``tracebridge convert IN OUT.pftrace`` against ``tracebridge convert IN OUT.json`` (the
  Chrome JSON writer), whole processes. Target: <= 0.4x its time.
* one XSpace of 10M events (``--large-steps`` steps of the same ops, one file, one host)
  converted to ``.pftrace``: peak RSS <= 1 GB (it is read and written a window of whole
  steps at a time, about 1M events each: readers/xspace_windows.py, writers/perfetto_stream.py).

    python bench/bench_peers.py [--pairs 5] [--large-repeat 3] [--skip-xprof] [--parts summary,convert,large]
                                [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from measure import Run, compile_package, machine, python, run_once, tracebridge_command, xspace_profile  # noqa: E402
from targets import result_row, verdict, write_rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_INPUT = (2000, 1500)
LARGE_INPUT = (2000, 5000)  # 10.1M events
XPROF_RS_VERSION = "0.1.3"
SUMMARY_VS_RS = {"time": 0.35, "memory": 0.3}
SUMMARY_VS_XPROF = 0.12
PFTRACE_VS_JSON = 0.4
LARGE_PEAK_MIB = 1000 * 1000 * 1000 / 2**20  # 1 GB
XPROF = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "framework_op_stats", {})
print(len(data) if data else 0)
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--large-steps", type=int, default=LARGE_INPUT[1],
                        help="steps of the large XSpace (0: skip it)")
    parser.add_argument("--large-repeat", type=int, default=3)
    parser.add_argument("--skip-xprof", action="store_true", help="leave out xprof (Python), the slowest side")
    parser.add_argument("--parts", type=lambda text: set(text.split(",")), default={"summary", "convert", "large"},
                        help="which comparisons to run (default: summary,convert,large)")
    parser.add_argument("--json", help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)
    out_dir = os.path.join(HERE, "out")
    source = xspace_profile(out_dir, args.ops, args.steps)
    judged = (args.ops, args.steps) == TARGET_INPUT
    compile_package()
    print(f"machine: {machine()}")
    print(f"input: {source} ({os.path.getsize(source) / 1e6:.1f} MB); {args.pairs} pairs, alternating")
    rows = _summaries(source, args.pairs, judged, xprof=not args.skip_xprof) if "summary" in args.parts else []
    if "convert" in args.parts:
        rows.append(_convert(source, args.pairs, judged))
    if args.large_steps and "large" in args.parts:
        large = xspace_profile(out_dir, args.ops, args.large_steps)
        rows.append(_large(large, args.large_repeat, (args.ops, args.large_steps) == LARGE_INPUT))
    if args.json:
        write_rows(args.json, rows)


# --- the peers ----------------------------------------------------------------------------
def xprof_rs() -> str | None:
    """The xprof-rs binary of this interpreter's environment (the bench extra), or on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "xprof-rs")
    return beside if os.access(beside, os.X_OK) else shutil.which("xprof-rs")


def xprof_rs_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("xprof-rs")
    except PackageNotFoundError:
        return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def xprof_rs_cold(binary: str, xplane: str, work: str, tool: str = "framework_op_stats",
                  timeout: float = 600) -> Run:
    """A cold xprof-rs server on a fresh copy of ``xplane`` answering one ``tool``
    request: wall time from its start to the whole response, its peak RSS (``wait4``)."""
    run_dir = os.path.join(work, "plugins", "profile", "run")
    os.makedirs(run_dir)
    shutil.copy(xplane, os.path.join(run_dir, "host.xplane.pb"))
    port = _free_port()
    began = time.perf_counter()
    server = subprocess.Popen([binary, "--logdir", work, "--port", str(port), "--host", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body, error = b"", None
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.perf_counter() - began > 30:
                    raise RuntimeError("xprof-rs did not start") from None
                time.sleep(0.002)
        url = f"http://127.0.0.1:{port}/data/plugin/profile/data?run=run&tag={tool}&host=host"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except (OSError, RuntimeError) as failure:
        error = str(failure)
    seconds = time.perf_counter() - began
    server.terminate()
    _, status, usage = os.wait4(server.pid, 0)
    server.returncode = os.waitstatus_to_exitcode(status)
    failed = error is not None or not body
    return Run(seconds, usage.ru_maxrss / 1024, 1 if failed else 0, error or f"{len(body)} bytes",
               usage.ru_utime + usage.ru_stime)


def _checked(run: Run, what: str) -> Run:
    if run.returncode:
        raise SystemExit(f"{what} failed:\n{run.output[-3000:]}")
    return run


def median_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the pairs' ratios (ours[i] / theirs[i]): each pair ran back to back."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


# The verdicts (None: not judged, the input is not the one the target is set for).
def met_vs_xprof_rs(time_ratio: float, memory_ratio: float, judged: bool) -> bool | None:
    return time_ratio <= SUMMARY_VS_RS["time"] and memory_ratio <= SUMMARY_VS_RS["memory"] if judged else None


def met_vs_xprof(time_ratio: float, judged: bool) -> bool | None:
    return time_ratio <= SUMMARY_VS_XPROF if judged else None


def met_pftrace(time_ratio: float, judged: bool) -> bool | None:
    return time_ratio <= PFTRACE_VS_JSON if judged else None


def met_large(peak_mib: float, judged: bool) -> bool | None:
    return peak_mib <= LARGE_PEAK_MIB if judged else None


# --- summary ------------------------------------------------------------------------------
def _summaries(source: str, pairs: int, judged: bool, *, xprof: bool) -> list[dict]:
    binary = xprof_rs()
    ours, rs, py = [], [], []
    work = tempfile.mkdtemp(prefix="bench-peers-")
    try:
        for i in range(pairs):
            sides = ["ours", "rs", "xprof"] if i % 2 == 0 else ["xprof", "rs", "ours"]
            for side in sides:
                if side == "ours":
                    ours.append(_checked(run_once(tracebridge_command("summary", source, "--json")),
                                         "tracebridge summary"))
                elif side == "rs" and binary:
                    rs.append(_checked(xprof_rs_cold(binary, source, os.path.join(work, f"rs{i}")), "xprof-rs"))
                elif side == "xprof" and xprof:
                    copy = os.path.join(work, f"xprof{i}", "host.xplane.pb")
                    os.makedirs(os.path.dirname(copy))
                    shutil.copy(source, copy)
                    py.append(_checked(run_once(python("-c", XPROF, copy)), "xprof"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours_s, ours_mib = statistics.median(r.seconds for r in ours), statistics.median(r.peak_rss_mb for r in ours)
    print(f"{'':36}{'wall s':>9}{'CPU s':>8}{'peak MiB':>10}")
    print(f"{'tracebridge summary --json':36}{ours_s:9.2f}{statistics.median(r.cpu_s for r in ours):8.2f}"
          f"{ours_mib:10.0f}")
    rows = []
    if rs:
        rs_s, rs_mib = statistics.median(r.seconds for r in rs), statistics.median(r.peak_rss_mb for r in rs)
        time_ratio = median_ratio([r.seconds for r in ours], [r.seconds for r in rs])
        memory_ratio = median_ratio([r.peak_rss_mb for r in ours], [r.peak_rss_mb for r in rs])
        print(f"{'xprof-rs framework_op_stats (cold)':36}{rs_s:9.2f}{statistics.median(r.cpu_s for r in rs):8.2f}"
              f"{rs_mib:10.0f}")
        met = met_vs_xprof_rs(time_ratio, memory_ratio, judged)
        print(f"tracebridge / xprof-rs, median of {len(rs)} pairs: time {time_ratio:.2f}x, memory "
              f"{memory_ratio:.2f}x; target <= {SUMMARY_VS_RS['time']}x and <= {SUMMARY_VS_RS['memory']}x: "
              f"{verdict(met).upper()}")
        rows.append(result_row(
            benchmark="XSpace summary vs xprof-rs", issue=35, input=_input(source, judged), unit="s",
            tracebridge=ours_s, tracebridge_peak_mib=ours_mib,
            anchor_name=f"xprof-rs {xprof_rs_version() or '?'} framework_op_stats, cold server", anchor=rs_s,
            anchor_peak_mib=rs_mib, target="T12" if judged else None, met=met,
            figure=f"{time_ratio:.2f}× time, {memory_ratio:.2f}× memory (median of {len(rs)} pairs)",
            notes=f"`tracebridge summary IN --json` vs a fresh `xprof-rs --logdir` server on a copy of the file, "
                  f"one framework_op_stats request (its start to the response); ratios are medians of "
                  f"{len(rs)} pairs; xprof-rs uses every core ({os.cpu_count()} here)",
            details=_details(ours, rs, time_ratio, memory_ratio)))
    else:
        print("xprof-rs: not installed (pip install '.[bench]'); its row is not measured")
        rows.append(result_row(
            benchmark="XSpace summary vs xprof-rs", issue=35, input=_input(source, judged), unit="s",
            tracebridge=ours_s, tracebridge_peak_mib=ours_mib, notes="xprof-rs not installed: no anchor"))
    if py:
        py_s, py_mib = statistics.median(r.seconds for r in py), statistics.median(r.peak_rss_mb for r in py)
        time_ratio = median_ratio([r.seconds for r in ours], [r.seconds for r in py])
        memory_ratio = median_ratio([r.peak_rss_mb for r in ours], [r.peak_rss_mb for r in py])
        print(f"{'xprof framework_op_stats':36}{py_s:9.2f}{statistics.median(r.cpu_s for r in py):8.2f}"
              f"{py_mib:10.0f}")
        met = met_vs_xprof(time_ratio, judged)
        print(f"tracebridge / xprof, median of {len(py)} pairs: time {time_ratio:.2f}x, memory {memory_ratio:.2f}x; "
              f"target <= {SUMMARY_VS_XPROF}x time: {verdict(met).upper()}")
        rows.append(result_row(
            benchmark="XSpace summary vs xprof", issue=35, input=_input(source, judged), unit="s",
            tracebridge=ours_s, tracebridge_peak_mib=ours_mib, anchor_name="xprof framework_op_stats",
            anchor=py_s, anchor_peak_mib=py_mib, target="T13" if judged else None, met=met,
            figure=f"{time_ratio:.2f}× time, {memory_ratio:.2f}× memory (median of {len(py)} pairs)",
            notes=f"`xspace_to_tool_data([copy], \"framework_op_stats\", {{}})`, whole processes, in the same "
                  f"rounds as xprof-rs; ratios are medians of {len(py)} pairs",
            details=_details(ours, py, time_ratio, memory_ratio)))
    return rows


# --- convert ------------------------------------------------------------------------------
def _convert(source: str, pairs: int, judged: bool) -> dict:
    work = tempfile.mkdtemp(prefix="bench-peers-convert-")
    runs: dict[str, list[Run]] = {"json": [], "pftrace": []}
    sizes = {}
    try:
        for i in range(pairs):
            for kind in ("json", "pftrace") if i % 2 == 0 else ("pftrace", "json"):
                out = os.path.join(work, f"out.{kind}")
                runs[kind].append(_checked(run_once(tracebridge_command("convert", source, out)),
                                           f"convert to {kind}"))
                sizes[kind] = os.path.getsize(out)
                os.unlink(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours, theirs = runs["pftrace"], runs["json"]
    time_ratio = median_ratio([r.seconds for r in ours], [r.seconds for r in theirs])
    cpu_ratio = median_ratio([r.cpu_s for r in ours], [r.cpu_s for r in theirs])
    print(f"{'':36}{'wall s':>9}{'CPU s':>8}{'peak MiB':>10}{'MB out':>9}")
    for name, kind in (("convert -> .json", "json"), ("convert -> .pftrace", "pftrace")):
        rs = runs[kind]
        print(f"{name:36}{statistics.median(r.seconds for r in rs):9.2f}{statistics.median(r.cpu_s for r in rs):8.2f}"
              f"{statistics.median(r.peak_rss_mb for r in rs):10.0f}{sizes[kind] / 1e6:9.1f}")
    met = met_pftrace(time_ratio, judged)
    print(f".pftrace / JSON, median of {pairs} pairs: wall {time_ratio:.2f}x, CPU {cpu_ratio:.2f}x; target <= "
          f"{PFTRACE_VS_JSON}x time: {verdict(met).upper()}")
    return result_row(
        benchmark="convert → .pftrace vs → Chrome JSON", issue=35, input=_input(source, judged), unit="s",
        tracebridge=statistics.median(r.seconds for r in ours),
        tracebridge_peak_mib=statistics.median(r.peak_rss_mb for r in ours),
        anchor_name="tracebridge convert → .json", anchor=statistics.median(r.seconds for r in theirs),
        anchor_peak_mib=statistics.median(r.peak_rss_mb for r in theirs), target="T14" if judged else None,
        met=met, figure=f"{time_ratio:.2f}× wall, {cpu_ratio:.2f}× CPU (median of {pairs} pairs)",
        notes=f"`tracebridge convert IN OUT.pftrace` vs `tracebridge convert IN OUT.json`, whole processes "
              f"(read and write); {sizes['pftrace'] / 1e6:.0f} MB vs {sizes['json'] / 1e6:.0f} MB",
        details={"pairs": pairs, "time_ratio": time_ratio, "cpu_ratio": cpu_ratio,
                 "pftrace_s": [r.seconds for r in ours], "json_s": [r.seconds for r in theirs]})


def _large(source: str, repeat: int, judged: bool) -> dict:
    work = tempfile.mkdtemp(prefix="bench-peers-large-")
    runs = []
    try:
        out = os.path.join(work, "large.pftrace")
        for _ in range(repeat):
            runs.append(_checked(run_once(tracebridge_command("convert", source, out)), "large convert"))
        size = os.path.getsize(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = statistics.median(r.seconds for r in runs)
    peak = statistics.median(r.peak_rss_mb for r in runs)
    met = met_large(peak, judged)
    print(f"one XSpace of {os.path.getsize(source) / 1e6:.0f} MB -> .pftrace: {seconds:.1f} s, peak {peak:.0f} MiB "
          f"(median of {repeat}); target <= 1 GB ({LARGE_PEAK_MIB:.0f} MiB): {verdict(met).upper()}")
    return result_row(
        benchmark="one large XSpace → .pftrace", issue=35,
        input=f"real TF 2.21 XSpace, one host ({os.path.getsize(source) / 1e6:.0f} MB"
              + (", 10.1M events)" if judged else ")"),
        unit="s", tracebridge=seconds, tracebridge_peak_mib=peak, target="T15" if judged else None, met=met,
        figure=f"peak {peak:.0f} MiB", notes=f"`tracebridge convert IN OUT.pftrace` (streamed a window of steps "
                                             f"at a time), median of {repeat}; {size / 1e6:.0f} MB out",
        details={"repeat": repeat, "seconds": [r.seconds for r in runs], "peak_mib": [r.peak_rss_mb for r in runs]})


def _input(source: str, judged: bool) -> str:
    size = os.path.getsize(source) / 1e6
    return f"real TF 2.21 XSpace, 2,000 ops × 1,500 steps ({size:.1f} MB)" if judged else f"{size:.2f} MB XSpace"


def _details(ours: list[Run], theirs: list[Run], time_ratio: float, memory_ratio: float) -> dict:
    return {"pairs": len(theirs), "time_ratio": time_ratio, "memory_ratio": memory_ratio,
            "tracebridge_s": [r.seconds for r in ours], "anchor_s": [r.seconds for r in theirs],
            "tracebridge_mib": [r.peak_rss_mb for r in ours], "anchor_mib": [r.peak_rss_mb for r in theirs]}


if __name__ == "__main__":
    main()
