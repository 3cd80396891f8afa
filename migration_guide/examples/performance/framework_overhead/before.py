"""framework_overhead, before: a small MLP trained with Keras fit, one step per call into the
framework. Its ops take a fraction of a millisecond; each step's call (tf.function dispatch,
Keras's step function, the executor) takes longer than they do."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples' shared model

from _model import *  # noqa: E402,F403

model = small_mlp()
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # BEFORE
report(fit_run(model, steps_per_execution=1))
