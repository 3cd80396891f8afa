"""Regenerate ``tracebridge/migrate/tf1_names.txt``: the TF1 API names that need ``compat.v1``.

A name is listed when ``tf.compat.v1.<name>`` exists but ``tf.<name>`` is missing in TF2 or
is a different object (``tf.summary.scalar``, ``tf.nn.dropout``): the codemod rewrites
``tf.<name>`` to ``tf.compat.v1.<name>`` in TF1 scripts, which keeps TF1's meaning. A line is
``name`` when TF2 lacks the name (always rewritten in a TF1 script), ``name *`` when TF2's is
different (rewritten in graph code only: a TF2 part of the same file keeps TF2's), and
``name p1,p2`` when TF2's parameters are the first of TF1's (``tf.constant`` drops
``verify_shape``): only graph-code calls passing other arguments are rewritten. Run with
the TensorFlow the table is for (the file records its version)::

    .venv/bin/python tools/gen_tf1_names.py
"""

import inspect
import sys
from pathlib import Path

import tensorflow as tf

OUT = Path(__file__).resolve().parent.parent / "tracebridge" / "migrate" / "tf1_names.txt"


def walk(v1_module, v2_module, prefix, seen):
    for name in sorted(_members(v1_module)):
        # Keras is its own package in TF 2.21 (tf.keras is Keras 3): not a compat.v1 matter.
        if name.startswith("_") or (not prefix and name in ("compat", "keras")):
            continue
        v1_value = _get(v1_module, name)
        if v1_value is None:
            continue
        path = f"{prefix}{name}"
        v2_value = _get(v2_module, name) if v2_module is not None else None
        if inspect.ismodule(v1_value):
            if id(v1_value) in seen:
                continue
            seen.add(id(v1_value))
            if v2_value is None or not inspect.ismodule(v2_value):
                yield path  # the whole module is TF1-only (tf.layers, tf.app): its prefix is enough
            elif getattr(v1_value, "__name__", "").startswith("tensorflow._api."):
                # Only TF's API namespaces; not modules they re-export (absl flags, mock).
                yield from walk(v1_value, v2_value, path + ".", seen)
        elif v2_value is None:
            yield path
        elif v2_value is not v1_value:
            shared = _shared_parameters(v1_value, v2_value)
            yield f"{path} *" if shared is None else f"{path} {','.join(shared)}"


def _parameters(value):
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in signature.parameters.values() if p.kind in kinds]


def _shared_parameters(v1_value, v2_value):
    """TF2's parameters when they are the first ones of TF1's, in the same order (tf.constant
    only drops ``verify_shape``): a call passing only those means the same in both, so the
    codemod renames only calls that pass more. None when the signatures disagree."""
    v1, v2 = _parameters(v1_value), _parameters(v2_value)
    if not v1 or not v2 or v1[: len(v2)] != v2:
        return None
    return v2


def _members(module):
    try:
        return dir(module)
    except Exception:  # lazy loaders of optional packages that are not installed
        return []


def _get(module, name):
    try:
        return getattr(module, name, None)
    except Exception:
        return None


def main():
    names = sorted(set(walk(tf.compat.v1, tf, "", set())))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    header = f"# TF1 names that need tf.compat.v1 under TensorFlow {tf.__version__} (tools/gen_tf1_names.py)\n"
    OUT.write_text(header + "\n".join(names) + "\n")
    print(f"{len(names)} names -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
