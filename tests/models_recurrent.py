"""Recurrent model pairs for issue 32 ("compare by layer"): TF1 models written the way TF1
users wrote them (``tf.compat.v1`` graphs run by a Session, RNN cells from tf_keras's
``legacy_cells``, the ``tf.nn.rnn_cell`` of TF 1.x), each with the Keras 3 port a user
would write, trained by a ``tf.function`` step and by ``Model.fit``.

Both sides hold the same parameter values (drawn once, seeded, in Keras's layout and
converted to TF1's: one fused ``[input + hidden, 4 * hidden]`` LSTM kernel against Keras's
``kernel`` and ``recurrent_kernel``, gates reordered), so both runs compute the same model;
each capture records its first step's loss (``metadata["first_loss"]``) to show it.

- ``lm``: the PTB-style language model of the issue: embedding, a ``MultiRNNCell`` of two
  ``BasicLSTMCell`` (forget_bias 0) unrolled by a Python loop over 20 steps, softmax
  ``xw_plus_b``, mean sequence loss, ``GradientDescent`` after ``clip_by_global_norm``.
  Port: ``Embedding``, ``LSTM(return_sequences=True)`` x2, ``Dense``, ``SGD(global_clipnorm)``.
- ``gru``: a sentence classifier, ``dynamic_rnn`` over a ``GRUCell``, Adam. Port: ``GRU``
  (``reset_after=False``: the TF1 cell's formula).
- ``tagger``: a sequence tagger, ``dynamic_rnn`` over a ``MultiRNNCell`` of two ``LSTMCell``
  (forget_bias 1, which Keras holds in the forget gate's bias), Momentum. Port: ``LSTM`` x2,
  ``SGD(momentum)``.
- ``static``: a time-series classifier, ``static_rnn`` over an ``LSTMCell``, Adam. Port: ``LSTM``.
- ``bilstm``: a bidirectional encoder (``bidirectional_dynamic_rnn``, two ``LSTMCell``) and
  a classifier on both final states, Adam. Port: ``Bidirectional(LSTM)``.
- ``seq2seq``: an LSTM encoder and decoder (``dynamic_rnn``, the decoder started from the
  encoder's state, teacher forcing) with Luong dot attention written by hand (as users did
  once ``tf.contrib.seq2seq`` was gone): scores, softmax, context, ``tanh(W_c [c; h])``,
  vocabulary logits; Adam after ``clip_by_global_norm``. Port: the functional model with
  ``Attention``, ``Concatenate`` and ``Dense``; ``Adam(global_clipnorm)``.
- ``sparse``: a bag-of-words classifier over a 20,000-word embedding fed by ``tf.data``
  (a one-shot iterator), whose gradient is ``IndexedSlices`` applied sparsely
  (``ResourceSparseApplyAdagrad``), Adagrad. Port: ``Embedding``, mean pooling, ``Dense`` x2.

Sizes are real but fast on 2 CPU cores: batch 20, hidden 128-200, vocabularies of 2,000
(20,000 for ``sparse``); 20 time steps where TF1 unrolls (``lm``, ``static``), 10 where a
loop runs them (LOOP_STEPS).

Layer names on the Keras side are given explicitly and end in no ``_N`` (``lstm0``,
``lstm1``, not Keras's default ``lstm``, ``lstm_1``): TF's name scopes add ``_N`` to a layer
called twice, and ``lstm_1_1`` or ``lstm_1`` would leave the judge guessing which layer it is.
The names also stay the same when other models were built before in the process.
The captures (:func:`capture`) are what ``tools/gen_recurrent_data.py`` records into
``tests/data/recurrent``; the judges of what each op computes are in
``tests/helpers/recurrent_judges.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

WORLDS = ("tf1", "function", "fit")
BATCH, STEPS = 20, 20
SCALE = 0.1  # parameters are uniform in [-SCALE, SCALE] (PTB's init_scale)


@dataclass(frozen=True)
class TF1Model:
    """A TF1 training graph: ``feeds`` (placeholders, in the order of the data's inputs
    then its labels; empty when ``tf.data`` feeds the graph), ``train`` and ``loss``."""

    graph: Any
    feeds: tuple
    train: Any
    loss: Any
    init: Any


@dataclass(frozen=True)
class Pair:
    """One model written twice. ``weights()``: the parameters by Keras layer name, in the
    layer's ``get_weights()`` order; ``tf1_weights(weights)``: the same values by TF1
    variable name; ``data()``: (inputs tuple, labels); ``tf1(tf)``: the :class:`TF1Model`
    (built for ``data()``'s values where ``tf.data`` feeds it); ``keras()``: (model,
    optimizer, loss) with the layers named as ``weights()`` names them."""

    name: str
    data: Callable[[], tuple]
    weights: Callable[[], dict]
    tf1_weights: Callable[[dict], dict]
    tf1: Callable[[Any], TF1Model]
    keras: Callable[[], tuple]


def _uniform(rng, *shape) -> np.ndarray:
    return rng.uniform(-SCALE, SCALE, shape).astype(np.float32)


def _tokens(rng, vocab: int, *shape) -> np.ndarray:
    return rng.integers(0, vocab, shape).astype(np.int32)


# --- weight layouts ----------------------------------------------------------------------
def lstm_layout(rng, inputs: int, units: int) -> list[np.ndarray]:
    """Keras ``LSTM``'s kernel [inputs, 4u], recurrent kernel [u, 4u] and bias [4u], gates i, f, c, o."""
    return [_uniform(rng, inputs, 4 * units), _uniform(rng, units, 4 * units), _uniform(rng, 4 * units)]


