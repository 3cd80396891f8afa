"""The JSON that ``summary``, ``advise``, ``doctor`` and ``compare`` print for the corpus'
files: what a refactor must leave as it is (tests/test_corpus_outputs.py), byte for byte.

Each output is the CLI's own ``--json`` text with the corpus folder written as
``<corpus>`` (doctor names the files it checks), one file per command and input under
``tests/data/corpus_outputs/``. A change meant to alter them records them again::

    .venv/bin/python tools/gen_corpus_outputs.py

and the diff of that folder is the change's effect on every output, for review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[1] / "data" / "corpus_outputs"
ONE_RUN = ("chrome/blackbox_attacks_timeline_01.json", "chrome/ikhlestov_cpu_timeline_01.json",
           "chrome/ikhlestov_cpu_timeline_02_step_0.json", "chrome/ikhlestov_gpu_timeline_01.json",
           "chrome/ikhlestov_gpu_timeline_03_merged_5_runs.json", "xspace/jax_h100_convnet_graphs.xplane.pb",
           "xspace/jax_h100_convnet_nographs.xplane.pb", "xspace/jax_h100_mlp_graphs.xplane.pb",
           "xspace/jax_h100_mlp_nographs.xplane.pb", "xspace/tfprofiler_gpu_multi_worker.xplane.pb",
           "xspace/xprof_tpu_inference_2.xplane.pb")
PAIRS = (("chrome/ikhlestov_cpu_timeline_02_step_0.json", "chrome/ikhlestov_cpu_timeline_01.json"),
         ("chrome/ikhlestov_gpu_timeline_01.json", "chrome/ikhlestov_gpu_timeline_03_merged_5_runs.json"),
         ("xspace/jax_h100_mlp_nographs.xplane.pb", "xspace/jax_h100_mlp_graphs.xplane.pb"),
         ("xspace/jax_h100_convnet_nographs.xplane.pb", "xspace/jax_h100_convnet_graphs.xplane.pb"))


def outputs(corpus: Path, run_cli: Callable) -> Iterator[tuple[str, str]]:
    """(file name, JSON text) for every recorded output, made now with ``run_cli``."""
    def text(*args) -> str:
        done = run_cli(*args)
        assert done.returncode in (0, 1), (args, done.stderr)
        return done.stdout.replace(str(corpus), "<corpus>")
    for name in ONE_RUN:
        for command in ("summary", "advise", "doctor"):
            yield f"{Path(name).name}.{command}.json", text(command, "--json", corpus / name)
    for control, test in PAIRS:
        yield f"{Path(control).name}~{Path(test).name}.compare.json", text("compare", "--json", corpus / control,
                                                                         corpus / test)
