"""What the codemod knows about TensorFlow's API, by qualified name.

LibCST resolves every reference to the dotted name it was imported as, so ``tf.RunOptions``
under ``import tensorflow as tf`` is ``tensorflow.RunOptions`` and ``tf.Session`` under
``import tensorflow.compat.v1 as tf`` is ``tensorflow.compat.v1.Session``. :func:`api_name`
turns both into a namespace (``"v1"`` or ``"v2"``) and the name inside it, which is what the
tables below are written in.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

SESSIONS = {"Session", "InteractiveSession", "train.MonitoredTrainingSession",
            "train.MonitoredSession", "train.SingularMonitoredSession"}
PROFILER_HOOKS = {"train.ProfilerHook", "estimator.ProfilerHook"}
EAGER_SWITCHES = {"disable_eager_execution", "disable_v2_behavior"}
# tfprof (tf.profiler.Profiler/profile/advise, ProfileOptionBuilder) is gone from TF 2's
# tf.profiler but runs as tf.compat.v1.profiler in graph mode (measured with TF 2.21): the
# codemod renames it and names tracebridge's equivalent in the report.
TFPROF_MODULES = ("tensorflow.python.profiler.model_analyzer",
                  "tensorflow.python.profiler.option_builder",
                  "tensorflow.python.profiler.profile_context",
                  "tensorflow.python.profiler.tfprof_logger")
# What to use instead, by the last part of the tfprof name; the comment left in the code is
# the short form, the report line the long one.
TFPROF_ADVICE = {
    "Profiler": "trace the steps with tracebridge.trace(session) and read trace.summary(top=N)",
    "profile": "tracebridge.load(run_metadata).summary(top=N) gives the op time tables",
    "advise": "TensorBoard's profile plugin (tracebridge tensorboard TRACE LOGDIR) gives TF 2's advice",
}
TFPROF_DEFAULT_ADVICE = "tracebridge.trace(...) and trace.summary(top=N), or TensorBoard's profile plugin"
# tfprof's counts of the graph, not of time: tracebridge measures time and offers nothing for them.
TFPROF_COUNTS = {
    "trainable_variables_parameter": "it counts parameters, not time: keep tf.compat.v1.profiler for it, "
                                     "or use a Keras model's model.count_params()",
    "float_operation": "it counts FLOPs, not time: keep tf.compat.v1.profiler (graph mode) for it",
}


def tfprof_advice(qualified: str) -> str:
    """The report line for a use of tfprof: what tracebridge offers instead."""
    parts = qualified.split(".")
    counted = next((p for p in parts if p in TFPROF_COUNTS), None)
    if counted:
        return (f"tfprof's {counted} runs under TF 2.21 in graph mode (tf.compat.v1.profiler); tracebridge has "
                f"no equivalent: {TFPROF_COUNTS[counted]}")
    last = next((p for p in parts if p in TFPROF_ADVICE), parts[-1])
    return f"tfprof's {last} runs under TF 2.21 in graph mode (tf.compat.v1.profiler); tracebridge's equivalent: " + \
        TFPROF_ADVICE.get(last, TFPROF_DEFAULT_ADVICE)


# What TF 2.21 cannot run at all, by the name inside TF's API (either namespace; the longest
# prefix wins), with what to use instead. A use of these fails ``migrate --check``.
MISSING = {
    "contrib": "tf.contrib was removed in TF 2.0; see TF's migration guide for its module",
    "contrib.slim": "tf.contrib.slim was removed in TF 2.0: `pip install tf-slim`, `import tf_slim as slim`",
    "contrib.layers": "tf.contrib.layers was removed in TF 2.0: `pip install tf-slim`, `tf_slim.layers`",
    "contrib.framework": "tf.contrib.framework was removed in TF 2.0: `pip install tf-slim`, `tf_slim`",
    "examples": "tensorflow.examples (tutorials' input_data) is not installed with TF 2.21: "
                "load MNIST with tf.keras.datasets.mnist.load_data()",
    "estimator": "tf.estimator was removed in TF 2.16: port the model_fn to Keras, or run it on TF <= 2.15",
    "layers": "tf.layers (tf.compat.v1.layers) runs only on Keras 2, and TF 2.21 brings Keras 3: this "
              "script needs `pip install tf_keras` and TF_USE_LEGACY_KERAS=1 set before TensorFlow is "
              "imported, or port the layer (tf.keras.layers, tf_slim)",
}
# Deprecated TF1 APIs that still run under tf.compat.v1 in graph mode (measured with TF 2.21):
# renamed, and named in the report so they can be replaced later.
DEPRECATED = {
    "train.start_queue_runners": "queue runners run under tf.compat.v1 in graph mode; tf.data replaces them",
    "train.QueueRunner": "queue runners run under tf.compat.v1 in graph mode; tf.data replaces them",
    "train.add_queue_runner": "queue runners run under tf.compat.v1 in graph mode; tf.data replaces them",
    "data.Iterator.from_string_handle": "Iterator.from_string_handle runs under tf.compat.v1 in graph mode; "
                                        "TF 2 iterates datasets directly",
}
# TF1 names the generated table does not cover: a method of a class TF 2 still has.
EXTRA_TF1_NAMES = ("data.Iterator.from_string_handle",)
# Names TF 2 has with another class that serves TF1 graph code as well, left as TF2 code
# (the table lists them as changed): TF 2's tf.data.Dataset builds the same pipeline in a
# graph, and tf.compat.v1.data.make_one_shot_iterator(dataset) iterates it there. Only its
# TF1 methods (dataset.make_one_shot_iterator()) are gone, which the report names.
TF2_KEPT = frozenset({"data.Dataset"})
# Methods of TF1's Dataset that TF 2's lacks, with the call that replaces each.
TF1_DATASET_METHODS = {
    "make_one_shot_iterator": "tf.compat.v1.data.make_one_shot_iterator(dataset)",
    "make_initializable_iterator": "tf.compat.v1.data.make_initializable_iterator(dataset)",
}
# tftracer (tfvis's sibling): what has a drop-in, and what has none.
TFTRACER_DROP_INS = {"Timeline"}
TFTRACER_MISSING = ("tftracer's TracingServer (a live HTTP trace viewer) has no equivalent: save the "
                    "trace (tl.to_pickle, tracebridge.trace) and open it with `tracebridge html`")


def missing_advice(name: str) -> str | None:
    """What TF 2.21 lacks for ``name`` (a name inside TF's API), and its replacement."""
    if name in PROFILER_HOOKS:
        return None  # estimator.ProfilerHook: rewritten to tracebridge's hook
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        advice = MISSING.get(".".join(parts[:end]))
        if advice is not None:
            return advice
    return None


def deprecated_advice(name: str) -> str | None:
    return next((advice for prefix, advice in DEPRECATED.items()
                 if name == prefix or name.startswith(prefix + ".")), None)


def api_name(qualified: str) -> tuple[str, str] | None:
    """``("v1", "train.ProfilerHook")`` for ``tensorflow.compat.v1.train.ProfilerHook``;
    ``("v2", "Session")`` for ``tensorflow.Session``; None outside TF's public API."""
    for prefix, namespace in (("tensorflow.compat.v1.", "v1"), ("tensorflow.compat.v2.", "v2")):
        if qualified.startswith(prefix):
            return namespace, qualified[len(prefix):]
    if qualified.startswith("tensorflow.") and not qualified.startswith(
            ("tensorflow.python.", "tensorflow.compat.", "tensorflow.core.")):
        return "v2", qualified[len("tensorflow."):]
    return None


def is_tfprof(qualified: str) -> bool:
    if qualified.startswith(TFPROF_MODULES):
        return True
    api = api_name(qualified)
    return api is not None and api[1].startswith("profiler.") and not api[1].startswith(
        "profiler.experimental")


@dataclass(frozen=True)
class TF1Name:
    """A TF1 name that TF2 lacks (``missing``) or has with another meaning. ``shared`` are
    TF2's parameters when they are the first of TF1's: calls passing only those may stay."""

    missing: bool
    shared: tuple[str, ...] | None


@lru_cache(maxsize=1)
def tf1_names() -> dict[str, TF1Name]:
    """The table generated from TF 2.21 by tools/gen_tf1_names.py (see its docstring)."""
    text = resources.files(__package__).joinpath("tf1_names.txt").read_text()
    table = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, extra = line.partition(" ")
        if not extra:
            table[name] = TF1Name(missing=True, shared=None)
        else:
            table[name] = TF1Name(missing=False, shared=None if extra == "*" else tuple(extra.split(",")))
    for name in EXTRA_TF1_NAMES:
        table[name] = TF1Name(missing=True, shared=None)
    return table


def tf1_entry(name: str) -> tuple[str, TF1Name] | None:
    """The table entry covering ``name``: itself, or a TF1-only module it is in (``layers``
    covers ``layers.dense``)."""
    table = tf1_names()
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        entry = table.get(prefix)
        if entry is not None and (end == len(parts) or entry.missing):
            return prefix, entry
    return None
