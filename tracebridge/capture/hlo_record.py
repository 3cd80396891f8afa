"""The optimized HLO of the ``jit_compile`` functions a capture ran, recorded at capture time.

TF's own profile of an XLA run on a CPU holds no HLO (its ``/host:metadata`` plane is
empty), yet the thunk events it records are named after HLO instructions, and only the
HLO says which TF ops each instruction computes (its ``metadata={op_name=...}``). XLA
compiles a function once per input shape, so the HLO is recorded once per distinct input
shapes a traced step ran: ``f.experimental_get_compiler_ir(*args)(stage=
"optimized_hlo_proto_serialized")``, a serialized HloProto. That compiles the function
again (a third of a second for a small one), so it runs when the trace is built, after
profiling, where its compile events land in no profile. The modules go into
``trace.metadata["hlo_modules"]`` (:mod:`tracebridge.model.hlo`).
"""

from __future__ import annotations

from typing import Any, Callable

from ..model.hlo import module_entry
from . import tf_internals

HLO_STAGE = "optimized_hlo_proto_serialized"
MAX_SIGNATURES = 16  # distinct input shapes recorded per capture (each keeps one call's inputs until then)


class HloRecorder:
    """Remembers one call's arguments per distinct input shapes of a ``jit_compile``
    function; :meth:`entries` compiles each to HLO and forgets them."""

    def __init__(self):
        self._calls: dict[str, tuple[Callable, tuple, dict]] = {}
        self._done: set[str] = set()  # signatures whose HLO an earlier build recorded

    def note_call(self, function: Callable, args: tuple, kwargs: dict, signature: str) -> None:
        if signature in self._calls or signature in self._done or \
                len(self._calls) + len(self._done) >= MAX_SIGNATURES or not tf_internals.jit_compiled(function):
            return
        self._calls[signature] = (function, args, kwargs)

    def clear(self) -> None:
        self._calls.clear()
        self._done.clear()

    def entries(self, notes: list[str]) -> list[dict[str, Any]]:
        """One ``hlo_modules`` entry per recorded signature; a failure is noted, not raised
        (the capture stands without HLO)."""
        from ..readers.hlo import hlo_op_map
        out = []
        for signature, (function, args, kwargs) in self._calls.items():
            try:
                data = function.experimental_get_compiler_ir(*args, **kwargs)(stage=HLO_STAGE)
                modules = hlo_op_map([data]).modules
            except Exception as error:
                notes.append(f"HLO not recorded for inputs {signature}: {str(error).splitlines()[0][:200]}")
                continue
            out.append(module_entry(modules[0].name if modules else "", None, data))
        self._done.update(self._calls)
        self._calls.clear()
        return out
