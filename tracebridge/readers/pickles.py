"""tfvis and tftracer pickles (``pickle.dump(run_metadata)``, a pickled tftracer
``Timeline``) without executing anything.

A pickle is a program: loading one with :mod:`pickle` runs whatever callables it names.
Here the unpickler resolves a handful of names, each to tracebridge's own stand-in:

* ``tensorflow.core.protobuf.config_pb2.RunMetadata`` (and StepStats, RunOptions): a
  stand-in class that only keeps the ``serialized`` bytes protobuf messages pickle as their
  state;
* tftracer's ``Timeline`` (``tftracer.timeline.Timeline``): a stand-in that keeps, of the
  attribute dict pickled as its state, only the messages above (directly or in a list, tuple
  or dict); it is made by NEWOBJ (protocols 2+), never by calling a named constructor;
* ``_codecs.encode``: how protocols 0-2 spell a bytes literal; only ``latin1`` is accepted.

Any other global (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ...) stops the
load with :class:`~tracebridge.errors.UnsafePickleError` before anything is called.
"""

from __future__ import annotations

import io
import pickle
import pickletools

from ..errors import TraceFormatError, UnsafePickleError, one_line
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source
from .stepstats import read_run_metadatas

_MESSAGES = {
    ("tensorflow.core.protobuf.config_pb2", "RunMetadata"): "RunMetadata",
    ("tensorflow.core.framework.step_stats_pb2", "StepStats"): "StepStats",
    ("tensorflow.core.protobuf.config_pb2", "RunOptions"): "RunOptions",  # held beside them; no trace
}
_TRACES = ("RunMetadata", "StepStats")
# tftracer's Timeline, by the module it is defined in and the package that re-exports it.
_TIMELINES = {("tftracer.timeline", "Timeline"), ("tftracer", "Timeline")}


class _Message:
    """Stands in for a TF protobuf class while unpickling: keeps the serialized bytes."""

    kind = "RunMetadata"
    serialized = None  # also for instances made without __init__ (NEWOBJ_EX, INST)

    def __init__(self, *args):
        if args:
            raise UnsafePickleError(f"{self.kind} pickled with constructor arguments")
        self.serialized = None

    def __setstate__(self, state):
        data = state.get("serialized") if isinstance(state, dict) else None
        if not isinstance(data, (bytes, bytearray)):
            raise UnsafePickleError(f"{self.kind} pickle has no serialized bytes")
        self.serialized = bytes(data)


class _Timeline:
    """Stands in for tftracer's Timeline while unpickling: keeps the messages of its state."""

    def __init__(self, *args):
        raise UnsafePickleError("tftracer Timeline pickled with constructor arguments")

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnsafePickleError("tftracer Timeline pickle has no attribute dict")
        self.messages = [item for value in state.values() for item in _flat(value) if isinstance(item, _Message)]


def _flat(value) -> list:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


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
        if (module, name) in _TIMELINES:
            return type("PickledTimeline", (_Timeline,), {})
        raise UnsafePickleError(f"pickle refers to {one_line(module, 80)}.{one_line(name, 80)}; only a "
                                "RunMetadata or StepStats (or a tftracer Timeline of them) may be loaded, "
                                "so nothing was run")

    def persistent_load(self, pid):
        raise UnsafePickleError("pickle uses persistent ids; refused")


def read(source: Source, parallelism: Parallelism) -> Trace:
    """A tfvis pickle: each message in it is a step."""
    messages = read_pickle(source.data, source.path)
    return read_run_metadatas([(i, "", blob) for i, (_, blob) in enumerate(messages)],
                              {"source_format": "pickle"}, path=source.path, parallelism=parallelism)


def read_pickle(data: bytes, path=None) -> list[tuple[str, bytes]]:
    """``[(kind, serialized), ...]`` for the RunMetadata/StepStats messages in a pickle
    (one message, a list/tuple/dict of them, or a tftracer Timeline holding them)."""
    _check_opcodes(data, path)
    try:
        value = _RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError as error:
        raise UnsafePickleError(error.reason, path=path) from None
    except RecursionError:
        raise TraceFormatError("not a readable pickle (nested too deeply)", path=path) from None
    except Exception as error:  # malformed pickles raise many kinds; none is ours to show raw
        raise TraceFormatError(f"not a readable pickle ({type(error).__name__}: {one_line(str(error))})",
                               path=path) from None
    if isinstance(value, _Timeline):
        items = [m for m in value.messages if m.kind in _TRACES]
    else:
        items = _flat(value)
    messages = [(item.kind, item.serialized) for item in items
                if isinstance(item, _Message) and item.kind in _TRACES and item.serialized is not None]
    if not messages or len(messages) != len(items):
        raise TraceFormatError("pickle holds no RunMetadata", path=path)
    return messages


def _check_opcodes(data: bytes, path) -> None:
    """Walk the opcodes before unpickling: Python's unpickler allocates what a counted
    opcode (BINBYTES8, BINUNICODE8, BYTEARRAY8, LONG4...) announces before reading it, so a
    14-byte pickle can ask for gigabytes. ``pickletools.genops`` reads each argument from
    the data, so a count larger than what remains fails here, having allocated nothing;
    so does a FRAME longer than the rest of the file."""
    stream = io.BytesIO(data)
    at = 0  # where the opcode being read starts
    try:
        for opcode, argument, _ in pickletools.genops(stream):
            if opcode.name == "FRAME" and argument > len(data) - stream.tell():
                raise ValueError(f"a frame of {argument} bytes, only {len(data) - stream.tell()} remain")
            at = stream.tell()
    except Exception as error:  # genops raises ValueError for truncated or unknown opcodes
        raise TraceFormatError(f"not a readable pickle ({one_line(str(error))})", path=path,
                               where=f"byte {at}") from None
