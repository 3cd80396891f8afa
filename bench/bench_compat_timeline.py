"""compat.timeline against TensorFlow's timeline.py: the same StepStats, the same text.

``tracebridge.compat.timeline`` is the drop-in the codemod points legacy imports to
(issue 6): ``Timeline(step_stats).generate_chrome_trace_format(...)`` returns, character
for character, what TF 2.21's module returns, without importing TensorFlow. Issue 6 sets no
speed target; this measures what a legacy script pays with either module, so that a
regression shows (its closing note: 3.3 s vs 5.2 s at 100k with the default flags).

The input is bench_stepstats.py's generated RunMetadata (default 100k node_stats, cached
in bench/out/). Both sides do what a migrated script does: read the file, parse it with
their own protobuf classes (tracebridge's, TF's), call
``Timeline(run_metadata.step_stats).generate_chrome_trace_format(show_dataflow=True,
show_memory=M)`` and write the text, for M = False (the defaults) and M = True. Each runs
--repeat times in fresh processes, the two sides alternating so that noise on a shared
2-core machine hits both alike. Reported: medians of the Timeline + generate call alone
(the ratio), of the whole process (TF's includes importing TensorFlow, which compat never
does: the process says whether ``tensorflow`` got into ``sys.modules``), and of peak RSS
(wait4). The two outputs are compared byte for byte: timing a drop-in that differs would
mean nothing.

    python bench/bench_compat_timeline.py [--size 100000] [--repeat 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from bench_stepstats import stepstats_input  # noqa: E402
from measure import machine, run_once  # noqa: E402
from targets import result_row, write_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
ROOT = HERE.parent

# argv: input, output, show_memory ("1"/"0"); prints one JSON line last
COMPAT_RUN = """
import json, sys, time
started = time.perf_counter()
from tracebridge import protos
from tracebridge.compat import timeline
imported = time.perf_counter()
with open(sys.argv[1], "rb") as handle:
    run_metadata = protos.RunMetadata.FromString(handle.read())
parsed = time.perf_counter()
chrome = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format(
    show_dataflow=True, show_memory=sys.argv[3] == "1")
generated = time.perf_counter()
with open(sys.argv[2], "w") as handle:
    handle.write(chrome)
print(json.dumps({"import_s": imported - started, "parse_s": parsed - imported,
                  "generate_s": generated - parsed, "tensorflow_imported": "tensorflow" in sys.modules}))
