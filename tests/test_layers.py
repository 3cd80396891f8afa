"""Compare by layer (issue 32): each op in a layer and phase by dataflow from the variables
(tracebridge/analysis/graphs/layers.py), the two runs' layers paired by parameters, and the
layer table. Read from the captures recorded in tests/data/recurrent (a TF1 LSTM language
model, ``BasicLSTMCell`` unrolled 20 steps, against its Keras 3 port), so no TensorFlow; the
judge of each op (tests/helpers/recurrent_judges.py) reads the scopes the model code chose,
not tracebridge's attribution.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import tracebridge
from tests.conftest import run_cli
from tests.helpers.browser import browser_mark
from tests.test_html import Opened
from tests.helpers.recurrent_judges import judge
from tracebridge import compare
from tracebridge.analysis.graphs.layers import Layer, LayerPair, attribute, pair_layers
from tracebridge.analysis.graphs.recorded_graph import decode_graph
from tracebridge.writers.compare_html import write_compare_html

DATA = Path(__file__).resolve().parent / "data" / "recurrent"
PORTS = ("function", "fit")


@functools.lru_cache(maxsize=None)
def recorded(world: str):
    return tracebridge.load(DATA / f"lm_{world}.json.gz")


@functools.lru_cache(maxsize=None)
def compared(world: str):
    return compare(recorded("tf1"), recorded(world), warmup=1)


def test_variables_group_into_the_models_layers():
    layers = attribute(decode_graph(recorded("tf1").metadata)).layers
    shapes = [sorted(layer.shapes) for layer in layers]
    # the embedding, two BasicLSTMCells (one [400, 800] kernel each) and the softmax,
    # whose weight and bias a TF1 model keeps at one scope with the embedding
    assert shapes[0] == [(2000, 200)] and shapes[-1] == [(200, 2000), (2000,)]
    assert [(400, 800), (800,)] in shapes
    assert sum(1 for s in shapes if s == [(400, 800), (800,)]) == 2
    assert len(layers) == 4, [layer.name for layer in layers]
    keras = attribute(decode_graph(recorded("function").metadata)).layers
    assert sum(1 for layer in keras if sorted(layer.shapes) == [(200, 800), (200, 800), (800,)]) == 2
    assert len(keras) == 4, [layer.name for layer in keras]


@pytest.mark.parametrize("world", PORTS)
def test_layers_pair_by_parameters_not_names(world):
    result = compared(world)
    pairs = result.layer_map.keys
    assert len(pairs) == 4
    for key, sides in pairs.items():
        assert sides.control and sides.test, key
        assert sum(layer.parameters for layer in sides.control) == sum(layer.parameters for layer in sides.test)
    variables = result.to_dict()["variables"]
    assert any(item["control"]["shapes"] == [[400, 800], [800]] and sorted(item["test"]["shapes"]) ==
               [[200, 800], [200, 800], [800]] for item in variables), variables


@pytest.mark.parametrize("world", PORTS)
def test_compute_ops_are_attributed_to_the_layer_that_computes_them(world):
    """The judge's layer of every MatMul (forward, gradient) against its zone's layer pair."""
    result = compared(world)
    judges = {"control": judge("lm", "tf1", result.control), "test": judge("lm", world, result.test)}
    for side, zones in result.layer_map.zones.items():
        by_key: dict[str, set] = {}
        for name, (key, phase) in zones.items():
            judgement = judges[side](name)
            if key is not None and "MatMul" in name and judgement.layer:
                by_key.setdefault(key, set()).add(judgement.layer)
        for key, judged in by_key.items():
            assert len(judged) == 1, (side, key, judged)


@pytest.mark.parametrize("world", PORTS)
def test_no_row_pairs_ops_of_different_layers(world):
    result = compared(world)
    zones = result.layer_map.zones
    for row in result.rows:
        if row.names.control and row.names.test:
            found_c = {zones.control[n] for n in row.names.control if n in zones.control}
            found_t = {zones.test[n] for n in row.names.test if n in zones.test}
            assert not found_c or not found_t or found_c & found_t, row.key


@pytest.mark.parametrize("world", PORTS)
def test_the_unrolled_copies_and_the_loop_body_are_one_row(world):
    """20 unrolled TF1 copies of the cell's matmul against the Keras loop body's matmuls."""
    result = compared(world)
    rows = [r for r in result.rows if r.rule == "layer+type" and "MatMul" in r.key
            and "forward" in r.key and len(r.names.control) >= 20]
    assert len(rows) == 2, [r.key for r in result.rows if r.rule == "layer+type"]
    for row in rows:
        assert len(row.names.test) <= 4 and row.count.test >= 20 * result.steps.test.count


@pytest.mark.parametrize("world", PORTS)
def test_the_layer_table_holds_the_op_time(world):
    result = compared(world)
    table = result.to_dict()["layers"]
    assert table and {"control_names", "test_names", "control_total_ns", "test_total_ns"} <= set(table[0])
    labels = [item["label"] for item in table]
    # the model's order: input, the four layers (forward, backward, update), loss, clip
    assert labels[0] == "input"
    assert labels.index("loss") > max(i for i, item in enumerate(table) if item["key"])
    layered = sum(item["control_total_ns"] + item["test_total_ns"] for item in table if item["key"])
    everything = sum(item["control_total_ns"] + item["test_total_ns"] for item in table)
    assert layered > 0.8 * everything
    text = result.to_text()
    assert "by layer (time per step" in text
    assert text.index("by layer") < text.index("rule          op")
    note = next(n for n in result.notes if "structure paired" in n and "op time that does work" in n)
    assert "within each layer and phase" in note


def test_cli_json_has_the_layer_table():
    done = run_cli("compare", str(DATA / "lm_tf1.json.gz"), str(DATA / "lm_function.json.gz"), "--warmup", "1",
                   "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["layers"] and report["variables"]
    assert all(isinstance(item["control_names"], list) for item in report["layers"])


def _layer(index, *shapes):
    params = sum(__import__("math").prod(s) for s in shapes)
    return Layer(index=index, name=f"l{index}", variables=tuple(f"v{k}" for k in range(len(shapes))),
                 shapes=shapes, parameters=params)


def test_pairing_merges_what_one_side_splits():
    # TF1 GRUCell: gates [in+h, 2h] + candidate [in+h, h] (two scopes) against one Keras GRU
    control = [_layer(0, (1000, 64)), _layer(1, (192, 256), (256,)), _layer(2, (192, 128), (128,)),
               _layer(3, (128, 10), (10,))]
    test = [_layer(0, (1000, 64)), _layer(1, (64, 384), (128, 384), (2, 384)), _layer(2, (128, 10), (10,))]
    pairs = pair_layers(control, test)
    assert LayerPair((1, 2), (1,)) in pairs
    assert LayerPair((0,), (0,)) in pairs and LayerPair((3,), (2,)) in pairs


def test_pairing_finds_branches_built_in_the_other_order():
    control = [_layer(0, (3, 3, 3, 16)), _layer(1, (1, 1, 16, 32)), _layer(2, (3, 3, 16, 32)), _layer(3, (32, 10))]
    test = [_layer(0, (3, 3, 3, 16)), _layer(1, (3, 3, 16, 32)), _layer(2, (1, 1, 16, 32)), _layer(3, (32, 10))]
    pairs = pair_layers(control, test)
    assert LayerPair((1,), (2,)) in pairs and LayerPair((2,), (1,)) in pairs
    assert all(p.control and p.test for p in pairs)


@browser_mark
def test_diff_page_lists_the_layers_with_their_op_rows_folded(browser, tmp_path):
    """The diff page opens on the layer table (model order, both runs' time per step); a
    layer's heading opens its op rows; the screenshot is the closing note's."""
    result = compared("function")
    path = tmp_path / "lm_layers.html"
    write_compare_html(result, path, names=("lm_tf1.json.gz", "lm_function.json.gz"))
    with Opened(browser, path, name="compare-layers") as opened:
        assert opened.js("() => tracebridge.compare.byLayer()") is True
        layers = opened.js("() => tracebridge.compare.layers()")
        assert [layer["label"] for layer in layers] == [layer.label for layer in result.layers]
        assert opened.js("() => document.querySelectorAll('tr.tb-layer').length") == len(layers)
        assert opened.js("() => tracebridge.compare.tableKeys()") == []  # all folded
        backward = next(i for i, layer in enumerate(layers) if "lstm0" in layer["label"] and
                        layer["phase"] == "backward")
        keys = opened.js("(i) => tracebridge.compare.openLayer(i, true)", backward)
        assert keys and set(keys) <= {result.rows[i].key for i in layers[backward]["rows"]}
        opened.shot("compare_layers")
        assert opened.js("() => tracebridge.compare.byLayer(false)") is False
        assert len(opened.js("() => tracebridge.compare.tableKeys()")) == min(len(result.rows), 2000)
        assert not opened.errors, opened.errors
