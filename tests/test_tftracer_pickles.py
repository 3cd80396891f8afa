"""tftracer's pickles: ``tracebridge.load`` reads a pickled tftracer ``Timeline`` (its
attribute dict holds the RunMetadata) with the restricted unpickler, and refuses anything
else such a pickle could name.

tftracer itself is not installable here; its class is stood in for by a class of the same
module and name, which is all a pickle records of it. The RunMetadata is TensorFlow's own,
from a real traced session run."""

from __future__ import annotations

import os
import pickle
import sys
import types

import pytest

import tracebridge
from tracebridge.errors import UnsafePickleError


class Timeline:
    """What ``pickle`` records of tftracer's Timeline: its module, its name, its attributes."""

    def __init__(self, run_metadata=None, options=None):
        self.run_metadata = run_metadata
        self.options = options
        self.comm_op_name = "RecvTensor"
        self.horovod = False


@pytest.fixture
def tftracer_module(monkeypatch):
    module = types.ModuleType("tftracer.timeline")
    Timeline.__module__ = "tftracer.timeline"
    module.Timeline = Timeline
    package = types.ModuleType("tftracer")
    package.timeline = module
    package.Timeline = Timeline
    monkeypatch.setitem(sys.modules, "tftracer", package)
    monkeypatch.setitem(sys.modules, "tftracer.timeline", module)
    return module


@pytest.fixture(scope="module")
def traced_run(tf):
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.random_normal([16, 16], seed=1)
        y = tf.nn.relu(tf.matmul(x, x))
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
    run_metadata = v1.RunMetadata()
    with v1.Session(graph=graph) as session:
        session.run(y, options=options, run_metadata=run_metadata)
    return options, run_metadata


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickled_tftracer_timeline_loads(tftracer_module, traced_run, tmp_path, protocol):
    options, run_metadata = traced_run
    path = tmp_path / "tftracer.pickle"
    path.write_bytes(pickle.dumps(Timeline(run_metadata, options), protocol=protocol))
    direct = tmp_path / "run_metadata.pb"
    direct.write_bytes(run_metadata.SerializeToString())

    trace = tracebridge.load(path)
    expected = tracebridge.load(direct)
    assert len(trace) == len(expected) > 0
    assert sorted(op.name for op in trace.records()) == sorted(op.name for op in expected.records())

    from tracebridge.compat.tfvis import Timeline as DropIn
    assert DropIn.from_pickle(path).iteration_time() > 0


def test_tftracer_pickle_with_other_globals_is_refused(tftracer_module, tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    timeline = Timeline()
    timeline.run_metadata = Payload()
    path = tmp_path / "hostile.pickle"
    path.write_bytes(pickle.dumps(timeline, protocol=4))
    with pytest.raises(UnsafePickleError, match="posix.system|os.system"):
        tracebridge.load(path)
    assert not marker.exists()


def test_tftracer_timeline_made_by_a_call_is_refused(tftracer_module, tmp_path):
    class Called(Timeline):
        def __reduce__(self):
            return Timeline, ("arguments",)

    Called.__module__ = "tftracer.timeline"
    Called.__qualname__ = Called.__name__ = "Timeline"
    path = tmp_path / "called.pickle"
    path.write_bytes(pickle.dumps(Called(), protocol=4))
    with pytest.raises(UnsafePickleError, match="constructor arguments"):
        tracebridge.load(path)


def test_tftracer_timeline_without_run_metadata_is_a_format_error(tftracer_module, tmp_path):
    path = tmp_path / "empty.pickle"
    path.write_bytes(pickle.dumps(Timeline(), protocol=4))
    with pytest.raises(tracebridge.TraceFormatError, match="no RunMetadata"):
        tracebridge.load(path)
