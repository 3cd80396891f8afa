"""tracebridge: one step-stats model for TensorFlow 1 and TensorFlow 2 profiles.

    trace = tracebridge.load("run_metadata.pb")       # or .pbtxt, .json, events, pickles
    trace.summary()                                   # where the time went
    trace.save("timeline.json")                       # Chrome trace for Perfetto
    with tracebridge.trace(session) as t:             # capture TF1 session.run calls
        session.run(train_op)
    t.trace

Reading, converting, summarizing and comparing never import TensorFlow; captures do.

Architecture. The package is rooms with one direction of imports; tests/test_imports.py
holds the table of which room imports which and fails on any import outside it.

* ``model/``: the columnar trace that every other room shares. It imports nothing of
  tracebridge but the error tree.
* ``readers/`` make the model from files (and list a multi-host profile's host files),
  ``writers/`` turn it into files, ``analysis/`` computes on traces it is handed. Each
  imports the model and the foundations (``errors``, ``options``, ``protos``, ``tfrecord``,
  ``_files``, ``_fork``), never another of the three, and never TensorFlow. Analysis does
  no file I/O: a host-by-host analysis, which reads each host on the worker that analyses
  it, is handed a loader (:func:`tracebridge.formats.load_host`) by its caller.
* ``formats`` is the table above readers and writers: it picks the reader or writer for a
  path, and names writers and analyses as ``"module:function"``, imported on first use.
* The rooms that face TensorFlow import it, by design: ``capture/`` (TF1 sessions, the
  TF2 profiler, and the hooks by which ``tracebridge run`` catches a script's steps),
  ``compat/`` (drop-in replacements of TF1-era APIs; they import TF inside the functions
  that run sessions, and ``compat.timeline`` not at all), ``keras`` (the callback) and
  ``demo``. No other room imports them.
* This module and ``cli`` are the front doors: they import any room, the TensorFlow-facing
  ones only inside the functions that capture. (The ``tracebridge`` command starts in
  ``tracebridge_command.py``, beside the package, which runs before numpy is imported.)
"""

from __future__ import annotations

from .errors import (CaptureError, MigrationError, MissingDependencyError, OutputError,
                     TraceFormatError, TracebridgeError, UnsafePickleError)
from .model import Device, Lane, Op, Step, Trace
from .formats import load

__version__ = "0.1.0"

__all__ = [
    "CaptureError", "Device", "Lane", "MigrationError", "MissingDependencyError", "Op",
    "OutputError", "Step", "Trace", "TraceFormatError", "TracebridgeError", "UnsafePickleError",
    "__version__", "advise", "capture_remote", "compare", "doctor", "load", "summarize_hosts", "trace",
]


def trace(target=None, **options):
    """Capture a profile; imports TensorFlow.

    * ``with trace(session) as t:`` traces the ``session.run`` calls made inside (TF1), see
      :class:`tracebridge.capture.session.SessionTrace`;
    * ``traced = trace(fn)``: each call of ``traced`` is a step (TF2), until the schedule
      selects no further step or ``traced.stop()``;
    * ``with trace(**options) as t:`` traces the TF2 code inside, ``t.step()`` marks steps;
      see :class:`tracebridge.capture.profiler.ProfileTrace`.

    Options common to all: ``warmup``, ``every``, ``steps``. ``t.trace`` is the result
    (of a TF2 capture once it has stopped: reading it stops nothing). A Keras model raises
    ``TypeError``: trace its ``fit`` with :class:`tracebridge.keras.TraceCallback`.
    """
    from .capture import trace as _trace
    return _trace(target, **options)


def capture_remote(addresses, duration_ms, **options):
    """Capture TF profiler servers (``["host:port", ...]``) for ``duration_ms`` into one
    trace with a device per plane and host; see :mod:`tracebridge.capture.remote`."""
    from .capture.remote import capture_remote as _capture_remote
    return _capture_remote(addresses, duration_ms, **options)


def summarize_hosts(inputs, *, run=None, **options):
    """The summary of a multi-host profile (logdir, or one XSpace per host), host by host,
    in this process or on Dask (``workers=N``, ``scheduler="tcp://HOST:PORT"``); see
    :mod:`tracebridge.analysis.hosts.summary`."""
    from .analysis.hosts.summary import summarize_hosts as _summarize_hosts
    from .formats import load_host_ops
    from .readers.host_files import host_files
    return _summarize_hosts(host_files(inputs, run), load=load_host_ops, **options)


def compare(control, test, **options):
    """Compare two runs of the same model (traces, or paths tracebridge reads): aligned
    ops, per-step statistics, coverage; see :mod:`tracebridge.analysis.compare`."""
    from .analysis.compare import compare as _compare
    from .analysis.findings import comparison_findings
    control = control if isinstance(control, Trace) else load(control)
    test = test if isinstance(test, Trace) else load(test)
    return _compare(control, test, **{"find": comparison_findings, **options})


def advise(trace, *, warmup=None, **options):
    """Findings of one run (a trace, or a path tracebridge reads), ranked by the share of
    the step time each explains: eager ops, retracing, host gaps, input waits, device idle
    time, framework overhead, memory growing across steps; over the steady state (``warmup``
    None: steps that hold one-time work are found and left out; ``warmup=N``: the first N
    steps instead); ``thresholds=``: a
    :class:`~tracebridge.analysis.common.thresholds.Thresholds`; see
    :mod:`tracebridge.analysis.findings`."""
    from .analysis.findings import advise as _advise
    return _advise(trace if isinstance(trace, Trace) else load(trace), warmup=warmup, **options)


def doctor(target, *, run=None, **options):
    """Why a profile (a trace, a trace file, a run folder, a logdir, or one XSpace file per
    host) is empty or lacks time, memory, steps or devices, and what to change: a
    :class:`~tracebridge.analysis.run.doctor.Diagnosis` of coded problems, most serious first;
    see :mod:`tracebridge.diagnosis`."""
    from .diagnosis import doctor as _doctor
    return _doctor(target, run=run, **options)
