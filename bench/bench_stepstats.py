"""StepStats -> Chrome trace: tracebridge against TensorFlow's timeline.py.

For each size (default 100k and 1M node_stats) the input is generated once with
``gen_stepstats.py`` and cached under ``bench/out/`` (git-ignored). Then, each in a fresh
subprocess:

* tracebridge: ``tracebridge.load(path).to_chrome(out, dataflow=True, memory=True)``,
  run ``--repeat`` times (default 3); medians are reported. The time includes the
  interpreter start and imports.
* timeline.py: ``Timeline(step_stats).generate_chrome_trace_format(show_dataflow=True,
  show_memory=True)``, timed around the generate call alone and as a whole process
  (TensorFlow's import and parsing included). At 1M with memory, timeline.py needs more
  than 24 GB and dies (see TF_FACTS E.1), so from ``--tf-memory-max`` nodes on it runs
  with ``show_memory=False``, which the table says; it has a timeout (``--tf-timeout``).

Peak memory: "peak RSS" is the largest resident set of any process of the run (wait4's
``ru_maxrss``, via ``measure.run_once``: forked workers included). "tree PSS" is the peak
proportional set size of the whole process tree, sampled every 50 ms (Linux) in one extra,
untimed run (sampling slows a 2-core machine), so that the pages a forked worker shares
with its parent are counted once.

Targets (issue 2, bench/targets.py): T1 at 1M, T2 at 100k. The speed-up is timeline.py's
generate call alone against tracebridge's whole process, so it does not flatter us.
``--json PATH`` writes one result row per size (see bench/targets.py).

    python bench/bench_stepstats.py                 # 100k and 1M
    python bench/bench_stepstats.py --sizes 100000  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, run_once  # noqa: E402
from targets import MIB, result_row, verdict, write_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
ROOT = HERE.parent

# targets T1 and T2, and the sizes the issue sets them for
TARGET_1M_SECONDS = 10.0
TARGET_1M_RSS_BYTES = 2 * 1024**3
TARGET_SPEEDUP_100K = 10.0

TRACEBRIDGE_RUN = """
import json, sys, time
started = time.perf_counter()
import tracebridge
trace = tracebridge.load(sys.argv[1])
loaded = time.perf_counter()
trace.to_chrome(sys.argv[2], dataflow=True, memory=True)
done = time.perf_counter()
print(json.dumps({"load_s": loaded - started, "write_s": done - loaded, "ops": len(trace)}))
"""

TIMELINE_RUN = """
import json, sys, time
started = time.perf_counter()
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import timeline
imported = time.perf_counter()
with open(sys.argv[1], "rb") as handle:
    run_metadata = config_pb2.RunMetadata.FromString(handle.read())
parsed = time.perf_counter()
chrome = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format(
    show_dataflow=True, show_memory=sys.argv[3] == "1")
generated = time.perf_counter()
with open(sys.argv[2], "w") as handle:
    handle.write(chrome)
print(json.dumps({"import_s": imported - started, "parse_s": parsed - imported,
                  "generate_s": generated - parsed}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda text: [int(s) for s in text.split(",")],
                        default=[100_000, 1_000_000], help="node counts, comma-separated (default 100000,1000000)")
    parser.add_argument("--repeat", type=int, default=3, help="tracebridge runs per size (default 3)")
    parser.add_argument("--tf-repeat", type=int, default=1, help="timeline.py runs per size (default 1)")
    parser.add_argument("--tf-timeout", type=float, default=900, help="seconds per timeline.py run (default 900)")
    parser.add_argument("--tf-memory-max", type=int, default=500_000,
                        help="largest size at which timeline.py runs with show_memory=True (default 500000)")
    parser.add_argument("--no-tf", action="store_true", help="skip timeline.py")
    parser.add_argument("--no-pss", action="store_true", help="skip the extra run that samples the tree's PSS")
    parser.add_argument("--json", type=Path, help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)

    OUT.mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    results = []
    for size in args.sizes:
        source = stepstats_input(size)
        print(f"\n== {size:,} node_stats: {source.name} ({source.stat().st_size / 1e6:.0f} MB)", flush=True)
        tb = [_run_tracebridge(source, OUT / f"tracebridge_{size}.json") for _ in range(args.repeat)]
        for run in tb:
            print(f"  tracebridge: {run['wall_s']:.2f} s (load {run['load_s']:.2f} + write {run['write_s']:.2f}), "
                  f"peak RSS {_mb(run['peak_rss'])}", flush=True)
        result = {"size": size, "input_bytes": source.stat().st_size, "tracebridge": _medians(tb),
                  "tracebridge_runs": tb}
        if not args.no_pss:
            sampled = _run_tracebridge(source, OUT / f"tracebridge_{size}.json", sample=True)
            result["tracebridge"]["tree_pss"] = sampled["tree_pss"]
            print(f"  tracebridge, one more run sampling memory: tree PSS {_mb(sampled['tree_pss'])} "
                  f"(peak RSS {_mb(sampled['peak_rss'])})", flush=True)
        if not args.no_tf:
            memory = size <= args.tf_memory_max
            tf = [_run_timeline(source, OUT / f"timeline_{size}.json", memory, args.tf_timeout)
                  for _ in range(args.tf_repeat)]
            for run in tf:
                if run.get("failed"):
                    print(f"  timeline.py: FAILED ({run['failed']}) after {run['wall_s']:.1f} s, "
                          f"peak RSS {_mb(run['peak_rss'])}", flush=True)
                else:
                    print(f"  timeline.py (show_memory={memory}): generate {run['generate_s']:.2f} s, "
                          f"process {run['wall_s']:.2f} s, peak RSS {_mb(run['peak_rss'])}", flush=True)
            result["timeline"] = _medians(tf)
            result["timeline"]["show_memory"] = memory
        results.append(result)
    rows = result_rows(results)
    _print_table(results, rows)
    if args.json:
        write_rows(args.json, rows)
    return 0


def stepstats_input(size: int) -> Path:
    """The generated RunMetadata of ``size`` node_stats, cached in bench/out/ (also the input
    of bench_compat_timeline.py)."""
    path = OUT / f"stepstats_{size}.pb"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "gen_stepstats.py"), str(size), str(path) + ".tmp"],
                       check=True, cwd=ROOT)
        os.replace(str(path) + ".tmp", path)
    return path


