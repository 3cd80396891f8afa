"""ResNet-50 written twice: TF1 raw ops in a tf.Graph + Session as TensorFlow's own r1 ResNet
(official/r1/resnet: v1.5 bottlenecks with the stride on the 3x3 conv, convs without bias,
fixed padding before a strided conv, fused batch norm, a SAME max pool, momentum) and its
Keras 3 port (layer names as ``keras.applications.ResNet50`` gives them), for comparisons of
XLA runs with a real network's shape: a max-pooling stem, 16 bottleneck blocks with
projection shortcuts, 53 batch norms.

Both sides name each conv and batch norm after the unit it belongs to (``conv1``,
``conv2_block1_0`` for a projection shortcut, ``conv3_block2_2``, ...; the dense layer is
``predictions``): :func:`unit_of` is the truth a pairing is judged by. ``blocks`` makes a
shallower net of the same shape (a test's capture, on a shared 2-core machine).
"""

from __future__ import annotations

import re

import numpy as np

BATCH, SIZE, CLASSES = 8, 32, 10
BLOCKS = (3, 4, 6, 3)
FILTERS = (64, 128, 256, 512)
EPSILON, MOMENTUM = 1e-5, 0.997  # official/r1/resnet's batch norms
_UNIT = re.compile(r"^(conv1|pool1|predictions|conv\d_block\d+_\d)(_(conv|bn|relu|pad|pool|add|out))?(_\d+)?(_grad)?$")


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.random((BATCH, SIZE, SIZE, 3), dtype=np.float32),
            rng.integers(0, CLASSES, BATCH).astype(np.int32))


def units(blocks=BLOCKS) -> list[str]:
    """Every unit of the net in model order: a conv with its batch norm, the pool, the dense."""
    found = ["conv1", "pool1"]
    for stage, count in enumerate(blocks, start=2):
        for block in range(1, count + 1):
            found += [f"conv{stage}_block{block}_{i}" for i in ((0, 1, 2, 3) if block == 1 else (1, 2, 3))]
    return found + ["predictions"]


def unit_of(name: str) -> str | None:
    """The unit an op name belongs to: its innermost scope that names one."""
    for part in reversed(name.split("/")):
        found = _UNIT.match(part)
        if found:
            return found.group(1)
    return None