def _ifco_to_ijfo(matrix: np.ndarray) -> np.ndarray:
    i, f, c, o = np.split(matrix, 4, axis=-1)
    return np.concatenate([i, c, f, o], axis=-1)


def lstm_to_tf1(weights: list[np.ndarray], forget_bias: float) -> tuple[np.ndarray, np.ndarray]:
    """Keras LSTM weights as TF1's ``BasicLSTMCell``/``LSTMCell`` kernel [inputs + u, 4u]
    and bias [4u], gates i, j, f, o: TF1 adds ``forget_bias`` to the forget gate in the
    cell, Keras holds it in the bias."""
    kernel, recurrent, bias = weights
    units = recurrent.shape[0]
    bias = bias.copy()
    bias[units:2 * units] -= forget_bias
    return _ifco_to_ijfo(np.concatenate([kernel, recurrent])), _ifco_to_ijfo(bias)


def gru_layout(rng, inputs: int, units: int) -> list[np.ndarray]:
    """Keras ``GRU(reset_after=False)``'s kernel [inputs, 3u], recurrent kernel [u, 3u] and
    bias [3u], gates z, r, h."""
    return [_uniform(rng, inputs, 3 * units), _uniform(rng, units, 3 * units), _uniform(rng, 3 * units)]


def gru_to_tf1(weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Keras GRU weights as TF1 ``GRUCell``'s ``gates`` (r, u) and ``candidate`` kernels and biases."""
    kernel, recurrent, bias = weights
    full = np.concatenate([kernel, recurrent])  # [inputs + u, 3u]
    z, r, h = np.split(full, 3, axis=-1)
    bz, br, bh = np.split(bias, 3)
    return {"gates/kernel": np.concatenate([r, z], axis=-1), "gates/bias": np.concatenate([br, bz]),
            "candidate/kernel": h, "candidate/bias": bh}


# --- (a) the PTB-style language model ----------------------------------------------------
LM_VOCAB, LM_HIDDEN, LM_CLIP = 2000, 200, 5.0
LM_CELLS = "Model/RNN/multi_rnn_cell/cell_{}/basic_lstm_cell/"


def lm_data():
    rng = np.random.default_rng(1)
    tokens = _tokens(rng, LM_VOCAB, BATCH, STEPS + 1)
    return (tokens[:, :-1],), tokens[:, 1:]


def lm_weights():
    rng = np.random.default_rng(2)
    return {"embedding": [_uniform(rng, LM_VOCAB, LM_HIDDEN)],
            "lstm0": lstm_layout(rng, LM_HIDDEN, LM_HIDDEN), "lstm1": lstm_layout(rng, LM_HIDDEN, LM_HIDDEN),
            "softmax": [_uniform(rng, LM_HIDDEN, LM_VOCAB), _uniform(rng, LM_VOCAB)]}


def lm_tf1_weights(weights):
    out = {"Model/embedding": weights["embedding"][0],
           "Model/softmax_w": weights["softmax"][0], "Model/softmax_b": weights["softmax"][1]}
    for index, layer in enumerate(("lstm0", "lstm1")):
        kernel, bias = lstm_to_tf1(weights[layer], forget_bias=0.0)
        out[LM_CELLS.format(index) + "kernel"], out[LM_CELLS.format(index) + "bias"] = kernel, bias
    return out


def lm_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.int32, [BATCH, STEPS], name="input_data")
        y = v1.placeholder(tf.int32, [BATCH, STEPS], name="targets")
        with v1.variable_scope("Model"):
            embedding = v1.get_variable("embedding", [LM_VOCAB, LM_HIDDEN])
            inputs = tf.nn.embedding_lookup(embedding, x)
            cell = legacy_cells.MultiRNNCell([legacy_cells.BasicLSTMCell(LM_HIDDEN, forget_bias=0.0)
                                              for _ in range(2)])
            state = cell.zero_state(BATCH, tf.float32)
            outputs = []
            with v1.variable_scope("RNN"):
                for time_step in range(STEPS):
                    if time_step > 0:
                        v1.get_variable_scope().reuse_variables()
                    output, state = cell(inputs[:, time_step, :], state)
                    outputs.append(output)
            output = tf.reshape(tf.concat(outputs, 1), [-1, LM_HIDDEN])
            softmax_w = v1.get_variable("softmax_w", [LM_HIDDEN, LM_VOCAB])
            softmax_b = v1.get_variable("softmax_b", [LM_VOCAB])
            logits = v1.nn.xw_plus_b(output, softmax_w, softmax_b)
            logits = tf.reshape(logits, [BATCH, STEPS, LM_VOCAB])
            with tf.name_scope("loss"):
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            variables = v1.trainable_variables()
            grads, _ = tf.clip_by_global_norm(tf.gradients(loss, variables), LM_CLIP)
            optimizer = v1.train.GradientDescentOptimizer(1.0)
            train = optimizer.apply_gradients(zip(grads, variables),
                                              global_step=v1.train.get_or_create_global_step())
        init = v1.global_variables_initializer()
    return TF1Model(graph, (x, y), train, loss, init)


