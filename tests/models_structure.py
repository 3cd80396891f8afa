"""Model pairs written twice, TF1-style (raw ops in a tf.Graph + Session) and TF2-style
(Keras 3 layers in a tf.function training step with a GradientTape), for structural
comparison tests. Each builder returns the layer names it built, in the same order on
both sides, so a test knows the true mapping: ``LAYERS[i]`` of TF1 is ``LAYERS[i]`` of TF2.

Transformer encoder block: attention, layer norm, dropout (below).

ResNet-style CNN: a stem, an identity block and a projection block (the TF1 code builds
its projection shortcut first, the Keras code last), fused batch norm in TF1 against
Keras 3's unfused one, L2 weight decay (``tf.nn.l2_loss`` against a Square + Sum
regularizer), momentum.
"""

from __future__ import annotations

import numpy as np

BATCH, SIZE, CLASSES = 8, 16, 10
# (layer, kind, kernel shape) in model order; the projection shortcut is "b2_short".
RESNET_CONVS = [("stem", (3, 3, 3, 16)), ("b1_conv1", (3, 3, 16, 16)), ("b1_conv2", (3, 3, 16, 16)),
                ("b2_short", (1, 1, 16, 32)), ("b2_conv1", (3, 3, 16, 32)), ("b2_conv2", (3, 3, 32, 32))]
WEIGHT_DECAY = 1e-4


def labelled_batch(shape: tuple[int, ...], seed: int = 0):
    """Random inputs of ``shape`` (batch first) and a class label for each."""
    rng = np.random.default_rng(seed)
    return rng.random(shape, dtype=np.float32), rng.integers(0, CLASSES, shape[0]).astype(np.int32)


def resnet_data(seed: int = 0):
    return labelled_batch((BATCH, SIZE, SIZE, 3), seed)


def resnet_tf1(tf):
    v1 = tf.compat.v1
    graph = tf.Graph()
    kernels = []
    updates = []
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, SIZE, SIZE, 3], name="x")
        y = v1.placeholder(tf.int32, [BATCH], name="y")
        shapes = dict(RESNET_CONVS)

        def conv_bn(inputs, name, stride=1, relu=True):
            with v1.variable_scope(name):
                kernel = v1.get_variable("kernel", shapes[name], initializer=v1.glorot_uniform_initializer(seed=1))
                channels = shapes[name][-1]
                gamma = v1.get_variable("gamma", [channels], initializer=v1.ones_initializer())
                beta = v1.get_variable("beta", [channels], initializer=v1.zeros_initializer())
                mean = v1.get_variable("moving_mean", [channels], initializer=v1.zeros_initializer(),
                                       trainable=False)
                variance = v1.get_variable("moving_variance", [channels], initializer=v1.ones_initializer(),
                                           trainable=False)
                kernels.append(kernel)
                out = tf.nn.conv2d(inputs, kernel, stride, "SAME", name="Conv2D")
                out, batch_mean, batch_variance = v1.nn.fused_batch_norm(out, gamma, beta, is_training=True,
                                                                         name="FusedBatchNorm")
                updates.append(v1.assign_sub(mean, (mean - batch_mean) * 0.01, name="update_mean"))
                updates.append(v1.assign_sub(variance, (variance - batch_variance) * 0.01, name="update_variance"))
                return tf.nn.relu(out, name="Relu") if relu else out

        with v1.variable_scope("resnet"):
            h = conv_bn(x, "stem")
            h = tf.nn.relu(conv_bn(conv_bn(h, "b1_conv1"), "b1_conv2", relu=False) + h, name="b1_out")
            shortcut = conv_bn(h, "b2_short", stride=2, relu=False)  # built first here
            main = conv_bn(conv_bn(h, "b2_conv1", stride=2), "b2_conv2", relu=False)
            h = tf.nn.relu(main + shortcut, name="b2_out")
            pooled = tf.reduce_mean(h, axis=[1, 2], name="pool")
            with v1.variable_scope("dense"):
                w = v1.get_variable("kernel", [32, CLASSES], initializer=v1.glorot_uniform_initializer(seed=2))
                b = v1.get_variable("bias", [CLASSES], initializer=v1.zeros_initializer())
                logits = tf.nn.bias_add(tf.matmul(pooled, w), b)
        cross_entropy = tf.reduce_mean(v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        decay = WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(k) for k in kernels + [w]])
        loss = tf.identity(cross_entropy + decay, name="loss")
        with tf.control_dependencies(updates):
            train = v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
        init = v1.global_variables_initializer()
    return graph, x, y, train, init


