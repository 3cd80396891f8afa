"""tfvis pickles (``pickle.dump(run_metadata)``) without executing anything.

A pickle is a program: loading one with :mod:`pickle` runs whatever callables it names.
Here the unpickler resolves exactly three names, and to tracebridge's own stand-ins:

* ``tensorflow.core.protobuf.config_pb2.RunMetadata`` (and StepStats): a stand-in class
  that only keeps the ``serialized`` bytes protobuf messages pickle as their state;
* ``_codecs.encode``: how protocols 0-2 spell a bytes literal; only ``latin1`` is accepted.

Any other global (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ...) stops the
load with :class:`~tracebridge.errors.UnsafePickleError` before anything is called.
"""

from __future__ import annotations

import io
import pickle

from ..errors import TraceFormatError, UnsafePickleError

_MESSAGES = {
    ("tensorflow.core.protobuf.config_pb2", "RunMetadata"): "RunMetadata",
    ("tensorflow.core.framework.step_stats_pb2", "StepStats"): "StepStats",
}


class _Message:
    """Stands in for a TF protobuf class while unpickling: keeps the serialized bytes."""

    kind = "RunMetadata"

    def __init__(self, *args):
        if args:
            raise UnsafePickleError(f"{self.kind} pickled with constructor arguments")
        self.serialized = None

    def __setstate__(self, state):
        data = state.get("serialized") if isinstance(state, dict) else None
        if not isinstance(data, (bytes, bytearray)):
            raise UnsafePickleError(f"{self.kind} pickle has no serialized bytes")
        self.serialized = bytes(data)


def _stand_in(kind: str) -> type:
    return type(f"Pickled{kind}", (_Message,), {"kind": kind})


def _encode(text, encoding="utf-8"):
    if not isinstance(text, str) or encoding != "latin1":
        raise UnsafePickleError("pickle uses _codecs.encode other than for a latin1 bytes literal")
    return text.encode("latin1")


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        kind = _MESSAGES.get((module, name))
        if kind is not None:
            return _stand_in(kind)
        if (module, name) == ("_codecs", "encode"):
            return _encode
        raise UnsafePickleError(f"pickle refers to {module}.{name}; only a RunMetadata or "
                                "StepStats may be loaded, so nothing was run")

    def persistent_load(self, pid):
        raise UnsafePickleError("pickle uses persistent ids; refused")


def read_pickle(data: bytes, path=None) -> list[tuple[str, bytes]]:
    """``[(kind, serialized), ...]`` for the RunMetadata/StepStats messages in a pickle
    (one message, or a list/tuple/dict of them)."""
    try:
        value = _RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError as error:
        raise UnsafePickleError(error.reason, path=path) from None
    except Exception as error:  # malformed pickles raise many kinds; none is ours to show raw
        raise TraceFormatError(f"not a readable pickle ({type(error).__name__}: {error})",
                               path=path) from None
    items = list(value.values()) if isinstance(value, dict) else value
    items = items if isinstance(items, (list, tuple)) else [items]
    messages = [(item.kind, item.serialized) for item in items
                if isinstance(item, _Message) and item.serialized is not None]
    if not messages or len(messages) != len(items):
        raise TraceFormatError("pickle holds no RunMetadata", path=path)
    return messages
