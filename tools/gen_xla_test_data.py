"""Record small real XLA-on-CPU profiles for the tests: ``tests/data/xla/*.xplane.pb``.

JAX's profiler runs the same XLA CPU runtime that TensorFlow's ``jit_compile`` does, and
its XSpace has what tracebridge needs and TF's CPU profile lacks: every module's HLO in
``/host:metadata`` (the ``Hlo Proto`` stat) and ``hlo_op``/``hlo_module``/``program_id`` on
each thunk event. JAX is only a tool to make these files, not a dependency of tracebridge::

    pip install --target /tmp/jaxenv jax jaxlib        # or into any venv
    PYTHONPATH=/tmp/jaxenv .venv/bin/python tools/gen_xla_test_data.py

Each file: one jitted training step of a small model, 3 steps marked with
``StepTraceAnnotation``, Python tracer off (it would dwarf the rest), thread pool of one
XLA CPU client. Files stay small (tens of KB each).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jax_profile import profile_steps  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "xla"


def _mlp():
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        logits = hidden @ params["w2"] + params["b2"]
        return jnp.mean((logits - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    rng = np.random.RandomState(0)
    params = {"w1": _normal(rng, 64, 128), "b1": _normal(rng, 128),
              "w2": _normal(rng, 128, 10), "b2": _normal(rng, 10)}
    return train_step, params, (_normal(rng, 32, 64), _normal(rng, 32, 10))


def _convnet():
    import jax
    import jax.numpy as jnp

    def loss(params, x):
        h = jax.lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h + params["b1"])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.mean(h.reshape(h.shape[0], -1) @ params["w"])

    @jax.jit
    def train_step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    rng = np.random.RandomState(1)
    params = {"k1": _normal(rng, 3, 3, 3, 8), "b1": _normal(rng, 8), "w": _normal(rng, 8 * 8 * 8, 1)}
    return train_step, params, (_normal(rng, 8, 16, 16, 3),)


def _normal(rng, *shape):
    # NumPy, not jax.random: each jax.random call is a module whose HLO would fill the file.
    return rng.standard_normal(shape).astype(np.float32)


def record(name: str, build) -> Path:
    import jax

    step, params, batch = build()
    params = step(params, *batch)  # compile outside the profile
    jax.block_until_ready(params)
    state = {"params": params}

    def run_step():
        state["params"] = step(state["params"], *batch)
        jax.block_until_ready(state["params"])
    return profile_steps(run_step, OUT / f"jax_cpu_{name}.xplane.pb")


def main() -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in (("mlp", _mlp), ("convnet", _convnet)):
        path = record(name, build)
        print(f"{path.relative_to(REPO)}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
