"""GPU kernel names as a reader takes them in: demangled, and shortened to the function and
its first template arguments.

CUDA libraries name kernels by their mangled C++ symbol: cuDNN's CUTLASS convolutions are
1.6 kB of ``_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemm...`` (11 kB once
demangled), and even a demangled name (``void convolve_common_engine_float_NHWC<float,
float, 1024, 5, 5, 3, ...>(int, int, ...)``) fills a line. :func:`short_kernel_name` keeps
what tells kernels apart, ``cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>``; a view
shows the whole, :func:`demangled`, on hover. Demangling is itanium_demangler's (pure
Python, the Itanium C++ ABI that CUDA's compilers follow); names that are not mangled, or
that it cannot read, are shortened as they are.
"""

from __future__ import annotations

import re
from functools import lru_cache

ELLIPSIS = "…"
_ARGUMENTS_SHOWN = 20  # characters of template arguments kept (the first one always)
# A demangled C++ function: a return type before a qualified name, or a qualified template.
_CPP = re.compile(r"(void|int|unsigned|float|double|bool|auto) [\w:]+[<(]|[\w]+::[\w:]+<")
_UNREADABLE_SHOWN = 60  # characters of a mangled name nothing could read


@lru_cache(maxsize=4096)
def demangled(name: str) -> str:
    """``name`` demangled where it is a mangled C++ symbol (``_Z...``), else as it is."""
    if not name.startswith("_Z"):
        return name
    try:
        import itanium_demangler
        found = itanium_demangler.parse(name)
    except ImportError:  # a dependency of the package; a partial install shows the symbol cut
        return name
    except Exception:  # the demangler's own parse errors: the symbol stays as it is
        return name
    return str(found) if found is not None else name


@lru_cache(maxsize=4096)
def short_kernel_name(name: str) -> str:
    """The function a kernel runs with its first template arguments, no return type and no
    parameters: ``cutlass__5x_cudnn::Kernel<ImplicitGemmConvolution<…>>``. A plain name
    (``loop_add_fusion_1``, ``sm90_xmma_gemm_...``) stays as it is."""
    text = demangled(name)
    if text.startswith("_Z"):  # mangled, and unreadable
        return text if len(text) <= _UNREADABLE_SHOWN else text[:_UNREADABLE_SHOWN] + ELLIPSIS
    if text == name and not _CPP.match(text):  # not C++ (PjitFunction(train_step), jit_f(1219...))
        return text
    text = text.replace("(anonymous namespace)::", "")
    name_start, name_end = _function_name(text)
    short = text[name_start:name_end]
    if name_end < len(text) and text[name_end] == "<":
        arguments = _top_level_arguments(text, name_end)
        shown = [_short_argument(arguments[0])] if arguments else []
        for argument in arguments[1:]:
            candidate = _short_argument(argument)
            if len(", ".join(shown + [candidate])) > _ARGUMENTS_SHOWN:
                shown.append(ELLIPSIS)
                break
            shown.append(candidate)
        short += "<" + ", ".join(shown) + ">"
    return short


def _function_name(text: str) -> tuple[int, int]:
    """Where the function's qualified name is: after the return type (the last space outside
    brackets before it), up to its template arguments or parameters."""
    depth, start = 0, 0
    for at, char in enumerate(text):
        if char in "<(":
            if depth == 0 and at > start:
                return start, at
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == " " and depth == 0:
            start = at + 1
    return start, len(text)


def _top_level_arguments(text: str, opening: int) -> list[str]:
    """The template arguments of the ``<`` at ``opening``, split at its own commas."""
    depth, start, found = 0, opening + 1, []
    for at in range(opening, len(text)):
        char = text[at]
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
            if depth == 0:
                found.append(text[start:at].strip())
                break
        elif char == "," and depth == 1:
            found.append(text[start:at].strip())
            start = at + 1
    return [a for a in found if a]


def _short_argument(argument: str) -> str:
    """A template argument's last name, its own arguments elided: ``a::b::C<x, y>`` is
    ``C<…>``; ``float``, ``1024``, ``(int)64`` stay."""
    head, bracket, _ = argument.partition("<")
    head = head.rsplit("::", 1)[-1] if "::" in head else head
    return head + ("<" + ELLIPSIS + ">" if bracket else "")


__all__ = ["demangled", "short_kernel_name"]