def resnet50_tf1(tf, blocks=BLOCKS):
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [BATCH, SIZE, SIZE, 3], name="x")
        y = v1.placeholder(tf.int32, [BATCH], name="y")
        updates = []

        def conv_bn(inputs, unit, filters, size, stride=1, relu=True):
            with v1.variable_scope(unit):
                kernel = v1.get_variable("kernel", [size, size, int(inputs.shape[-1]), filters],
                                         initializer=v1.glorot_uniform_initializer(seed=1))
                gamma = v1.get_variable("gamma", [filters], initializer=v1.ones_initializer())
                beta = v1.get_variable("beta", [filters], initializer=v1.zeros_initializer())
                mean = v1.get_variable("moving_mean", [filters], initializer=v1.zeros_initializer(), trainable=False)
                variance = v1.get_variable("moving_variance", [filters], initializer=v1.ones_initializer(),
                                           trainable=False)
                if stride > 1:  # fixed padding: the same on both sides, whatever the input size
                    total = size - 1
                    side = [total // 2, total - total // 2]
                    inputs = tf.pad(inputs, [[0, 0], side, side, [0, 0]], name="fixed_padding")
                out = tf.nn.conv2d(inputs, kernel, stride, "SAME" if stride == 1 else "VALID", name="Conv2D")
                out, batch_mean, batch_variance = v1.nn.fused_batch_norm(out, gamma, beta, epsilon=EPSILON,
                                                                         is_training=True, name="FusedBatchNorm")
                updates.append(v1.assign_sub(mean, (mean - batch_mean) * (1 - MOMENTUM), name="update_mean"))
                updates.append(v1.assign_sub(variance, (variance - batch_variance) * (1 - MOMENTUM),
                                             name="update_variance"))
                return tf.nn.relu(out, name="Relu") if relu else out

        with v1.variable_scope("resnet50"):
            h = conv_bn(x, "conv1", 64, 7, stride=2)
            h = tf.nn.max_pool2d(h, 3, 2, "SAME", name="pool1_pool")
            h = _stages(h, conv_bn, lambda main, shortcut, unit: tf.nn.relu(main + shortcut, name=f"{unit}_out"),
                        blocks)
            pooled = tf.reduce_mean(h, axis=[1, 2], name="avg_pool")
            with v1.variable_scope("predictions"):
                w = v1.get_variable("kernel", [int(h.shape[-1]), CLASSES],
                                    initializer=v1.glorot_uniform_initializer(seed=2))
                b = v1.get_variable("bias", [CLASSES], initializer=v1.zeros_initializer())
                logits = tf.nn.bias_add(tf.matmul(pooled, w), b)
        loss = tf.reduce_mean(v1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        with tf.control_dependencies(updates):
            train = v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
        init = v1.global_variables_initializer()
    return graph, x, y, train, init


def _stages(h, conv_bn, join, blocks):
    """The bottleneck stages both worlds build alike: ``conv_bn(h, unit, filters, size,
    stride, relu)`` each conv and its batch norm, ``join(main, shortcut, unit)`` the residual
    add and its ReLU."""
    for stage, (count, filters) in enumerate(zip(blocks, FILTERS), start=2):
        for block in range(1, count + 1):
            unit = f"conv{stage}_block{block}"
            stride = 2 if block == 1 and stage > 2 else 1
            shortcut = conv_bn(h, f"{unit}_0", 4 * filters, 1, stride, relu=False) if block == 1 else h
            main = conv_bn(h, f"{unit}_1", filters, 1)
            main = conv_bn(main, f"{unit}_2", filters, 3, stride)
            main = conv_bn(main, f"{unit}_3", 4 * filters, 1, relu=False)
            h = join(main, shortcut, unit)
    return h


def resnet50_keras(blocks=BLOCKS):
    """The Keras port as a user writes it (``padding="same"`` everywhere, the stride on the
    3x3 conv as in TF1), its optimizer and its loss."""
    import keras
    from keras import layers

    def conv_bn(h, unit, filters, size, stride=1, relu=True):
        h = layers.Conv2D(filters, size, strides=stride, padding="same", use_bias=False, name=f"{unit}_conv")(h)
        h = layers.BatchNormalization(epsilon=EPSILON, momentum=MOMENTUM, name=f"{unit}_bn")(h)
        return layers.Activation("relu", name=f"{unit}_relu")(h) if relu else h

    inputs = keras.Input((SIZE, SIZE, 3), batch_size=BATCH)
    h = conv_bn(inputs, "conv1", 64, 7, stride=2)
    h = layers.MaxPooling2D(3, strides=2, padding="same", name="pool1_pool")(h)
    h = _stages(h, conv_bn, lambda main, shortcut, unit: layers.Activation("relu", name=f"{unit}_out")(
        layers.Add(name=f"{unit}_add")([main, shortcut])), blocks)
    pooled = layers.GlobalAveragePooling2D(name="avg_pool")(h)
    logits = layers.Dense(CLASSES, name="predictions")(pooled)
    model = keras.Model(inputs, logits, name="resnet50")
    return model, keras.optimizers.SGD(0.01, momentum=0.9), keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def resnet50_tf2(tf, jit_compile: bool = False, blocks=BLOCKS):
    """The Keras port's training step in a ``tf.function`` (XLA-compiled with ``jit_compile``)."""
    model, optimizer, loss_fn = resnet50_keras(blocks)
    optimizer.build(model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return step


def resnet50_fit(jit_compile: bool = False, blocks=BLOCKS):
    """The Keras port compiled for ``fit``."""
    model, optimizer, loss_fn = resnet50_keras(blocks)
    model.compile(optimizer, loss_fn, jit_compile=jit_compile)
    return model
