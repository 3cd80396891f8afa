"""One JAX profile of a few steps, for the tools that record test data (JAX is a tool here,
not a dependency of tracebridge)."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path


def profile_steps(run_step, target: Path, steps: int = 3) -> Path:
    """``run_step()`` (one step, blocking until its results are ready) ``steps`` times, each
    marked with ``StepTraceAnnotation``, the Python tracer off (it would dwarf the rest);
    the XSpace written to ``target``."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.host_tracer_level = 2
    with tempfile.TemporaryDirectory() as logdir:
        jax.profiler.start_trace(logdir, profiler_options=options)
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                run_step()
        jax.profiler.stop_trace()
        found = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
        if len(found) != 1:
            raise SystemExit(f"expected one .xplane.pb, found {found}")
        shutil.copy(found[0], target)
    return target
