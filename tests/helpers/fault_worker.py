"""Faults that need a process of their own (tests/test_capture_faults.py).

    python fault_worker.py disk-full FOLDER
    python fault_worker.py unwritable FOLDER

``disk-full``: a small RLIMIT_FSIZE with SIGXFSZ ignored, so every write past the limit
fails with EFBIG as on a full disk. ``unwritable``: folders this process owns, made
read-only with chmod. Root writes through that, so as root the worker first runs every
case once (which also imports every module they use: the interpreter's own files may not
be readable by others), then becomes user nobody for good and runs them for real; FOLDER
and TMPDIR must then belong to nobody. FOLDER must be empty and writable; the process's
TMPDIR should lie inside it.

Prints one JSON line: per case, the error raised (type and message), the files left in
the folders involved, and whether profiling worked again afterwards.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tracebridge  # noqa: E402
from tracebridge.capture.capture_lock import held as tracebridge_capture_active  # noqa: E402
from tracebridge.demo import build_mlp  # noqa: E402

v1 = tf.compat.v1


@tf.function
def step(a):
    return tf.nn.relu(tf.matmul(a, a))


A = tf.random.normal([64, 64], seed=1)
step(A)


def files_under(folder: str) -> list[str]:
    found = []
    for root, _, names in os.walk(folder):
        found += [os.path.relpath(os.path.join(root, n), folder) for n in names
                  if not n.startswith("__autograph_generated_file")]
    return sorted(found)


def outcome(run) -> dict:
    """Run ``run``; report what it raised (a tracebridge error is expected)."""
    try:
        value = run()
    except Exception as error:  # reported to the test, which checks the type
        return {"error": type(error).__name__, "message": str(error),
                "tracebridge_error": isinstance(error, tracebridge.TracebridgeError)}
    return {"error": None, "value": value}


def profiler_free() -> bool:
    from tensorflow.python.profiler import profiler_v2
    return not tracebridge_capture_active() and profiler_v2._profiler is None


def capture(**options) -> int:
    with tracebridge.trace(**options) as traced:
        for _ in range(20):
            step(A)
    return len(traced.trace)


def session_capture():
    graph, x, y, train_op, loss, init = build_mlp(tf)
    session = v1.Session(graph=graph)
    session.run(init)
    rng = np.random.default_rng(0)
    feed = {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}
    with tracebridge.trace(session) as traced:
        session.run(train_op, feed)
    return session, train_op, feed, traced.trace


def disk_full(folder: str) -> dict:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    small = 1000  # bytes: below every profile and output written here

    def limited(run):
        resource.setrlimit(resource.RLIMIT_FSIZE, (small, hard))
        try:
            return outcome(run)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # a soft limit may go back up to the hard one

    results = {}
    tmp = tempfile.gettempdir()
    results["capture_default"] = {**limited(capture), "left": files_under(tmp), "profiler_free": profiler_free()}
    logdir = os.path.join(folder, "logdir")
    results["capture_logdir"] = {**limited(lambda: capture(logdir=logdir)), "left": files_under(logdir),
                                 "profiler_free": profiler_free()}
    results["capture_server"] = {**limited(lambda: capture(host_tracer_level=2)), "left": files_under(tmp),
                                 "profiler_free": profiler_free()}
    results["capture_after"] = outcome(capture)  # the limit raised again: profiling works
    with tracebridge.trace() as traced:
        for _ in range(20):
            step(A)
    tf2_trace = traced.trace  # every output of it is larger than the limit
    session, train_op, feed, tf1_trace = session_capture()
    out = os.path.join(folder, "out")
    os.makedirs(out)
    for name in ("tf2.json", "tf2.json.gz", "tf2.pb", "tf2.pbtxt", "tf2.xplane.pb", "tf2.html"):
        # save refuses several steps in a format of one run: its writer takes them all in one file
        fmt = tracebridge.formats.output_format(name)
        write = tf2_trace.save if fmt.keeps_steps else lambda path: fmt.write(tf2_trace, path)
        results[f"save_{name}"] = {**limited(lambda: write(os.path.join(out, name))), "left": files_under(out)}
    results["save_tf1.json"] = {**limited(lambda: tf1_trace.save(os.path.join(out, "tf1.json"))),
                                "left": files_under(out)}

    def hook_run():
        from tracebridge.compat.profiler_hook import ProfilerHook
        graph, x, y, train_op, loss, init = build_mlp(tf)
        hook_dir = os.path.join(out, "hook")
        with graph.as_default():
            hook = ProfilerHook(save_steps=1, output_dir=hook_dir)
            rng = np.random.default_rng(0)
            feed = {x: rng.random((64, 32), dtype=np.float32), y: rng.integers(0, 10, 64)}
            with v1.train.MonitoredTrainingSession(hooks=[hook]) as monitored:
                for _ in range(3):
                    monitored.run(train_op, feed)

    results["profiler_hook"] = {**limited(hook_run),
                                "left": [f for f in files_under(out) if not f.startswith("hook/events.")]}
    v1.summary.FileWriterCache.clear()

    def tfvis_pickle():
        from tracebridge.compat.tfvis import Timeline
        with Timeline() as timeline:
            session.run(train_op, feed_dict=feed, **timeline.kwargs)
        resource.setrlimit(resource.RLIMIT_FSIZE, (small, hard))
        try:
            timeline.to_pickle(os.path.join(out, "run.pickle"))
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

    results["tfvis_pickle"] = {**outcome(tfvis_pickle), "left": files_under(out)}
    results["save_after"] = outcome(lambda: tf2_trace.save(os.path.join(out, "after.json")) and files_under(out))
    results["capture_after_all"] = outcome(capture)
    results["profiler_free_at_end"] = profiler_free()
    return results


def unwritable(folder: str) -> dict:
    if os.geteuid() == 0:
        unwritable_cases(os.path.join(folder, "as-root"))  # results ignored: root writes anyway
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        # TensorFlow and tracebridge import modules lazily, so nobody must be able to read
        # them: a checkout (and its venv) inside a private folder cannot run these cases.
        hidden = [os.path.dirname(module.__file__) for module in (tf, tracebridge)
                  if not os.access(os.path.dirname(module.__file__), os.R_OK | os.X_OK)]
        if hidden:
            return {"cannot_run_as_nobody": f"user nobody cannot read {', '.join(hidden)}"}
    return unwritable_cases(os.path.join(folder, "cases"))


def unwritable_cases(folder: str) -> dict:
    results = {"euid": os.geteuid()}
    read_only = os.path.join(folder, "read-only")
    os.makedirs(read_only)
    os.chmod(read_only, 0o500)
    probe = os.path.join(read_only, "probe")
    try:
        open(probe, "w").close()
    except PermissionError:
        results["permissions_apply"] = True
    else:  # this user bypasses permissions: the test skips
        os.unlink(probe)
        results["permissions_apply"] = False
        return results
    results["capture_logdir"] = {**outcome(lambda: capture(logdir=os.path.join(read_only, "logs"))),
                                 "profiler_free": profiler_free()}
    with tracebridge.trace() as traced:
        step(A)
    trace = traced.trace
    results["save"] = {**outcome(lambda: trace.save(os.path.join(read_only, "trace.json"))),
                       "left": files_under(read_only)}

    # A logdir that becomes read-only while the code runs: the error comes at the stop.
    logdir = os.path.join(folder, "logs")

    def made_read_only_meanwhile():
        with tracebridge.trace(logdir=logdir):
            step(A)
            for session_folder in os.listdir(logdir):
                os.chmod(os.path.join(logdir, session_folder), 0o500)
            step(A)

    results["logdir_read_only_meanwhile"] = {**outcome(made_read_only_meanwhile), "left": files_under(logdir),
                                             "folders": sorted(os.listdir(logdir)), "profiler_free": profiler_free()}
    tmp = tempfile.gettempdir()
    os.chmod(tmp, 0o500)
    try:
        results["tmpdir_read_only"] = {**outcome(capture), "profiler_free": profiler_free()}
    finally:
        os.chmod(tmp, 0o700)

    def hook_fit():
        import keras

        from tracebridge.compat.profiler_hook import ProfilerHook
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        model.compile("sgd", "mse")
        model.fit(np.zeros((32, 8), np.float32), np.zeros((32, 4), np.float32), verbose=0,
                  callbacks=[ProfilerHook(save_steps=1, output_dir=read_only)])

    results["profiler_hook_keras"] = {**outcome(hook_fit), "left": files_under(read_only),
                                      "profiler_free": profiler_free()}
    results["capture_after"] = outcome(capture)
    results["capture_logdir_after"] = outcome(lambda: capture(logdir=logdir))
    results["profiler_free_at_end"] = profiler_free()
    os.chmod(read_only, 0o700)
    return results


def main() -> None:
    mode, folder = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    results = {"disk-full": disk_full, "unwritable": unwritable}[mode](folder)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
