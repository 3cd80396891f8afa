"""Findings on a long profile: ``advise`` and ``compare`` of the 3M-event XSpace (2,000 ops x
1,500 steps, bench/gen_xspace.py), anchored on ``summary`` of the same file in the same run.

Findings decide on intervals over steps, so their cost grows with the step count; this keeps
it from growing faster than the summary's. Before this bench, a step at a time over all rows
and a sort of every test-control difference made ``advise`` take 153 s and ``compare`` 182 s
on this input; ``summary`` takes under a second. No issue sets a target: the rows report the
ratios (``--json``, bench/targets.py), and the script prints them::

    python bench/bench_findings_long.py            # the 3M-event input, 3 runs each
    python bench/bench_findings_long.py --ops 30 --steps 20 --repeat 1   # a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from measure import Run, machine, run_once, tracebridge_command, xspace_profile  # noqa: E402
from targets import result_row, write_rows  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the result rows here (bench/targets.py)")
    args = parser.parse_args(argv)
    source = xspace_profile(os.path.join(HERE, "out"), args.ops, args.steps)
    print(f"machine: {machine()}")
    print(f"input: {source} ({os.path.getsize(source) / 1e6:.1f} MB), {args.ops} ops x {args.steps} steps; "
          f"medians of {args.repeat}, the commands taking turns")
    commands = {"summary": ["summary", "--json", source], "advise": ["advise", "--json", source],
                "compare": ["compare", "--json", source, source]}
    runs: dict[str, list[Run]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, command in commands.items():
            run = run_once(tracebridge_command(*command))
            if run.returncode:
                raise SystemExit(f"tracebridge {' '.join(command)} failed:\n{run.output[-2000:]}")
            runs[name].append(run)
    anchor = statistics.median(r.seconds for r in runs["summary"])
    print(f"{'':28}{'wall s':>9}{'peak MiB':>10}{'x summary':>11}")
    rows = []
    for name in commands:
        seconds = statistics.median(r.seconds for r in runs[name])
        peak = statistics.median(r.peak_rss_mb for r in runs[name])
        print(f"tracebridge {name:16}{seconds:9.2f}{peak:10.0f}{seconds / anchor:11.1f}")
        if name != "summary":
            rows.append(result_row(
                benchmark=f"{name} of a long profile", issue=35, input=f"{args.ops} ops × {args.steps} steps XSpace",
                unit="s", tracebridge=seconds, tracebridge_peak_mib=peak, anchor_name="tracebridge summary --json",
                anchor=anchor, anchor_peak_mib=statistics.median(r.peak_rss_mb for r in runs["summary"]),
                figure=f"{seconds / anchor:.1f}× the summary's time",
                notes=f"`tracebridge {' '.join(commands[name][:2])}`, median of {args.repeat}",
                details={"seconds": [r.seconds for r in runs[name]], "summary_s": [r.seconds for r in runs["summary"]]}))
    if args.json:
        write_rows(args.json, rows)


if __name__ == "__main__":
    main()