def lm_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((STEPS,), batch_size=BATCH, dtype="int32"),
        layers.Embedding(LM_VOCAB, LM_HIDDEN, name="embedding"),
        layers.LSTM(LM_HIDDEN, return_sequences=True, name="lstm0"),
        layers.LSTM(LM_HIDDEN, return_sequences=True, name="lstm1"),
        layers.Dense(LM_VOCAB, name="softmax"),
    ], name="sequential")
    return model, keras.optimizers.SGD(1.0, global_clipnorm=LM_CLIP), \
        keras.losses.SparseCategoricalCrossentropy(from_logits=True)


LM = Pair("lm", lm_data, lm_weights, lm_tf1_weights, lm_tf1, lm_keras)


# --- shared by the smaller models --------------------------------------------------------
VOCAB, EMBED, HIDDEN, CLASSES, TAGS = 2000, 128, 128, 10, 20
# Sequences that a loop runs (dynamic_rnn, Keras's RNN layers on both sides) are 10 steps:
# TF1 times every iteration's control flow (Enter, Merge, Switch, NextIteration...), which
# would make most of the recordings' size at 20.
LOOP_STEPS = 10


def _embedded(tf, tokens, vocab: int = VOCAB, dim: int = EMBED, scope: str = "embedding"):
    v1 = tf.compat.v1
    with v1.variable_scope(scope):
        embeddings = v1.get_variable("embeddings", [vocab, dim])
        return tf.nn.embedding_lookup(embeddings, tokens)


def _dense(tf, inputs, scope: str, units: int, activation=None):
    """TF1's dense layer by hand: kernel and bias in ``scope``, a matmul over the last axis."""
    v1 = tf.compat.v1
    with v1.variable_scope(scope):
        kernel = v1.get_variable("kernel", [inputs.shape[-1], units])
        bias = v1.get_variable("bias", [units])
        if inputs.shape.rank == 2:
            outputs = tf.matmul(inputs, kernel) + bias
        else:
            flat = tf.reshape(inputs, [-1, inputs.shape[-1]])
            outputs = tf.reshape(tf.matmul(flat, kernel) + bias, [*inputs.shape[:-1], units])
        return activation(outputs) if activation else outputs


