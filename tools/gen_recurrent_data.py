"""Record the recurrent model pairs of issue 32 for the tests: ``tests/data/recurrent/``.

Each pair of tests/models_recurrent.py (a TF1 model and its Keras 3 port) is captured in
three worlds: ``tf1`` (a Session), ``function`` (the port's ``tf.function`` training step)
and ``fit`` (``Model.fit`` under tracebridge.keras.TraceCallback), 6 steps each, every
capture in a process of its own. Each is written as ``<model>_<world>.json.gz`` in
tracebridge's own JSON, which keeps the recorded graph (``metadata["graph"]``) that
structural comparison needs. The TF profiler's own host events (``ThreadpoolListener::*``,
``ExecutorState::Process``: three quarters of a TF2 capture's rows) are left out; no
comparison counts them (host annotations, not ops). ``recorded.json`` notes the TensorFlow
version and each capture's first loss: the same in all three worlds, since both sides hold
the same parameters. Record with oneDNN off (the plain kernels, as on most machines)::

    TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python tools/gen_recurrent_data.py [MODEL ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "recurrent"
STEPS = 6
PROFILER_NOISE = r"^(?!ThreadpoolListener::|ExecutorState::Process$)"  # names kept: all others


def capture_one(model: str, world: str, path: Path) -> None:
    """In this process: capture one world of one pair and write it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(REPO))
    import tensorflow as tf

    import tracebridge
    from tests.models_recurrent import PAIRS, capture
    trace = capture(tf, PAIRS[model], world, steps=STEPS)
    first_loss = trace.metadata["first_loss"]
    trace.filter(name=PROFILER_NOISE).save(path, dataflow=False)  # arrows: the ops keep their inputs
    again = tracebridge.load(path)
    if not again.metadata.get("graph") or len(again.steps) != STEPS:
        raise SystemExit(f"{path}: the graph or the steps did not survive ({len(again.steps)} steps)")
    print(json.dumps({"first_loss": first_loss, "tensorflow": tf.__version__}), flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        capture_one(argv[1], argv[2], Path(argv[3]))
        return 0
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0":
        print("set TF_ENABLE_ONEDNN_OPTS=0: the recording holds the plain kernels", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    from tests.models_recurrent import PAIRS, WORLDS
    models = argv or list(PAIRS)
    OUT.mkdir(parents=True, exist_ok=True)
    notes_path = OUT / "recorded.json"
    notes = json.loads(notes_path.read_text()) if notes_path.exists() else {"onednn": False, "first_loss": {}}
    for model in models:
        losses = {}
        for world in WORLDS:
            path = OUT / f"{model}_{world}.json.gz"
            done = subprocess.run([sys.executable, __file__, "--one", model, world, str(path)], check=True,
                                  capture_output=True, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            losses[world] = result["first_loss"]
            notes["tensorflow"] = result["tensorflow"]
            print(f"{path.relative_to(REPO)}: {path.stat().st_size // 1024} KiB, first loss {losses[world]:.6f}")
        if max(losses.values()) - min(losses.values()) > 1e-4 * max(abs(v) for v in losses.values()):
            print(f"{model}: the worlds compute different models (first losses {losses})", file=sys.stderr)
            return 1
        notes["first_loss"][model] = losses
    notes_path.write_text(json.dumps(notes, indent=2, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"{OUT.relative_to(REPO)}: {total // 1024} KiB in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
