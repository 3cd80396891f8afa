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
import pickletools

from ..errors import TraceFormatError, UnsafePickleError, one_line
from ..model.trace import Trace
from ..options import Parallelism
from .sources import Source
from .stepstats import read_run_metadatas

_MESSAGES = {
    ("tensorflow.core.protobuf.config_pb2", "RunMetadata"): "RunMetadata",
    ("tensorflow.core.framework.step_stats_pb2", "StepStats"): "StepStats",
}


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
        raise UnsafePickleError(f"pickle refers to {one_line(module, 80)}.{one_line(name, 80)}; only a "
                                "RunMetadata or StepStats may be loaded, so nothing was run")

    def persistent_load(self, pid):
        raise UnsafePickleError("pickle uses persistent ids; refused")


def read(source: Source, parallelism: Parallelism) -> Trace:
    """A tfvis pickle: each message in it is a step."""
    messages = read_pickle(source.data, source.path)
    return read_run_metadatas([(i, "", blob) for i, (_, blob) in enumerate(messages)],
                              {"source_format": "pickle"}, path=source.path, parallelism=parallelism)


def read_pickle(data: bytes, path=None) -> list[tuple[str, bytes]]:
    """``[(kind, serialized), ...]`` for the RunMetadata/StepStats messages in a pickle
    (one message, or a list/tuple/dict of them)."""
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
    items = list(value.values()) if isinstance(value, dict) else value
    items = items if isinstance(items, (list, tuple)) else [items]
    messages = [(item.kind, item.serialized) for item in items
                if isinstance(item, _Message) and item.serialized is not None]
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