"""

TF_RUN = COMPAT_RUN.replace("from tracebridge import protos\nfrom tracebridge.compat import timeline",
                            "from tensorflow.core.protobuf import config_pb2 as protos\n"
                            "from tensorflow.python.client import timeline")

SIDES = {"compat": COMPAT_RUN, "tf": TF_RUN}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="node_stats (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side per flag set (default 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    parser.add_argument("--json", type=Path, help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)

    OUT.mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    source = stepstats_input(args.size)
    print(f"input: {source.name} ({source.stat().st_size / 1e6:.1f} MB); {args.repeat} fresh processes per side",
          flush=True)
    results = []
    for memory in (False, True):
        runs: dict[str, list[dict]] = {"compat": [], "tf": []}
        for _ in range(args.repeat):
            for side in SIDES:  # alternating
                run = _run(side, source, memory, args.timeout)
                runs[side].append(run)
                print(f"  show_memory={memory!s:5} {side:6}: " + (
                    f"FAILED ({run['failed']})" if run.get("failed") else
                    f"generate {run['generate_s']:.2f} s, process {run['wall_s']:.2f} s, "
                    f"peak RSS {run['peak_rss_mib']:,.0f} MiB"), flush=True)
        results.append({"size": args.size, "input_bytes": source.stat().st_size, "show_memory": memory,
                        "repeat": args.repeat, **{side: _medians(values) for side, values in runs.items()}})
    rows = result_rows(results)
    _print_table(rows)
    if args.json:
        write_rows(args.json, rows)
    return 0


def _run(side: str, source: Path, memory: bool, timeout: float) -> dict:
    target = OUT / f"compat_timeline_{side}.json"
    _remove(target)
    run = run_once([sys.executable, "-c", SIDES[side], str(source), str(target), "1" if memory else "0"],
                   timeout=timeout, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)})
    result = {"wall_s": run.seconds, "peak_rss_mib": run.peak_rss_mb}
    lines = [line for line in run.output.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        result["failed"] = "timeout" if run.returncode < 0 else f"exit status {run.returncode}"
        result["output"] = run.output[-2000:]
    else:
        result.update(json.loads(lines[-1]))
        # hashed here, after the timing: the same for both sides, and the file can go
        result["output_bytes"] = target.stat().st_size
        result["sha256"] = hashlib.sha256(target.read_bytes()).hexdigest()
    _remove(target)
    return result


def _medians(runs: list[dict]) -> dict:
    ok = [run for run in runs if not run.get("failed")]
    if not ok:
        return {"failed": runs[0]["failed"], "wall_s": runs[0]["wall_s"], "peak_rss_mib": runs[0]["peak_rss_mib"]}
    medians = {key: statistics.median(run[key] for run in ok)
               for key in ("wall_s", "peak_rss_mib", "import_s", "parse_s", "generate_s", "output_bytes")}
    medians["sha256"] = sorted({run["sha256"] for run in ok})  # one unless the output varies
    medians["tensorflow_imported"] = any(run["tensorflow_imported"] for run in ok)
    return medians


def result_rows(results: list[dict]) -> list[dict]:
    """One row per flag set; issue 6 sets no speed target, so nothing is judged."""
    rows = []
    for result in results:
        ours, tf = result["compat"], result["tf"]
        flags = f"show_dataflow=True, show_memory={result['show_memory']}"
        if not result["show_memory"]:
            flags += " (the defaults)"
        notes = ["Timeline + generate call alone"]
        if ours.get("failed"):
            notes.append(f"compat FAILED ({ours['failed']})")
        else:
            notes.append(f"whole process: compat {ours['wall_s']:.2f} s (TensorFlow imported: "
                         f"{'YES' if ours['tensorflow_imported'] else 'no'})")
        if tf.get("failed"):
            notes.append(f"TF's timeline.py FAILED ({tf['failed']})")
        else:
            notes.append(f"TF {tf['wall_s']:.2f} s (importing TF {tf['import_s']:.2f} s)")
        if not ours.get("failed") and not tf.get("failed"):
            same = ours["sha256"] == tf["sha256"] and len(ours["sha256"]) == 1
            notes.append(f"output identical to TF's: {'yes' if same else 'NO'} ({tf['output_bytes'] / 1e6:.1f} MB)")
        rows.append(result_row(
            benchmark="compat.timeline → Chrome JSON, drop-in for timeline.py", issue=6,
            input=f"{result['size']:,} node_stats ({result['input_bytes'] / 1e6:.1f} MB RunMetadata), {flags}",
            unit="s", tracebridge=None if ours.get("failed") else ours["generate_s"],
            tracebridge_peak_mib=ours["peak_rss_mib"], anchor_name="TF's timeline.py",
            anchor=None if tf.get("failed") else tf["generate_s"], anchor_peak_mib=tf["peak_rss_mib"],
            figure="", notes="; ".join(notes), details=result))
    return rows


def _print_table(rows: list[dict]) -> None:
    print("\ncompat.timeline vs TF's timeline.py, medians; generate = Timeline(...) + "
          "generate_chrome_trace_format(...) alone")
    for line in rows:
        ours, tf = line["details"]["compat"], line["details"]["tf"]
        ratio = "-" if line["ratio"] is None else f"{line['ratio']:.2f}x"
        print(f"  show_memory={line['details']['show_memory']!s:5}  compat: generate "
              f"{_seconds(line['tracebridge'])}, process {ours['wall_s']:.2f} s, {ours['peak_rss_mib']:,.0f} MiB | "
              f"TF: generate {_seconds(line['anchor'])}, process {tf['wall_s']:.2f} s, {tf['peak_rss_mib']:,.0f} MiB | "
              f"TF/compat {ratio}")
        print(f"    {line['notes']}")


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