def _mean_loss(tf, labels, logits):
    with tf.name_scope("loss"):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def _cross_entropy():
    import keras
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _classifier_data(seed: int):
    rng = np.random.default_rng(seed)
    return (_tokens(rng, VOCAB, BATCH, LOOP_STEPS),), _tokens(rng, CLASSES, BATCH)


def _dense_weights(rng, inputs: int, units: int) -> list[np.ndarray]:
    return [_uniform(rng, inputs, units), _uniform(rng, units)]


def _graph_model(tf, build) -> TF1Model:
    """``build(tf)`` -> (feeds, loss, optimizer, clip or None) in a new graph: the training op
    minimizes the loss (after clipping the gradients' global norm to ``clip``)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        feeds, loss, optimizer, clip = build(tf)
        if clip is None:
            train = optimizer.minimize(loss)
        else:
            variables = v1.trainable_variables()
            grads, _ = tf.clip_by_global_norm(tf.gradients(loss, variables), clip)
            train = optimizer.apply_gradients(zip(grads, variables))
        init = v1.global_variables_initializer()
    return TF1Model(graph, feeds, train, loss, init)


# --- (b) dynamic_rnn over a GRUCell: a sentence classifier --------------------------------
def gru_data():
    return _classifier_data(4)


def gru_weights():
    rng = np.random.default_rng(3)
    return {"embedding": [_uniform(rng, VOCAB, EMBED)], "gru": gru_layout(rng, EMBED, HIDDEN),
            "classifier": _dense_weights(rng, HIDDEN, CLASSES)}


def gru_tf1_weights(weights):
    out = {"embedding/embeddings": weights["embedding"][0],
           "classifier/kernel": weights["classifier"][0], "classifier/bias": weights["classifier"][1]}
    out.update({f"rnn/gru_cell/{name}": value for name, value in gru_to_tf1(weights["gru"]).items()})
    return out


def gru_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1

    def build(tf):
        x = v1.placeholder(tf.int32, [BATCH, LOOP_STEPS], name="tokens")
        y = v1.placeholder(tf.int32, [BATCH], name="labels")
        _, state = v1.nn.dynamic_rnn(legacy_cells.GRUCell(HIDDEN), _embedded(tf, x), dtype=tf.float32, scope="rnn")
        logits = _dense(tf, state, "classifier", CLASSES)
        return (x, y), _mean_loss(tf, y, logits), v1.train.AdamOptimizer(1e-3), None
    return _graph_model(tf, build)


def gru_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((LOOP_STEPS,), batch_size=BATCH, dtype="int32"),
        layers.Embedding(VOCAB, EMBED, name="embedding"),
        layers.GRU(HIDDEN, reset_after=False, name="gru"),
        layers.Dense(CLASSES, name="classifier"),
    ], name="sequential")
    return model, keras.optimizers.Adam(1e-3, epsilon=1e-8), _cross_entropy()


GRU = Pair("gru", gru_data, gru_weights, gru_tf1_weights, gru_tf1, gru_keras)


# --- (b) dynamic_rnn over a MultiRNNCell of two LSTMCell: a sequence tagger ---------------
TAGGER_CELLS = "rnn/multi_rnn_cell/cell_{}/lstm_cell/"


def tagger_data():
    rng = np.random.default_rng(5)
    return (_tokens(rng, VOCAB, BATCH, LOOP_STEPS),), _tokens(rng, TAGS, BATCH, LOOP_STEPS)


def tagger_weights():
    rng = np.random.default_rng(6)
    return {"embedding": [_uniform(rng, VOCAB, EMBED)], "lstm0": lstm_layout(rng, EMBED, HIDDEN),
            "lstm1": lstm_layout(rng, HIDDEN, HIDDEN), "tagger": _dense_weights(rng, HIDDEN, TAGS)}


def tagger_tf1_weights(weights):
    out = {"embedding/embeddings": weights["embedding"][0],
           "tagger/kernel": weights["tagger"][0], "tagger/bias": weights["tagger"][1]}
    for index, layer in enumerate(("lstm0", "lstm1")):
        kernel, bias = lstm_to_tf1(weights[layer], forget_bias=1.0)
        out[TAGGER_CELLS.format(index) + "kernel"], out[TAGGER_CELLS.format(index) + "bias"] = kernel, bias
    return out


def tagger_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1

    def build(tf):
        x = v1.placeholder(tf.int32, [BATCH, LOOP_STEPS], name="tokens")
        y = v1.placeholder(tf.int32, [BATCH, LOOP_STEPS], name="tags")
        cell = legacy_cells.MultiRNNCell([legacy_cells.LSTMCell(HIDDEN) for _ in range(2)])
        outputs, _ = v1.nn.dynamic_rnn(cell, _embedded(tf, x), dtype=tf.float32, scope="rnn")
        logits = _dense(tf, outputs, "tagger", TAGS)
        return (x, y), _mean_loss(tf, y, logits), v1.train.MomentumOptimizer(0.1, 0.9), None
    return _graph_model(tf, build)


def tagger_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((LOOP_STEPS,), batch_size=BATCH, dtype="int32"),
        layers.Embedding(VOCAB, EMBED, name="embedding"),
        layers.LSTM(HIDDEN, return_sequences=True, name="lstm0"),
        layers.LSTM(HIDDEN, return_sequences=True, name="lstm1"),
        layers.Dense(TAGS, name="tagger"),
    ], name="sequential")
    return model, keras.optimizers.SGD(0.1, momentum=0.9), _cross_entropy()


TAGGER = Pair("tagger", tagger_data, tagger_weights, tagger_tf1_weights, tagger_tf1, tagger_keras)


# --- static_rnn over an LSTMCell: a time-series classifier ---------------------------------
FEATURES = 32


def static_data():
    rng = np.random.default_rng(7)
    return (rng.standard_normal((BATCH, STEPS, FEATURES)).astype(np.float32),), _tokens(rng, CLASSES, BATCH)


def static_weights():
    rng = np.random.default_rng(8)
    return {"lstm": lstm_layout(rng, FEATURES, HIDDEN), "classifier": _dense_weights(rng, HIDDEN, CLASSES)}


def static_tf1_weights(weights):
    kernel, bias = lstm_to_tf1(weights["lstm"], forget_bias=1.0)
    return {"rnn/lstm_cell/kernel": kernel, "rnn/lstm_cell/bias": bias,
            "classifier/kernel": weights["classifier"][0], "classifier/bias": weights["classifier"][1]}


def static_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1

    def build(tf):
        x = v1.placeholder(tf.float32, [BATCH, STEPS, FEATURES], name="series")
        y = v1.placeholder(tf.int32, [BATCH], name="labels")
        _, state = v1.nn.static_rnn(legacy_cells.LSTMCell(HIDDEN), tf.unstack(x, axis=1), dtype=tf.float32,
                                    scope="rnn")
        logits = _dense(tf, state.h, "classifier", CLASSES)
        return (x, y), _mean_loss(tf, y, logits), v1.train.AdamOptimizer(1e-3), None
    return _graph_model(tf, build)


def static_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((STEPS, FEATURES), batch_size=BATCH),
        layers.LSTM(HIDDEN, name="lstm"),
        layers.Dense(CLASSES, name="classifier"),
    ], name="sequential")
    return model, keras.optimizers.Adam(1e-3, epsilon=1e-8), _cross_entropy()


STATIC = Pair("static", static_data, static_weights, static_tf1_weights, static_tf1, static_keras)


# --- (c) a bidirectional encoder and a classifier on both final states --------------------
def bilstm_data():
    return _classifier_data(9)


def bilstm_weights():
    rng = np.random.default_rng(10)
    return {"embedding": [_uniform(rng, VOCAB, EMBED)],
            "bidirectional": lstm_layout(rng, EMBED, HIDDEN) + lstm_layout(rng, EMBED, HIDDEN),
            "classifier": _dense_weights(rng, 2 * HIDDEN, CLASSES)}


def bilstm_tf1_weights(weights):
    out = {"embedding/embeddings": weights["embedding"][0],
           "classifier/kernel": weights["classifier"][0], "classifier/bias": weights["classifier"][1]}
    for direction, values in (("fw", weights["bidirectional"][:3]), ("bw", weights["bidirectional"][3:])):
        kernel, bias = lstm_to_tf1(values, forget_bias=1.0)
        out[f"bidirectional_rnn/{direction}/lstm_cell/kernel"] = kernel
        out[f"bidirectional_rnn/{direction}/lstm_cell/bias"] = bias
    return out


def bilstm_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1

    def build(tf):
        x = v1.placeholder(tf.int32, [BATCH, LOOP_STEPS], name="tokens")
        y = v1.placeholder(tf.int32, [BATCH], name="labels")
        _, (forward, backward) = v1.nn.bidirectional_dynamic_rnn(
            legacy_cells.LSTMCell(HIDDEN), legacy_cells.LSTMCell(HIDDEN), _embedded(tf, x), dtype=tf.float32)
        logits = _dense(tf, tf.concat([forward.h, backward.h], 1), "classifier", CLASSES)
        return (x, y), _mean_loss(tf, y, logits), v1.train.AdamOptimizer(1e-3), None
    return _graph_model(tf, build)


def bilstm_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((LOOP_STEPS,), batch_size=BATCH, dtype="int32"),
        layers.Embedding(VOCAB, EMBED, name="embedding"),
        layers.Bidirectional(layers.LSTM(HIDDEN, name="lstm"), name="bidirectional"),
        layers.Dense(CLASSES, name="classifier"),
    ], name="sequential")
    return model, keras.optimizers.Adam(1e-3, epsilon=1e-8), _cross_entropy()


BILSTM = Pair("bilstm", bilstm_data, bilstm_weights, bilstm_tf1_weights, bilstm_tf1, bilstm_keras)


# --- (d) seq2seq: an LSTM encoder and decoder with Luong attention written by hand ---------
SOURCE_STEPS, TARGET_STEPS, SEQ2SEQ_CLIP = LOOP_STEPS, LOOP_STEPS, 5.0


def seq2seq_data():
    rng = np.random.default_rng(11)
    target = _tokens(rng, VOCAB, BATCH, TARGET_STEPS + 1)
    return (_tokens(rng, VOCAB, BATCH, SOURCE_STEPS), target[:, :-1]), target[:, 1:]


def seq2seq_weights():
    rng = np.random.default_rng(12)
    return {"source_embedding": [_uniform(rng, VOCAB, EMBED)], "target_embedding": [_uniform(rng, VOCAB, EMBED)],
            "encoder": lstm_layout(rng, EMBED, HIDDEN), "decoder": lstm_layout(rng, EMBED, HIDDEN),
            "attention_output": [_uniform(rng, 2 * HIDDEN, HIDDEN)], "projection": _dense_weights(rng, HIDDEN, VOCAB)}


def seq2seq_tf1_weights(weights):
    out = {"encoder/embedding/embeddings": weights["source_embedding"][0],
           "decoder/embedding/embeddings": weights["target_embedding"][0],
           "attention_output/kernel": weights["attention_output"][0],
           "projection/kernel": weights["projection"][0], "projection/bias": weights["projection"][1]}
    for scope in ("encoder", "decoder"):
        out[f"{scope}/rnn/lstm_cell/kernel"], out[f"{scope}/rnn/lstm_cell/bias"] = \
            lstm_to_tf1(weights[scope], forget_bias=1.0)
    return out


def seq2seq_tf1(tf):
    from tf_keras.src.layers.rnn import legacy_cells
    v1 = tf.compat.v1

    def build(tf):
        source = v1.placeholder(tf.int32, [BATCH, SOURCE_STEPS], name="source")
        target_in = v1.placeholder(tf.int32, [BATCH, TARGET_STEPS], name="target_in")
        target_out = v1.placeholder(tf.int32, [BATCH, TARGET_STEPS], name="target_out")
        with v1.variable_scope("encoder"):
            memory, state = v1.nn.dynamic_rnn(legacy_cells.LSTMCell(HIDDEN), _embedded(tf, source),
                                              dtype=tf.float32)
        with v1.variable_scope("decoder"):
            decoded, _ = v1.nn.dynamic_rnn(legacy_cells.LSTMCell(HIDDEN), _embedded(tf, target_in),
                                           initial_state=state)
        with tf.name_scope("attention"):  # Luong's dot score, after the decoder's step
            weights = tf.nn.softmax(tf.matmul(decoded, memory, transpose_b=True))
            context = tf.matmul(weights, memory)
        with v1.variable_scope("attention_output"):
            kernel = v1.get_variable("kernel", [2 * HIDDEN, HIDDEN])
            attended = tf.tanh(tf.tensordot(tf.concat([context, decoded], -1), kernel, 1))
        logits = _dense(tf, attended, "projection", VOCAB)
        return (source, target_in, target_out), _mean_loss(tf, target_out, logits), \
            v1.train.AdamOptimizer(1e-3), SEQ2SEQ_CLIP
    return _graph_model(tf, build)


def seq2seq_keras():
    import keras
    from keras import layers
    source = keras.Input((SOURCE_STEPS,), batch_size=BATCH, dtype="int32", name="source")
    target = keras.Input((TARGET_STEPS,), batch_size=BATCH, dtype="int32", name="target_in")
    memory, h, c = layers.LSTM(HIDDEN, return_sequences=True, return_state=True, name="encoder")(
        layers.Embedding(VOCAB, EMBED, name="source_embedding")(source))
    decoded = layers.LSTM(HIDDEN, return_sequences=True, name="decoder")(
        layers.Embedding(VOCAB, EMBED, name="target_embedding")(target), initial_state=[h, c])
    context = layers.Attention(name="attention")([decoded, memory])
    attended = layers.Dense(HIDDEN, activation="tanh", use_bias=False, name="attention_output")(
        layers.Concatenate(name="concatenate")([context, decoded]))
    logits = layers.Dense(VOCAB, name="projection")(attended)
    model = keras.Model([source, target], logits, name="seq2seq")
    return model, keras.optimizers.Adam(1e-3, epsilon=1e-8, global_clipnorm=SEQ2SEQ_CLIP), _cross_entropy()


SEQ2SEQ = Pair("seq2seq", seq2seq_data, seq2seq_weights, seq2seq_tf1_weights, seq2seq_tf1, seq2seq_keras)


# --- (e) a large embedding with sparse updates, fed by tf.data --------------------------
BAG_VOCAB, BAG_EMBED, BAG_TOKENS, BAG_HIDDEN = 20000, 64, 50, 128


def bag_data():
    rng = np.random.default_rng(13)
    return (_tokens(rng, BAG_VOCAB, BATCH, BAG_TOKENS),), _tokens(rng, CLASSES, BATCH)


def bag_weights():
    rng = np.random.default_rng(14)
    return {"embedding": [_uniform(rng, BAG_VOCAB, BAG_EMBED)], "hidden": _dense_weights(rng, BAG_EMBED, BAG_HIDDEN),
            "classifier": _dense_weights(rng, BAG_HIDDEN, CLASSES)}


def bag_tf1_weights(weights):
    return {"embedding/embeddings": weights["embedding"][0],
            "hidden/kernel": weights["hidden"][0], "hidden/bias": weights["hidden"][1],
            "classifier/kernel": weights["classifier"][0], "classifier/bias": weights["classifier"][1]}


def bag_tf1(tf):
    v1 = tf.compat.v1

    def build(tf):
        (tokens,), labels = bag_data()
        dataset = tf.data.Dataset.from_tensors((tokens, labels)).repeat()
        x, y = v1.data.make_one_shot_iterator(dataset).get_next()
        with tf.name_scope("pooling"):
            pooled = tf.reduce_mean(_embedded(tf, x, BAG_VOCAB, BAG_EMBED), axis=1)
        hidden = _dense(tf, pooled, "hidden", BAG_HIDDEN, tf.nn.relu)
        logits = _dense(tf, hidden, "classifier", CLASSES)
        return (), _mean_loss(tf, y, logits), v1.train.AdagradOptimizer(0.1), None
    return _graph_model(tf, build)


def bag_keras():
    import keras
    from keras import layers
    model = keras.Sequential([
        keras.Input((BAG_TOKENS,), batch_size=BATCH, dtype="int32"),
        layers.Embedding(BAG_VOCAB, BAG_EMBED, name="embedding"),
        layers.GlobalAveragePooling1D(name="pooling"),
        layers.Dense(BAG_HIDDEN, activation="relu", name="hidden"),
        layers.Dense(CLASSES, name="classifier"),
    ], name="sequential")
    return model, keras.optimizers.Adagrad(0.1), _cross_entropy()


BAG = Pair("sparse", bag_data, bag_weights, bag_tf1_weights, bag_tf1, bag_keras)
PAIRS = {pair.name: pair for pair in (LM, GRU, TAGGER, STATIC, BILSTM, SEQ2SEQ, BAG)}


# --- captures ----------------------------------------------------------------------------
def first_loss(value) -> float:
    return float(np.asarray(value))


def capture_tf1(tf, pair: Pair, steps: int):
    """The TF1 model in a Session: variables loaded with the pair's values, one warm-up
    run, then ``steps`` runs traced."""
    import tracebridge
    built = pair.tf1(tf)
    inputs, labels = pair.data()
    feed = dict(zip(built.feeds, (*inputs, labels))) if built.feeds else None
    values = pair.tf1_weights(pair.weights())
    with built.graph.as_default():
        variables = {v.op.name: v for v in tf.compat.v1.trainable_variables()}
    assert set(variables) == set(values), (sorted(variables), sorted(values))
    with tf.compat.v1.Session(graph=built.graph) as session:
        session.run(built.init)
        for name, variable in variables.items():
            assert tuple(variable.shape) == values[name].shape, (name, variable.shape, values[name].shape)
            variable.load(values[name], session)
        _, loss = session.run([built.train, built.loss], feed)
        with tracebridge.trace(session, steps=steps) as capture:
            for _ in range(steps):
                session.run(built.train, feed)
    return capture.trace.with_metadata(first_loss=first_loss(loss))


def keras_model(pair: Pair):
    """The Keras port with the pair's values loaded: (model, optimizer, loss)."""
    model, optimizer, loss_fn = pair.keras()
    for name, values in pair.weights().items():
        model.get_layer(name).set_weights(values)
    return model, optimizer, loss_fn