def _run_tracebridge(source: Path, target: Path, sample: bool = False) -> dict:
    _remove(target)  # replacing a large file costs its unlinking: not part of the run
    run = _measure([sys.executable, "-c", TRACEBRIDGE_RUN, str(source), str(target)], timeout=None,
                   sample=sample)
    if run.get("failed"):
        raise SystemExit(f"tracebridge failed: {run['failed']}\n{run.get('stderr', '')}")
    run["output_bytes"] = target.stat().st_size
    _remove(target)
    return run


def _run_timeline(source: Path, target: Path, memory: bool, timeout: float) -> dict:
    _remove(target)
    run = _measure([sys.executable, "-c", TIMELINE_RUN, str(source), str(target), "1" if memory else "0"],
                   timeout=timeout)
    run["output_bytes"] = target.stat().st_size if target.exists() and not run.get("failed") else None
    _remove(target)  # gigabytes of pretty-printed JSON; the size is what we keep
    return run


def _measure(command: list[str], timeout: float | None, sample: bool = False) -> dict:
    """Run ``command`` (it prints one JSON line last) in a fresh process: wall time and
    peak RSS from ``measure.run_once`` (wait4's rusage: the largest process, forked
    workers included), and with ``sample`` the peak PSS of the process tree. Sampling
    costs CPU (reading smaps of gigabyte processes), so timed runs do not sample."""
    sampler = _TreeSampler(os.getpid())  # the one measured command is our only child
    if sample:
        sampler.start()
    try:
        run = run_once(command, timeout=timeout, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)})
    finally:
        sampler.stop()
    result = {"wall_s": run.seconds, "peak_rss": run.peak_rss_mb * 1024 * 1024, "tree_pss": sampler.peak_pss or None}
    lines = [line for line in run.output.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        result["failed"] = "timeout" if run.returncode < 0 and timeout else f"exit status {run.returncode}"
        result["stderr"] = run.output[-2000:]
        return result
    result.update(json.loads(lines[-1]))
    return result


class _TreeSampler(threading.Thread):
    """Peak summed PSS of the descendants of a process (Linux; 0 elsewhere)."""

    def __init__(self, pid: int, interval: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_pss = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pss = 0
            for pid in _tree(self.pid)[1:]:  # the benchmark itself is not measured
                pss += _proc_kib(pid, "smaps_rollup", "Pss:") * 1024
            self.peak_pss = max(self.peak_pss, pss)
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join()


def _tree(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    todo.extend(int(child) for child in handle.read().split())
        except OSError:
            pass
    return pids


def _proc_kib(pid: int, name: str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/{name}") as handle:
            for line in handle:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _medians(runs: list[dict]) -> dict:
    ok = [r for r in runs if not r.get("failed")]
    if not ok:
        return {"failed": runs[0]["failed"], "wall_s": runs[0]["wall_s"], "peak_rss": runs[0]["peak_rss"],
                "tree_pss": runs[0]["tree_pss"]}
    keys = [k for k, v in ok[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {k: statistics.median(r[k] for r in ok if r.get(k) is not None) for k in keys
            if any(r.get(k) is not None for r in ok)}


def _mb(value) -> str:
    return "-" if value is None else f"{value / 1e6:,.0f} MB"


def _print_table(results: list[dict], rows: list[dict]) -> None:
    print("\nStepStats -> Chrome JSON (dataflow + memory), medians; times include process start")
    head = (f"{'nodes':>10} | {'tracebridge':>11} | {'load':>5} | {'write':>5} | {'peak RSS':>9} | {'tree PSS':>9} | "
            f"{'out':>7} | {'timeline.py gen':>15} | {'process':>8} | {'peak RSS':>9} | {'out':>8} | "
            f"{'x gen':>6} | {'x proc':>6}")
    print(head)
    print("-" * len(head))
    for row in results:
        tb, tf = row["tracebridge"], row.get("timeline", {})
        failed = tf.get("failed")
        gen = "-" if not tf else "FAILED" if failed else f"{tf['generate_s']:.2f} s"
        proc = "-" if not tf else f"{tf['wall_s']:.1f} s"
        speed_gen = "-" if not tf or failed else f"{tf['generate_s'] / tb['wall_s']:.1f}"
        speed_proc = "-" if not tf or failed else f"{tf['wall_s'] / tb['wall_s']:.1f}"
        note = "" if not tf or tf.get("show_memory") else "  (timeline.py without memory)"
        print(f"{row['size']:>10,} | {tb['wall_s']:>9.2f} s | {tb['load_s']:>5.2f} | {tb['write_s']:>5.2f} | "
              f"{_mb(tb['peak_rss']):>9} | {_mb(tb.get('tree_pss')):>9} | {_mb(tb['output_bytes']):>7} | {gen:>15} | "
              f"{proc:>8} | {_mb(tf.get('peak_rss')):>9} | {_mb(tf.get('output_bytes')):>8} | "
              f"{speed_gen:>6} | {speed_proc:>6}{note}")
    print("\nTargets")
    for line in rows:
        if line["target"]:
            print(f"  {line['target_text']} ({line['input']}): {verdict(line['met'])} ({line['figure']})")
    if not any(line["target"] for line in rows):
        print("  none judged at these sizes (T1 is set for 1,000,000 node_stats, T2 for 100,000)")


def result_rows(results: list[dict]) -> list[dict]:
    """One row per size: tracebridge's whole process against timeline.py's generate call,
    judged against T1 at 1M and T2 at 100k (other sizes are not judged)."""
    rows = []
    for result in results:
        size, tb, tf = result["size"], result["tracebridge"], result.get("timeline") or {}
        failed = tf.get("failed")
        anchor = None if not tf or failed else tf["generate_s"]
        memory = tf.get("show_memory", True)
        target = met = None
        figure = ""
        if size == 1_000_000:
            target = "T1"
            met = tb["wall_s"] <= TARGET_1M_SECONDS and tb["peak_rss"] <= TARGET_1M_RSS_BYTES
            figure = f"{tb['wall_s']:.2f} s, {tb['peak_rss'] / MIB:,.0f} MiB peak RSS"
        elif size == 100_000:
            target = "T2"
            if anchor is not None:
                met = anchor / tb["wall_s"] >= TARGET_SPEEDUP_100K
                figure = f"{anchor / tb['wall_s']:.1f}× ({anchor:.2f} s vs {tb['wall_s']:.2f} s)"
            else:
                figure = f"timeline.py failed: {failed}" if failed else "timeline.py not run"
        notes = [f"tracebridge: whole process (interpreter, imports, load {tb['load_s']:.2f} s + write "
                 f"{tb['write_s']:.2f} s), {_mb(tb['output_bytes'])} JSON"]
        if tb.get("tree_pss"):
            notes.append(f"process tree PSS {tb['tree_pss'] / MIB:,.0f} MiB")
        if failed:
            notes.append(f"timeline.py FAILED ({failed}) after {tf['wall_s']:.0f} s, "
                         f"peak RSS {tf['peak_rss'] / MIB:,.0f} MiB")
        elif tf:
            notes.append(f"timeline.py: generate call alone, show_memory={memory}; its whole process (TF import, "
                         f"parse, write) {tf['wall_s']:.1f} s")
        if tf and not memory:
            notes.append("timeline.py runs WITHOUT show_memory at this size (with it, 1M nodes need more than "
                         "24 GB: issue 2)")
        rows.append(result_row(
            benchmark="StepStats → Chrome JSON, dataflow + memory", issue=2,
            input=f"{size:,} node_stats ({result['input_bytes'] / 1e6:.1f} MB RunMetadata)", unit="s",
            tracebridge=tb["wall_s"], tracebridge_peak_mib=tb["peak_rss"] / MIB,
            anchor_name=None if not tf else "timeline.py" if memory else "timeline.py, no memory",
            anchor=anchor, anchor_peak_mib=None if anchor is None else tf["peak_rss"] / MIB,
            target=target, met=met, figure=figure, notes="; ".join(notes),
            details={key: value for key, value in result.items() if key != "tracebridge_runs"}))
    return rows



if __name__ == "__main__":
    raise SystemExit(main())
