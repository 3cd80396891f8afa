"""Issue 33's corpus pairs, captured and measured: a TF1 session against its Keras ``fit``,
``tf.function`` and ``fit(jit_compile=True)`` ports, for a small MLP (the framework's
overhead dominates) and a CNN (ops dominate), each run traced from its first step
(tests/helpers/breakdown_worker.py); then, per pair, the figures the issue's "done when"
asks for, printed as text and as one JSON line.

    .venv/bin/python tools/breakdown_pairs.py OUT_DIR            # capture, then measure
    .venv/bin/python tools/breakdown_pairs.py OUT_DIR --measure  # measure what OUT_DIR holds

Captures are live timing on whatever machine runs this: the figures are measurements, not
what a test may assert (tests/test_breakdown_captures.py asserts the structure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "helpers" / "breakdown_worker.py"
MODELS = ("mlp", "cnn")
PORTS = ("fit", "tf_function", "fit_jit")


def capture(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    for model in MODELS:
        for api in ("tf1",) + PORTS:  # one at a time: concurrent captures would load the cores
            path = out / f"{model}_{api}.xplane.pb"
            done = subprocess.run([sys.executable, str(WORKER), model, api, str(path)], capture_output=True,
                                  text=True, env=env, timeout=900)
            if done.returncode:
                raise SystemExit(f"{model} {api}: {done.stderr[-2000:]}")
            print(f"captured {path.name}: {done.stdout.strip()}", flush=True)


def measure(out: Path) -> dict:
    sys.path.insert(0, str(REPO))
    import tracebridge
    from tracebridge.analysis.run.doctor import trace_notes
    figures = {}
    for model in MODELS:
        control = tracebridge.load(out / f"{model}_tf1.xplane.pb")
        for api in PORTS:
            test = tracebridge.load(out / f"{model}_{api}.xplane.pb")
            pair = f"{model}: tf1 vs {api}"
            result = tracebridge.compare(control, test)
            warm = tracebridge.compare(control, test, warmup=1)
            head = result.headline()
            runs = {}
            for side, trace in (("control", control), ("test", test)):
                breakdown = getattr(result.breakdown, side)
                steps = breakdown.steps
                runs[side] = {
                    "median_ms": round(breakdown.median_ns / 1e6, 4),
                    "parts_ms": {part: round(ns / 1e6, 4) for part, ns in breakdown.parts.items()},
                    "median_parts_off": abs(sum(breakdown.parts.values()) - breakdown.median_ns) / breakdown.median_ns,
                    "worst_step_parts_off": max(abs(sum(s.parts.values()) - s.duration_ns) / s.duration_ns
                                                for s in steps),
                    "median_vs_warmup_1": getattr(result.steps, side).median_ns / getattr(warm.steps, side).median_ns - 1,
                    "left_out": [s.text() for s in getattr(result.steady, side).one_time],
                    "ops_without_time": [n for n in trace_notes(trace) if n.startswith("ops_without_time")],
                }
            kinds = {f.kind: f for f in result.findings}
            naming = [f for f in result.findings if "steps_per_execution" in f.advice]
            largest = max(head.parts, key=lambda part: head.parts[part])
            figures[pair] = {
                "delta_ms": round(head.delta_ns / 1e6, 4),
                "headline_parts_ms": {part: round(ns / 1e6, 4) for part, ns in head.parts.items()},
                "headline_parts_off": abs(sum(head.parts.values()) - head.delta_ns) / abs(head.delta_ns or 1),
                "largest_part_of_difference": largest,
                "explained": head.explained,
                "findings": {kind: round(f.share, 4) for kind, f in kinds.items()},
                "steps_per_execution_explains": (naming[0].share * result.steps.test.median_ns / head.delta_ns
                                                 if naming and head.delta_ns > 0 else None),
                "first_call_retracing": "retracing" in {f.kind for f in tracebridge.compare(
                    control, test, warmup=0).findings},
                "runs": runs,
                "headline_text": head.to_text(),
            }
    return figures


def report(figures: dict) -> None:
    for pair, found in figures.items():
        print(f"== {pair}")
        print(found["headline_text"])
        for side, run in found["runs"].items():
            print(f"  {side}: median {run['median_ms']} ms, parts off the median {run['median_parts_off']:.2e}, "
                  f"worst step {run['worst_step_parts_off']:.2e}; median vs --warmup 1 "
                  f"{run['median_vs_warmup_1']:+.1%}; left out: {'; '.join(run['left_out']) or 'none'}; "
                  f"ops_without_time: {run['ops_without_time'] or 'none'}")
        print(f"  headline parts off the difference {found['headline_parts_off']:.2e}; largest part of the "
              f"difference: {found['largest_part_of_difference']}; explained {found['explained']}; findings "
              f"{found['findings']}; the finding naming steps_per_execution explains "
              f"{found['steps_per_execution_explains']}; retracing from the first call (--warmup 0): "
              f"{found['first_call_retracing']}")
    print(json.dumps({pair: {k: v for k, v in found.items() if k != "headline_text"}
                      for pair, found in figures.items()}, default=float))


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    if "--measure" not in sys.argv[2:]:
        capture(out)
    report(measure(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
