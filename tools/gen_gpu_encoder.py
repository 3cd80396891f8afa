"""Record a JAX transformer encoder's training steps on a GPU, with CUDA graphs (XLA command
buffers) on and off: ``tests/data/gpu/jax_encoder_{graphs,nographs}.xplane.pb``.

With command buffers on, XLA runs cuBLAS and cuDNN calls inside CUDA graphs: their kernels
carry ``hlo_op=command_buffer_N`` and a library's kernel name, not an instruction's, which is
what once left a third of an encoder's device time on ``XlaModule``. The same model with
command buffers off (``--xla_gpu_enable_command_buffer=``) names every kernel's instruction,
so the pair is its own reference for which op owns each kernel.

Needs a CUDA GPU and ``jax[cuda]``; JAX only makes the files, it is no dependency of
tracebridge. One process a setting, since XLA reads its flags once::

    python tools/gen_gpu_encoder.py --out tests/data/gpu                       # both settings
    python tools/gen_gpu_encoder.py --out tests/data/gpu --attention cudnn     # cuDNN's attention

Each file: 3 steps marked with ``StepTraceAnnotation`` after a compiling step, the Python
tracer off. Layer scopes are ``jax.named_scope`` names (``encoder/layer_N/attention``...),
so an op name tells its layer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jax_profile import profile_steps  # noqa: E402

SETTINGS = {  # each setting's flags, tried in order until an XLA accepts them
    # Library calls (cuBLAS GEMMs, cuDNN) inside graphs, and graphs of any size, as large
    # models get by default; the second line is for an XLA that knows fewer command kinds.
    "graphs": ["--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN "
               "--xla_gpu_graph_min_graph_size=1",
               "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"],
    "nographs": ["--xla_gpu_enable_command_buffer="],
}
LAYERS, D_MODEL, HEADS, D_FF, SEQ, BATCH, VOCAB, CLASSES = 4, 256, 8, 1024, 128, 32, 1000, 10


def _encoder(attention: str):
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.RandomState(0)

    def normal(*shape, scale=0.02):
        # NumPy, not jax.random: each jax.random call is a module whose HLO would fill the file.
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    params = {"embedding": normal(VOCAB, D_MODEL), "position": normal(SEQ, D_MODEL),
              "classifier": {"w": normal(D_MODEL, CLASSES), "b": np.zeros(CLASSES, np.float32)}}
    for i in range(LAYERS):
        params[f"layer_{i}"] = {
            "ln1": {"g": np.ones(D_MODEL, np.float32), "b": np.zeros(D_MODEL, np.float32)},
            "qkv": normal(D_MODEL, 3 * D_MODEL), "out": normal(D_MODEL, D_MODEL),
            "ln2": {"g": np.ones(D_MODEL, np.float32), "b": np.zeros(D_MODEL, np.float32)},
            "ff1": normal(D_MODEL, D_FF), "ff2": normal(D_FF, D_MODEL)}

    def layer_norm(x, p):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-6) * p["g"] + p["b"]

    def block(x, p):
        with jax.named_scope("attention"):
            h = layer_norm(x, p["ln1"])
            q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
            split = lambda t: t.reshape(BATCH, SEQ, HEADS, D_MODEL // HEADS).transpose(0, 2, 1, 3)  # noqa: E731
            if attention == "cudnn":  # cuDNN's fused attention: a library call of several kernels
                q, k, v = (t.reshape(BATCH, SEQ, HEADS, D_MODEL // HEADS).astype(jnp.bfloat16) for t in (q, k, v))
                mixed = jax.nn.dot_product_attention(q, k, v, implementation="cudnn")
                mixed = mixed.astype(jnp.float32).reshape(BATCH, SEQ, D_MODEL)
            else:
                q, k, v = split(q), split(k), split(v)
                weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(D_MODEL // HEADS), axis=-1)
                mixed = (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D_MODEL)
            x = x + mixed @ p["out"]
        with jax.named_scope("feed_forward"):
            h = layer_norm(x, p["ln2"])
            x = x + jax.nn.gelu(h @ p["ff1"]) @ p["ff2"]
        return x

    def loss(params, tokens, labels):
        with jax.named_scope("encoder"):
            x = params["embedding"][tokens] + params["position"]
            for i in range(LAYERS):
                with jax.named_scope(f"layer_{i}"):
                    x = block(x, params[f"layer_{i}"])
        with jax.named_scope("classifier"):
            logits = x.mean(1) @ params["classifier"]["w"] + params["classifier"]["b"]
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))

    @jax.jit
    def train_step(params, tokens, labels):
        value, grads = jax.value_and_grad(loss)(params, tokens, labels)
        with jax.named_scope("sgd"):
            return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value

    tokens = rng.randint(0, VOCAB, (BATCH, SEQ)).astype(np.int32)
    labels = rng.randint(0, CLASSES, (BATCH,)).astype(np.int32)
    return train_step, params, tokens, labels


def record(setting: str, attention: str, out: Path) -> Path:
    """In this process (XLA_FLAGS already set): compile, then profile three steps."""
    import jax

    step, params, tokens, labels = _encoder(attention)
    params, _ = step(params, tokens, labels)  # compile outside the profile
    jax.block_until_ready(params)
    state = {"params": params}

    def run_step():
        state["params"], value = step(state["params"], tokens, labels)
        jax.block_until_ready(value)
    target = profile_steps(run_step, out / f"{_stem(attention)}_{setting}.xplane.pb")
    meta = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "XLA_FLAGS": os.environ["XLA_FLAGS"],
            "model": {"layers": LAYERS, "d_model": D_MODEL, "heads": HEADS, "d_ff": D_FF, "seq": SEQ,
                      "batch": BATCH, "attention": attention}}
    (out / f"{_stem(attention)}_{setting}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return target


def _stem(attention: str) -> str:
    return "jax_encoder" if attention == "xla" else f"jax_encoder_{attention}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu")
    parser.add_argument("--setting", choices=sorted(SETTINGS), help="record one setting in this process")
    parser.add_argument("--attention", choices=["xla", "cudnn"], default="xla",
                        help="XLA's own attention (the default), or cuDNN's fused one (bf16)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.setting:
        path = record(args.setting, args.attention, args.out)
        print(f"{path}: {path.stat().st_size} bytes")
        return 0
    failed = 0
    for setting, alternatives in SETTINGS.items():
        for flags in alternatives:
            env = dict(os.environ, XLA_FLAGS=flags)
            done = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--setting", setting,
                                   "--attention", args.attention], env=env)
            if done.returncode == 0:
                break
        failed += done.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
