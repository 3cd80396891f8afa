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
# tfprof (tf.profiler.Profiler/profile/advise, ProfileOptionBuilder) has no drop-in: its
# reports come from graph-level accounting that TF2's profiler does not keep.
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


def tfprof_advice(qualified: str) -> tuple[str, str]:
    """(the comment, the report line) for a tfprof name left as it is."""
    last = qualified.rsplit(".", 1)[-1]
    advice = TFPROF_ADVICE.get(last, TFPROF_DEFAULT_ADVICE)
    return (f"tfprof's {last} is not converted: see tracebridge's migration guide (tfprof)",
            f"tfprof's {last} left as it is: {advice}")


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
