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
- ``lstm``: a sequence tagger, ``dynamic_rnn`` over a ``MultiRNNCell`` of two ``LSTMCell``
  (forget_bias 1, which Keras holds in the forget gate's bias), Momentum. Port: ``LSTM`` x2.
- ``static``: a time-series classifier, ``static_rnn`` over an ``LSTMCell``, RMSProp.
  Port: ``LSTM``.
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

Layer names on the Keras side are given explicitly, as Keras names them in a fresh process
(``lstm``, ``lstm_1``, ...), so a model built after others in one process keeps them.
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
def lstm_weights(rng, inputs: int, units: int) -> list[np.ndarray]:
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


def gru_weights(rng, inputs: int, units: int) -> list[np.ndarray]:
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
            "lstm0": lstm_weights(rng, LM_HIDDEN, LM_HIDDEN), "lstm1": lstm_weights(rng, LM_HIDDEN, LM_HIDDEN),
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
PAIRS = {pair.name: pair for pair in (LM,)}


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
