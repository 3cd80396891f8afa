"""framework_overhead, after: 32 steps per call (steps_per_execution), so that the framework's
cost is paid once for 32 steps' ops."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

model = small_mlp()
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              steps_per_execution=32)  # AFTER
report(fit_run(model, steps_per_execution=32))