def _as_model_input(inputs: tuple):
    return inputs[0] if len(inputs) == 1 else list(inputs)


def capture_function(tf, pair: Pair, steps: int):
    """The port's training step as a ``tf.function`` (a GradientTape, the optimizer's
    ``apply_gradients``): one warm-up call, then ``steps`` calls traced."""
    import tracebridge
    model, optimizer, loss_fn = keras_model(pair)
    optimizer.build(model.trainable_variables)

    @tf.function
    def train_step(inputs, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(inputs, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    inputs, labels = pair.data()
    inputs = _as_model_input(tuple(tf.constant(i) for i in inputs))
    labels = tf.constant(labels)
    loss = train_step(inputs, labels)
    traced = tracebridge.trace(train_step)
    for _ in range(steps):
        traced(inputs, labels)
    traced.stop()
    return traced.trace.with_metadata(first_loss=first_loss(loss))


FIT_WARMUP = 2


def capture_fit(tf, pair: Pair, steps: int):
    """The port trained by ``fit`` on the same batch repeated (one epoch, no shuffling),
    ``steps`` batches traced after FIT_WARMUP (tracebridge.keras.TraceCallback)."""
    from tracebridge.keras import TraceCallback
    model, optimizer, loss_fn = keras_model(pair)
    inputs, labels = pair.data()
    first = loss_fn(labels, model(_as_model_input(inputs), training=True))
    model.compile(optimizer, loss_fn)
    batches = FIT_WARMUP + steps + 1
    callback = TraceCallback(warmup=FIT_WARMUP, steps=steps)
    model.fit(_as_model_input(tuple(np.concatenate([i] * batches) for i in inputs)),
              np.concatenate([labels] * batches), batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[callback])
    return callback.trace.with_metadata(first_loss=first_loss(first))


CAPTURES = {"tf1": capture_tf1, "function": capture_function, "fit": capture_fit}


def capture(tf, pair: Pair, world: str, steps: int = 6):
    """One world's capture of the pair: ``world`` is one of WORLDS."""
    return CAPTURES[world](tf, pair, steps)
