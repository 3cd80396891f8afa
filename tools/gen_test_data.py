"""Record the TF 2.21 capture that tests read without TensorFlow: ``tests/data/tf1_mlp/``.

Tests that need a real TF1 capture only as files (a RunMetadata .pb/.pbtxt/pickle,
timeline.py's JSON, an event file) read this recording, so ``make check`` starts no
TensorFlow session; the same tests also run on a live capture in ``make test`` (the
``tf1_files`` fixture), which keeps them true for the TensorFlow that is installed.
Re-record after changing the captured model or the TensorFlow pin, with oneDNN off (the
plain kernels, as on most machines)::

    TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python tools/gen_test_data.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "tf1_mlp"


def main() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0":
        print("set TF_ENABLE_ONEDNN_OPTS=0: the recording holds the plain kernels", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    import tensorflow as tf

    from tests.helpers.tf1_capture import RECORDED_EVENTS_NAME, capture, file_paths
    with tempfile.TemporaryDirectory() as scratch:
        captured = capture(tf, Path(scratch))
        captured["session"].close()
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.mkdir(parents=True)
        target = file_paths(OUT)
        for key in ("pb", "pbtxt", "pickle", "timeline"):
            shutil.copyfile(captured[key], target[key])
        target["events_dir"].mkdir()
        (event_file,) = captured["events_dir"].iterdir()
        shutil.copyfile(event_file, target["events_dir"] / RECORDED_EVENTS_NAME)
    (OUT / "recorded.json").write_text(json.dumps({"tensorflow": tf.__version__, "onednn": False}, indent=2) + "\n")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT.relative_to(REPO)} ({total // 1024} KiB) with TensorFlow {tf.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
