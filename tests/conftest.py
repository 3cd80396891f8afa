"""Shared fixtures: the real-file corpus and real TensorFlow 2.21 captures.

TF captures are made once per test session in a temporary folder; tests that use them
are marked ``tf`` so ``pytest -m "not tf"`` runs without TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if {"tf_run", "tf", "tf_build"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.tf)


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS



# Readers of protobuf files (RunMetadata, StepStats, XSpace, and the event files, pbtxt and
# pickles that hold them) decode with the C loop of tracebridge.readers.wire where it is
# built, else with numpy alone; TRACEBRIDGE_PURE_WIRE=1 picks numpy (a worker process
# inherits it). Reader tests run with each: the `wire_decoder` fixture, or a property test
# that draws one of `wire_decoders()` and reads inside `reading_with(decoder)`.
def wire_decoders() -> tuple[str, ...]:
    """The decoders this machine has: "compiled" (the C loop, where built) and "numpy"."""
    from tracebridge.readers import wire
    return ("compiled", "numpy") if wire._wirec is not None else ("numpy",)


@contextlib.contextmanager
def reading_with(decoder: str):
    """Readers decode with ``decoder`` ("compiled" or "numpy") inside."""
    from tracebridge.readers import wire
    before = os.environ.pop("TRACEBRIDGE_PURE_WIRE", None)
    if decoder == "numpy":
        os.environ["TRACEBRIDGE_PURE_WIRE"] = "1"
    try:
        assert wire.compiled() == (decoder == "compiled"), decoder
        yield
    finally:
        os.environ.pop("TRACEBRIDGE_PURE_WIRE", None)
        if before is not None:
            os.environ["TRACEBRIDGE_PURE_WIRE"] = before


@pytest.fixture(params=["compiled", "numpy"])
def wire_decoder(request):
    """The test runs once with each wire decoder (the C loop skips where it is not built)."""
    if request.param not in wire_decoders():
        pytest.skip("the C wire decoder is not built here (no C compiler at install time)")
    with reading_with(request.param):
        yield request.param

def run_cli(*args: str, cwd=None):
    """Run ``python -m tracebridge ARGS`` in a subprocess; returns CompletedProcess."""
    import subprocess
    return subprocess.run([sys.executable, "-m", "tracebridge", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="session")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow")


@dataclass(frozen=True)
class TFBuild:
    """What the running TensorFlow computes with. tensorflow-cpu 2.21 turns oneDNN on by
    default only on some CPUs (AVX-512 ones), and ``TF_ENABLE_ONEDNN_OPTS=0``/``=1`` switches
    it on any x86 machine. Kernel names, fusions and the allocator's name follow it (README:
    "TF builds"), so tests ask this object instead of naming kernels."""

    onednn: bool

    @property
    def family(self) -> str:
        return "oneDNN" if self.onednn else "plain"

    @property
    def cpu_allocator(self) -> str:
        return "mklcpu" if self.onednn else "cpu"

    def computes(self, kernel: str, op_type: str) -> bool:
        """Whether ``kernel``, as this build names it, runs ``op_type``: the op's own
        kernel (``MatMul``, ``_MklMatMul``) or a fusion that contains it (``_FusedMatMul``)."""
        from tracebridge.analysis.kernels import fusion_parts, is_onednn, plain_kernel
        if is_onednn(kernel) and not self.onednn:
            return False
        return plain_kernel(kernel) == op_type or op_type in fusion_parts(kernel)


@pytest.fixture(scope="session")
def tf_build(tf) -> TFBuild:
    from tracebridge.capture.tf_internals import onednn_enabled
    return TFBuild(onednn=bool(onednn_enabled()))


def build_mlp(tf):
    from tracebridge.demo import build_mlp as build
    return build(tf)


def mlp_feed(x, y, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}


@pytest.fixture(scope="session")
def tf_run(tf, tmp_path_factory):
    """One real TF1 training step traced with FULL_TRACE, saved in every legacy form.

    Returns a dict: ``md`` (TF's RunMetadata), ``graph``, and paths ``pb``, ``pbtxt``,
    ``pickle``, ``events_dir`` (FileWriter.add_run_metadata, 2 steps), ``timeline``
    (timeline.py's Chrome JSON with dataflow and memory).
    """
    from tensorflow.python.client import timeline

    v1 = tf.compat.v1
    folder = tmp_path_factory.mktemp("tf_run")
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
    paths = {
        "pb": folder / "run_metadata.pb", "pbtxt": folder / "run_metadata.pbtxt",
        "pickle": folder / "run_metadata.pickle", "timeline": folder / "timeline.json",
        "events_dir": folder / "events",
    }
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
    yield {"md": md, "metadatas": metadatas, "graph": graph, "session": sess, "feed": feed,
           "train_op": train_op, "loss": loss, **paths}
    sess.close()


def loopback_cluster(tf):
    """1 ps + 2 workers on loopback, in this process (TF_FACTS B), and a small model placed
    across them. Returns (servers, graph, x, loss, train_op, init); the servers must stay
    referenced while sessions run."""
    v1 = tf.compat.v1
    ports = [free_port() for _ in range(3)]
    cluster = tf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"],
                                    "worker": [f"localhost:{ports[1]}", f"localhost:{ports[2]}"]})
    servers = [tf.distribute.Server(cluster, job_name=job, task_index=task, start=True)
               for job, task in (("ps", 0), ("worker", 0), ("worker", 1))]
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w1 = tf.Variable(v1.random_normal([32, 64], seed=1), name="w1")
            w2 = tf.Variable(v1.random_normal([64, 10], seed=2), name="w2")
        x = v1.placeholder(tf.float32, [16, 32], name="x")
        with tf.device("/job:worker/task:0"):
            h = tf.nn.relu(tf.matmul(x, w1), name="h")
        with tf.device("/job:worker/task:1"):
            logits = tf.matmul(h, w2, name="logits")
            loss = tf.reduce_mean(tf.square(logits), name="loss")
        with tf.device("/job:worker/task:0"):
            train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    return servers, graph, x, loss, train_op, init


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser():
    """One headless Debian chromium for every browser test (see tests/helpers/browser.py)."""
    from playwright.sync_api import sync_playwright

    from tests.helpers.browser import CHROMIUM_ARGS
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                              args=CHROMIUM_ARGS)
        yield launched
        launched.close()


# Hypothesis profiles for tests/test_properties.py: "ci" (plain pytest) and "fuzz" (`make
# fuzz`, many more examples). TRACEBRIDGE_HYPOTHESIS_PROFILE picks one; no profile is
# loaded globally, so other tests keep Hypothesis's defaults.
HYPOTHESIS_PROFILE = os.environ.get("TRACEBRIDGE_HYPOTHESIS_PROFILE", "ci")
try:
    from hypothesis import HealthCheck as _HealthCheck
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the test extra is not installed: the property tests skip themselves
    pass
else:
    _hypothesis_settings.register_profile("ci", max_examples=60, deadline=None,
                                          suppress_health_check=[_HealthCheck.too_slow])
    _hypothesis_settings.register_profile("fuzz", max_examples=1000, deadline=None,
                                          suppress_health_check=[_HealthCheck.too_slow,
                                                                 _HealthCheck.filter_too_much])
