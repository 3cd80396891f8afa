"""XSpace -> Chrome trace: tracebridge against xprof's converter, on the same real file.

The input is a real TF 2.21 profile (bench/gen_xspace.py: 2,000 tiny ops x 1,500 steps,
about 46 MB and 3M events). Each run is a fresh process; medians of --repeat runs.

* tracebridge: ``tracebridge convert IN OUT.json``
* xprof: ``xspace_to_tool_data([copy], "trace_viewer@", {})`` on a copy of the input (it
  writes cache files beside its input), the anchor the issue names.

Target (issue 3, T3 in bench/targets.py): tracebridge <= 0.5x xprof's time and <= 0.5x its
peak memory. It is judged only on the issue's file (2,000 ops x 1,500 steps); a smaller one
is dominated by start-up costs. ``--json PATH`` writes the result row.

    python bench/bench_xspace.py [--repeat 3] [--ops 2000 --steps 1500] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from measure import machine, median_of, python, run_once, tracebridge_command, xspace_profile  # noqa: E402
from targets import result_row, verdict, write_rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
XPROF = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "trace_viewer@", {})
print(len(data) if data else 0)
"""
TARGET_RATIO = 0.5
TARGET_INPUT = (2000, 1500)  # ops, steps: the issue's file


def _events(path: str) -> int:
    """Events in the XSpace (read by tracebridge's own schema, outside any timing)."""
    counted = run_once(python("-c", "import sys; from tracebridge import protos\n"
                              "space = protos.XSpace.FromString(open(sys.argv[1], 'rb').read())\n"
                              "print(sum(len(l.events) for p in space.planes for l in p.lines))", path))
    try:
        return int(counted.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return -1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--json", help="also write the result row here (bench/targets.py)")
    args = parser.parse_args(argv)
    out_dir = os.path.join(HERE, "out")
    source = xspace_profile(out_dir, args.ops, args.steps)
    size_mb = os.path.getsize(source) / 1e6
    work = tempfile.mkdtemp(prefix="bench-xspace-")
    try:
        out_json = os.path.join(work, "out.json")
        ours_s, ours_mb, _ = median_of(tracebridge_command("convert", source, out_json), args.repeat)
        json_mb = os.path.getsize(out_json) / 1e6
        xprof_runs = []
        for i in range(args.repeat):
            copy = os.path.join(work, f"run{i}", "host.xplane.pb")
            os.makedirs(os.path.dirname(copy))
            shutil.copy(source, copy)
            xprof_runs.append(run_once(python("-c", XPROF, copy)))
        if any(r.returncode for r in xprof_runs):
            raise SystemExit(xprof_runs[0].output[-2000:])
        xprof_s = sorted(r.seconds for r in xprof_runs)[len(xprof_runs) // 2]
        xprof_mb = sorted(r.peak_rss_mb for r in xprof_runs)[len(xprof_runs) // 2]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    time_ratio, memory_ratio = ours_s / xprof_s, ours_mb / xprof_mb
    print(f"machine: {machine()}")
    print(f"input: {source} ({size_mb:.1f} MB); medians of {args.repeat} fresh processes")
    print(f"{'':24}{'wall s':>9}{'peak RSS MB':>13}")
    print(f"{'tracebridge convert':24}{ours_s:9.2f}{ours_mb:13.0f}   -> {json_mb:.0f} MB JSON")
    print(f"{'xprof trace_viewer@':24}{xprof_s:9.2f}{xprof_mb:13.0f}")
    print(f"ratio (tracebridge/xprof): time {time_ratio:.2f}x, memory {memory_ratio:.2f}x")
    (line,) = result_rows({"ops": args.ops, "steps": args.steps, "input_mb": size_mb, "events": _events(source),
                           "repeat": args.repeat, "tracebridge_s": ours_s, "tracebridge_mib": ours_mb,
                           "json_mb": json_mb, "xprof_s": xprof_s, "xprof_mib": xprof_mb})
    if line["target"]:
        print(f"target <= 0.5x time and <= 0.5x memory: {verdict(line['met']).upper()}")
    else:
        print(f"target <= 0.5x time and <= 0.5x memory: not judged (set for the "
              f"{TARGET_INPUT[0]} ops x {TARGET_INPUT[1]} steps file)")
    if args.json:
        write_rows(args.json, [line])


def result_rows(measured: dict) -> list[dict]:
    """The one row: tracebridge convert against xprof's trace_viewer@ (wall time and peak
    RSS of fresh processes, medians), judged against T3 on the issue's file only."""
    time_ratio = measured["tracebridge_s"] / measured["xprof_s"]
    memory_ratio = measured["tracebridge_mib"] / measured["xprof_mib"]
    judged = (measured["ops"], measured["steps"]) == TARGET_INPUT
    return [result_row(
        benchmark="XSpace → Chrome JSON", issue=3,
        input=f"real TF 2.21 XSpace, {measured['ops']:,} ops × {measured['steps']:,} steps "
              f"({measured['input_mb']:.1f} MB, {measured['events']:,} events)",
        unit="s", tracebridge=measured["tracebridge_s"], tracebridge_peak_mib=measured["tracebridge_mib"],
        anchor_name="xprof trace_viewer@", anchor=measured["xprof_s"], anchor_peak_mib=measured["xprof_mib"],
        target="T3" if judged else None,
        met=time_ratio <= TARGET_RATIO and memory_ratio <= TARGET_RATIO if judged else None,
        figure=f"{time_ratio:.2f}× time, {memory_ratio:.2f}× memory",
        notes=f"`tracebridge convert IN OUT.json` vs `xspace_to_tool_data([copy], \"trace_viewer@\", {{}})`, "
              f"whole processes; tracebridge/xprof: {time_ratio:.2f}× time, {memory_ratio:.2f}× peak RSS; "
              f"output {measured['json_mb']:.0f} MB JSON",
        details=measured)]


if __name__ == "__main__":
    main()