def resnet_keras():
    """The Keras port of the ResNet-style model, its optimizer and its loss."""
    import keras
    from keras import layers, regularizers

    shapes = dict(RESNET_CONVS)
    regularizer = regularizers.L2(WEIGHT_DECAY / 2)  # l2_loss is sum(x**2) / 2

    def conv(name, stride=1):
        return layers.Conv2D(shapes[name][-1], shapes[name][0], strides=stride, padding="same", use_bias=False,
                             kernel_regularizer=regularizer, name=name)

    def bn(name):
        return layers.BatchNormalization(momentum=0.99, epsilon=1e-3, name=name + "_bn")

    inputs = keras.Input((SIZE, SIZE, 3), batch_size=BATCH)
    h = layers.ReLU()(bn("stem")(conv("stem")(inputs)))
    main = layers.ReLU()(bn("b1_conv1")(conv("b1_conv1")(h)))
    h = layers.ReLU()(layers.Add()([bn("b1_conv2")(conv("b1_conv2")(main)), h]))
    main = layers.ReLU()(bn("b2_conv1")(conv("b2_conv1", 2)(h)))
    main = bn("b2_conv2")(conv("b2_conv2")(main))
    shortcut = bn("b2_short")(conv("b2_short", 2)(h))  # built last here
    h = layers.ReLU()(layers.Add()([main, shortcut]))
    pooled = layers.GlobalAveragePooling2D()(h)
    logits = layers.Dense(CLASSES, kernel_regularizer=regularizer, name="dense")(pooled)
    model = keras.Model(inputs, logits, name="resnet")
    return model, keras.optimizers.SGD(0.01, momentum=0.9), keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def resnet_tf2(tf, jit_compile: bool = False):
    """The Keras port's training step in a ``tf.function`` (XLA-compiled with ``jit_compile``)."""
    model, optimizer, loss_fn = resnet_keras()
    optimizer.build(model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True)) + tf.add_n(model.losses)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return step


def resnet_fit(jit_compile: bool = False):
    """The Keras port compiled for ``fit`` (Keras's own train step: loss, regularizers,
    the optimizer's momentum)."""
    model, optimizer, loss_fn = resnet_keras()
    model.compile(optimizer, loss_fn, jit_compile=jit_compile)
    return model


# Transformer encoder block: multi-head self-attention, residual + layer norm, a ReLU
# feed-forward, residual + layer norm, dropout, mean pooling and a classifier. The TF1
# code keeps Keras's variable layout (per-head kernels, as tensor2tensor's did too).
SEQ, MODEL_DIM, HEADS, FFN = 16, 32, 4, 64
HEAD_DIM = MODEL_DIM // HEADS
TRANSFORMER_LAYERS = {"query", "key", "value", "attention", "attention_output", "ln1", "ffn1", "ffn2", "ln2",
                      "classifier"}


def transformer_data(seed: int = 0):
    return labelled_batch((BATCH, SEQ, MODEL_DIM), seed)


