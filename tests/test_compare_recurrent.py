"""Recurrent TF1 models against their Keras 3 ports (issue 32: compare by layer), from the
captures recorded in tests/data/recurrent (tools/gen_recurrent_data.py) and, for the
language model, live. tests/models_recurrent.py builds the pairs; each op is judged by
tests/helpers/recurrent_judges.py from the scopes the model code controls, not by
tracebridge; tests/helpers/layer_quality.py measures the comparison against that judge.

The recorded captures make the shares of op time fixed numbers, so the issue's bar is
asserted on them. The cases today's comparison fails are marked xfail (FAILING_TODAY,
issue 32). Figures print with ``pytest -s``.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

import tracebridge
from tests.helpers.layer_quality import print_figures, quality, wrong_rows
from tests.helpers.recurrent_judges import MODEL_LAYERS, judge
from tests.models_recurrent import PAIRS, capture
from tracebridge import compare

pytestmark = pytest.mark.tf
DATA = Path(__file__).resolve().parent / "data" / "recurrent"
RECORDED = json.loads((DATA / "recorded.json").read_text())
MODELS = sorted(RECORDED["first_loss"])
PORTS = ("function", "fit")
CASES = [(model, world) for model in MODELS for world in PORTS]
COMPUTE = re.compile(r"MatMul|BatchMatMul|Conv2D|Einsum|FusedBatchNorm")
ISSUE_32 = pytest.mark.xfail(strict=True, reason="issue 32: layer attribution")
# The cases today's comparison fails, per test (main at 20b63b7; the lead flips them as the
# layer attribution improves). Compute rows: Keras's encoder gradient paired with TF1's
# decoder (seq2seq), the forward and backward LSTM of a bidirectional encoder, the tagger's
# first cell with Keras's second LSTM.
# What the comparison still misses (the closing note of issue 32 has the figures):
# - tagger: TF1's one loop runs both cells, Keras a loop each: the first iteration's concat
#   of cell 1 reads cell 0's output and the zero state, and takes cell 0's layer;
# - seq2seq: the attention's ops fall between the decoder and the attention layer, and the
#   judge counts Adam's moments of a clipped gradient as the clip (the layer rows hold);
# - sparse: TF1 reads its batches with an iterator the port does not run (14% of its op
#   time, unmatched: coverage 86%);
# - gru (tf.function): 8% of the port's matched time in rows with a gradient accumulator
#   the judge places in the backward pass.
FAILING_TODAY = {
    "compute_rows": {"seq2seq", "tagger"},
    "matched_time": {"seq2seq", "sparse", "tagger"},
    "layer_rows": {("sparse", "function")},
}


def cases(test: str) -> list:
    """CASES, those FAILING_TODAY[test] names (a model, or a (model, world)) marked xfail."""
    failing = FAILING_TODAY[test]
    return [pytest.param(model, world, marks=ISSUE_32) if model in failing or (model, world) in failing
            else (model, world) for model, world in CASES]


@functools.lru_cache(maxsize=None)
def recorded(model: str, world: str):
    return tracebridge.load(DATA / f"{model}_{world}.json.gz")


@functools.lru_cache(maxsize=None)
def measured(model: str, world: str):
    """The comparison of the recorded TF1 run with one port, its judges and figures."""
    control, test = recorded(model, "tf1"), recorded(model, world)
    result = compare(control, test, warmup=1)
    judges = {"control": judge(model, "tf1", control), "test": judge(model, world, test)}
    figures = quality(result, judges)
    print_figures(f"{model} tf1 vs {world}", figures)
    return result, judges, figures


def compute_rows(result):
    return [r for r in result.rows if r.names.control and r.names.test and COMPUTE.search(r.op_type)]


def crossing(result, judges) -> list[str]:
    """The compute rows whose ops the judge places differently on the two sides."""
    out = []
    for row in compute_rows(result):
        control = {judges["control"](n).place for n in row.names.control}
        test = {judges["test"](n).place for n in row.names.test}
        if control != test:
            out.append(f"{row.key} [{row.rule} {row.confidence}]: {sorted(control)} vs {sorted(test)}")
    return out


def test_the_recordings_compute_the_same_model_in_every_world():
    for model, losses in RECORDED["first_loss"].items():
        assert set(losses) == {"tf1", *PORTS}, model
        assert max(losses.values()) - min(losses.values()) < 1e-4 * max(losses.values()), (model, losses)


@pytest.mark.parametrize("model,world", CASES)
def test_the_judge_places_every_op(model, world):
    """What holds today: both runs carry their graphs, and the judge places all but a
    sliver of each side's op time, every layer forward, backward and update on both sides
    (but an embedding's backward: its gradient is IndexedSlices, whose values are the
    gradient that reaches it, and TF2 runs no op to make them)."""
    result, judges, figures = measured(model, world)
    assert not any("no graph recorded" in note for note in result.notes)
    assert figures["unjudged_control"] < 0.01 and figures["unjudged_test"] < 0.01, figures
    for side in ("control", "test"):
        trace = getattr(result, side)
        placed = {judges[side](name).place for name in trace.column_strings("ops", "name")}
        layers = MODEL_LAYERS[model]
        for layer in layers.keras:
            wanted = {(layer, "forward")} | (set() if layer in layers.stateless else {(layer, "update")}) | \
                (set() if "embedding" in layer else {(layer, "backward")})
            assert wanted <= placed, (side, layer, wanted - placed)


@pytest.mark.parametrize("model,world", cases("compute_rows"))
def test_compute_rows_pair_one_layer_and_direction(model, world):
    result, judges, _ = measured(model, world)
    assert compute_rows(result)
    assert not crossing(result, judges), "\n".join(crossing(result, judges))


@pytest.mark.parametrize("model,world", cases("matched_time"))
def test_matched_time_is_the_same_computation(model, world):
    """The issue's bar: >= 90% of op time matched on both sides, >= 90% of matched time
    paired with the same computation and <= 5% paired wrong."""
    result, judges, figures = measured(model, world)
    report = "\n".join(wrong_rows(result, judges))
    assert figures["coverage_control"] >= 0.9 and figures["coverage_test"] >= 0.9, figures
    assert figures["right_control"] >= 0.9 and figures["right_test"] >= 0.9, (figures, report)
    assert figures["wrong_control"] <= 0.05 and figures["wrong_test"] <= 0.05, (figures, report)


@pytest.mark.parametrize("model,world", cases("layer_rows"))
def test_layer_rows_hold_the_time_by_the_same_layer(model, world):
    """The layer table: its rows hold >= 90% of each side's op time, and >= 90% of that is
    the same layer on both sides."""
    _, _, figures = measured(model, world)
    assert "in_layers_control" in figures, "the comparison has no layer table"
    assert figures["in_layers_control"] >= 0.9 and figures["in_layers_test"] >= 0.9, figures
    assert figures["same_layer_control"] >= 0.9 and figures["same_layer_test"] >= 0.9, figures


# --- live: the language model captured now, in this process --------------------------------
@pytest.fixture(scope="module")
def live_lm(tf):
    pair = PAIRS["lm"]
    return {world: capture(tf, pair, world, steps=4) for world in ("tf1", *PORTS)}


@pytest.mark.slow
def test_live_lm_ports_compute_the_model(live_lm):
    losses = {world: trace.metadata["first_loss"] for world, trace in live_lm.items()}
    assert max(losses.values()) - min(losses.values()) < 1e-4 * max(losses.values()), losses
    for world in PORTS:
        result = compare(live_lm["tf1"], live_lm[world], warmup=1)
        judges = {"control": judge("lm", "tf1", live_lm["tf1"]), "test": judge("lm", world, live_lm[world])}
        print_figures(f"lm tf1 vs {world} (live)", quality(result, judges))
        assert not any("no graph recorded" in note for note in result.notes)
        assert compute_rows(result)


@pytest.mark.slow
@pytest.mark.parametrize("world", PORTS)
def test_live_lm_compute_rows_pair_one_layer_and_direction(live_lm, world):
    result = compare(live_lm["tf1"], live_lm[world], warmup=1)
    judges = {"control": judge("lm", "tf1", live_lm["tf1"]), "test": judge("lm", world, live_lm[world])}
    assert not crossing(result, judges)


def test_the_layer_figures_read_a_layer_table():
    """layer_quality reads the layer table the issue asks for (``result.layers``,
    ``result.op_layers``) where a comparison has one: a table made from the judge itself
    holds all op time, nearly all of it the same layer; one that pairs the GRU's ops with
    the classifier's has none the same."""
    from types import SimpleNamespace

    from tracebridge.analysis.compare import PerSide
    result, judges, _ = measured("gru", "function")
    result = SimpleNamespace(**vars(result))  # the cached comparison stays as it is
    names = {side: set(getattr(result, side).column_strings("ops", "name")) for side in ("control", "test")}
    by_place: dict = {}
    for side in ("control", "test"):
        for name in names[side]:
            by_place.setdefault(judges[side](name).place, {"control": [], "test": []})[side].append(name)
    result.layers = [SimpleNamespace(label=str(place), phase=place[1], control_names=found["control"],
                                     test_names=found["test"], control_total_ns=0, test_total_ns=0)
                     for place, found in by_place.items()]
    result.op_layers = PerSide(*({name: (judges[side](name).place[0], "phase") for name in names[side]}
                                 for side in ("control", "test")))
    figures = quality(result, judges)
    assert figures["in_layers_control"] == pytest.approx(1) and figures["in_layers_test"] == pytest.approx(1)
    # all but what one side runs and the other lacks (TF1's _SOURCE, its feeds)
    assert figures["same_layer_control"] > 0.99 and figures["same_layer_test"] > 0.99, figures
    assert figures["label_agrees_control"] == pytest.approx(1) and figures["labels_same"] == 1.0
    result.layers = [SimpleNamespace(label="gru", phase="forward", control_total_ns=0, test_total_ns=0,
                                     control_names=[n for n in names["control"] if judges["control"](n).layer == "gru"],
                                     test_names=[n for n in names["test"] if judges["test"](n).layer == "classifier"])]
    figures = quality(result, judges)
    assert figures["in_layers_control"] > 0.5 and figures["same_layer_control"] == 0 == figures["same_layer_test"]
