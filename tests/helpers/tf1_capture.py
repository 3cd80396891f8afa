"""One real TF1 training step traced with FULL_TRACE, saved in every legacy form.

Used twice: by the ``tf_run`` fixture (a live capture, in every test session that has
TensorFlow) and by ``tools/gen_test_data.py``, which records one capture into
``tests/data/tf1_mlp/`` so that tests reading only the files run without TensorFlow.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

# The recorded event file's name: FileWriter puts the time and this machine's name in it.
RECORDED_EVENTS_NAME = "events.out.tfevents.1700000000.recorded"


def build_mlp(tf):
    from tracebridge.demo import build_mlp as build
    return build(tf)


def mlp_feed(x, y, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}


def file_paths(folder: Path) -> dict[str, Path]:
    """Where a capture's files are, in a live capture's folder or the recorded one."""
    return {
        "pb": folder / "run_metadata.pb", "pbtxt": folder / "run_metadata.pbtxt",
        "pickle": folder / "run_metadata.pickle", "timeline": folder / "timeline.json",
        "events_dir": folder / "events",
    }


def capture(tf, folder: Path) -> dict:
    """Warm up, trace two steps, and write the first step's RunMetadata as .pb, .pbtxt and a
    pickle (tfvis's way), timeline.py's Chrome JSON (dataflow and memory), and both steps
    as an event file (FileWriter.add_run_metadata). Returns the paths and the live objects:
    ``md``, ``metadatas``, ``graph``, ``session`` (open: the caller closes it), ``feed``,
    ``train_op``, ``loss``."""
    from tensorflow.python.client import timeline

    v1 = tf.compat.v1
    graph, x, y, train_op, loss, init = build_mlp(tf)
    feed = mlp_feed(x, y)
    sess = v1.Session(graph=graph)
    sess.run(init)
    sess.run(train_op, feed)  # warm up: the first run allocates and is not typical
    metadatas = []
    for _ in range(2):
        md = v1.RunMetadata()
        sess.run([train_op, loss], feed, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                 run_metadata=md)
        metadatas.append(md)
    md = metadatas[0]
    paths = file_paths(folder)
    paths["pb"].write_bytes(md.SerializeToString())
    paths["pbtxt"].write_text(str(md))
    with open(paths["pickle"], "wb") as handle:
        pickle.dump(md, handle)
    # timeline.py overwrites thread_id in the proto it is given: hand it a copy.
    scratch = v1.RunMetadata()
    scratch.CopyFrom(md)
    paths["timeline"].write_text(timeline.Timeline(scratch.step_stats, graph=graph)
                                 .generate_chrome_trace_format(show_dataflow=True, show_memory=True))
    with graph.as_default():
        writer = v1.summary.FileWriter(str(paths["events_dir"]), graph)
        for step, metadata in enumerate(metadatas):
            writer.add_run_metadata(metadata, f"step_{step}", global_step=step)
        writer.close()
    return {"md": md, "metadatas": metadatas, "graph": graph, "session": sess, "feed": feed,
            "train_op": train_op, "loss": loss, **paths}