def transformer_tf1(tf):
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, SEQ, MODEL_DIM], name="x")
        y = v1.placeholder(tf.int32, [BATCH], name="y")
        init = v1.glorot_uniform_initializer(seed=3)

        def variable(scope, name, shape, initializer=init):
            with v1.variable_scope(scope):
                return v1.get_variable(name, shape, initializer=initializer)

        def layer_norm(h, scope):
            gamma = variable(scope, "gamma", [MODEL_DIM], v1.ones_initializer())
            beta = variable(scope, "beta", [MODEL_DIM], v1.zeros_initializer())
            with tf.name_scope(scope):
                mean, variance = tf.nn.moments(h, axes=[-1], keepdims=True)
                return (h - mean) * tf.math.rsqrt(variance + 1e-3) * gamma + beta

        with v1.variable_scope("encoder"):
            projections = {}
            for name in ("query", "key", "value"):
                kernel = variable(name, "kernel", [MODEL_DIM, HEADS, HEAD_DIM])
                bias = variable(name, "bias", [HEADS, HEAD_DIM], v1.zeros_initializer())
                with tf.name_scope(name):
                    projections[name] = tf.einsum("abc,cde->abde", x, kernel) + bias
            with tf.name_scope("attention"):
                scores = tf.einsum("aecd,abcd->acbe", projections["key"], projections["query"] * HEAD_DIM ** -0.5)
                weights = tf.nn.dropout(tf.nn.softmax(scores), rate=0.1, seed=4)
                attended = tf.einsum("acbe,aecd->abcd", weights, projections["value"])
            out_kernel = variable("attention_output", "kernel", [HEADS, HEAD_DIM, MODEL_DIM])
            out_bias = variable("attention_output", "bias", [MODEL_DIM], v1.zeros_initializer())
            with tf.name_scope("attention_output"):
                attention = tf.einsum("abcd,cde->abe", attended, out_kernel) + out_bias
            h = layer_norm(x + tf.nn.dropout(attention, rate=0.1, seed=5), "ln1")
            w1 = variable("ffn1", "kernel", [MODEL_DIM, FFN])
            b1 = variable("ffn1", "bias", [FFN], v1.zeros_initializer())
            w2 = variable("ffn2", "kernel", [FFN, MODEL_DIM])
            b2 = variable("ffn2", "bias", [MODEL_DIM], v1.zeros_initializer())
            with tf.name_scope("ffn1"):
                ffn = tf.nn.relu(tf.tensordot(h, w1, 1) + b1)
            with tf.name_scope("ffn2"):
                ffn = tf.tensordot(ffn, w2, 1) + b2
            h = layer_norm(h + tf.nn.dropout(ffn, rate=0.1, seed=6), "ln2")
            pooled = tf.reduce_mean(h, axis=1)
            wc = variable("classifier", "kernel", [MODEL_DIM, CLASSES])
            bc = variable("classifier", "bias", [CLASSES], v1.zeros_initializer())
            with tf.name_scope("classifier"):
                logits = tf.matmul(pooled, wc) + bc
        loss = tf.reduce_mean(v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        train = v1.train.AdamOptimizer(1e-3).minimize(loss)
        initializer = v1.global_variables_initializer()
    return graph, x, y, train, initializer


def transformer_tf2(tf):
    import keras
    from keras import layers

    inputs = keras.Input((SEQ, MODEL_DIM), batch_size=BATCH)
    attention = layers.MultiHeadAttention(HEADS, HEAD_DIM, dropout=0.1, name="attention")(inputs, inputs)
    h = layers.LayerNormalization(epsilon=1e-3, name="ln1")(inputs + layers.Dropout(0.1)(attention))
    ffn = layers.Dense(FFN, activation="relu", name="ffn1")(h)
    ffn = layers.Dense(MODEL_DIM, name="ffn2")(ffn)
    h = layers.LayerNormalization(epsilon=1e-3, name="ln2")(h + layers.Dropout(0.1)(ffn))
    logits = layers.Dense(CLASSES, name="classifier")(layers.GlobalAveragePooling1D()(h))
    model = keras.Model(inputs, logits, name="encoder")
    return _keras_step(tf, model, keras.optimizers.Adam(1e-3))


def _keras_step(tf, model, optimizer):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            if model.losses:
                loss = loss + tf.add_n(model.losses)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return step


# LSTM: one LSTM layer over a short sequence, unrolled (tf.nn.static_rnn's way in TF1,
# ``unroll=True`` in Keras), then a classifier on the last state. Keras's gate order i, f, c, o.
# Sizes where the cell's matmuls, not per-op overheads, hold most of the time, as in real use.
STEPS, FEATURES, UNITS, LSTM_BATCH = 6, 64, 256, 64
LSTM_LAYERS = {"lstm", "classifier"}


def lstm_data(seed: int = 0):
    return labelled_batch((LSTM_BATCH, STEPS, FEATURES), seed)


def lstm_tf1(tf):
    return _lstm_tf1(tf, _unrolled)


def lstm_tf2(tf):
    return _lstm_tf2(tf, unroll=True)


# LSTM with a real loop: the same layer run by a functional ``While`` on both sides (TF1's
# ``tf.while_loop`` over a TensorArray of time steps, as ``dynamic_rnn`` did; Keras 3's
# ``unroll=False``). The cell's ops then live in the loop's body function, not the graph.
def lstm_while_tf1(tf):
    return _lstm_tf1(tf, _while_loop)


def lstm_while_tf2(tf):
    return _lstm_tf2(tf, unroll=False)


def _lstm_tf1(tf, run_layer):
    """The TF1 model; ``run_layer(tf, x, kernel, recurrent, bias)`` runs the LSTM over the
    sequence and returns its last output."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [LSTM_BATCH, STEPS, FEATURES], name="x")
        y = v1.placeholder(tf.int32, [LSTM_BATCH], name="y")
        init = v1.glorot_uniform_initializer(seed=7)
        with v1.variable_scope("model"):
            with v1.variable_scope("lstm"):
                kernel = v1.get_variable("kernel", [FEATURES, 4 * UNITS], initializer=init)
                recurrent = v1.get_variable("recurrent_kernel", [UNITS, 4 * UNITS], initializer=init)
                bias = v1.get_variable("bias", [4 * UNITS], initializer=v1.zeros_initializer())
                h = run_layer(tf, x, kernel, recurrent, bias)
            with v1.variable_scope("classifier"):
                w = v1.get_variable("kernel", [UNITS, CLASSES], initializer=init)
                b = v1.get_variable("bias", [CLASSES], initializer=v1.zeros_initializer())
                logits = tf.matmul(h, w) + b
        loss = tf.reduce_mean(v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        train = v1.train.AdamOptimizer(1e-3).minimize(loss)
        initializer = v1.global_variables_initializer()
    return graph, x, y, train, initializer


def _cell(tf, x_t, h, c, kernel, recurrent, bias):
    z = tf.matmul(x_t, kernel) + tf.matmul(h, recurrent) + bias
    i, f, g, o = tf.split(z, 4, axis=1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c), c


def _unrolled(tf, x, kernel, recurrent, bias):
    h = c = tf.zeros([LSTM_BATCH, UNITS])
    for t in range(STEPS):
        h, c = _cell(tf, x[:, t], h, c, kernel, recurrent, bias)
    return h


def _while_loop(tf, x, kernel, recurrent, bias):
    steps = tf.TensorArray(tf.float32, STEPS).unstack(tf.transpose(x, [1, 0, 2]))

    def body(t, h, c):
        return (t + 1, *_cell(tf, steps.read(t), h, c, kernel, recurrent, bias))
    zeros = tf.zeros([LSTM_BATCH, UNITS])
    _, h, _ = tf.compat.v1.while_loop(lambda t, h, c: t < STEPS, body, (tf.constant(0), zeros, zeros))
    return h


def _lstm_tf2(tf, unroll: bool):
    import keras
    from keras import layers

    inputs = keras.Input((STEPS, FEATURES), batch_size=LSTM_BATCH)
    h = layers.LSTM(UNITS, unroll=unroll, name="lstm")(inputs)
    model = keras.Model(inputs, layers.Dense(CLASSES, name="classifier")(h), name="model")
    return _keras_step(tf, model, keras.optimizers.Adam(1e-3))
