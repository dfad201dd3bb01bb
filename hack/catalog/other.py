"""Reinforcement learning, GAN and recommendation models of the Gavel and Muri workloads."""

from __future__ import annotations

import onnx

from catalog.builder import GraphBuilder, Tensor


def recoder_autoencoder(*, items: int, hidden: int) -> onnx.ModelProto:
    """recoder DynamicAutoencoder(hidden_layers=[hidden], activation 'tanh') over all items:
    item vector → tanh(hidden) → item logits."""
    b = GraphBuilder("recommendation")
    x = b.input("interactions", ["N", items])
    return b.model([b.linear(b.act(b.linear(x, hidden), "Tanh"), items)])


def a3c_lstm(*, frame: int, actions: int) -> onnx.ModelProto:
    """rl_a3c_pytorch A3Clstm: four conv + max-pool + leaky-ReLU stages, LSTMCell(1024, 512),
    critic and actor heads; one forward step on one 1×80×80 frame."""
    b = GraphBuilder("a3c")
    x = b.input("frame", ["N", 1, frame, frame])
    for out, kernel, padding in ((32, 5, 2), (32, 5, 1), (64, 4, 1), (64, 3, 1)):
        x = b.act(
            b.max_pool(b.conv(x, out, kernel, padding=padding, bias=True), 2, 2), "LeakyRelu", alpha=0.1
        )
    x = b.flatten(x, 64 * 4 * 4)
    # LSTMCell = one step of an LSTM layer: [N, 1024] → [1, N, 1024] → [N, 512]
    step = Tensor(b.op("Unsqueeze", [x.name, b.constant([0])]), 3, x.features)
    state = b.lstm(step, 512)
    hidden = Tensor(b.op("Squeeze", [state.name, b.constant([0])]), 2, 512)
    return b.model([b.linear(hidden, 1), b.linear(hidden, actions)])


def _nature_conv_body(b: GraphBuilder, x: Tensor) -> Tensor:
    """DeepRL NatureConvBody: the DQN paper's 3 conv layers and a 512-unit layer."""
    x = b.act(b.conv(x, 32, 8, stride=4, padding=0, bias=True))
    x = b.act(b.conv(x, 64, 4, stride=2, padding=0, bias=True))
    x = b.act(b.conv(x, 64, 3, stride=1, padding=0, bias=True))
    return b.act(b.linear(b.flatten(x, 64 * 7 * 7), 512))


def a2c(*, frames: int, actions: int) -> onnx.ModelProto:
    """DeepRL CategoricalActorCriticNet(NatureConvBody): policy and value heads on one observation."""
    b = GraphBuilder("a2c")
    body = _nature_conv_body(b, b.input("observation", ["N", frames, 84, 84]))
    return b.model([b.linear(body, actions), b.linear(body, 1)])


def dqn(*, frames: int, actions: int) -> onnx.ModelProto:
    """DeepRL VanillaNet(NatureConvBody) as DQNAgent trains it: the online network on the states and
    the target network (same architecture; a frozen copy) on the next states."""
    b = GraphBuilder("dqn")
    outputs = []
    for name in ("state", "next_state"):
        with b.scope("q_network"):  # same weights: the target copy is not trained
            body = _nature_conv_body(b, b.input(name, ["N", frames, 84, 84]))
            outputs.append(b.linear(body, actions))
    return b.model(outputs)


def _resnet_generator(b: GraphBuilder, x: Tensor, residual_blocks: int) -> Tensor:
    """PyTorch-GAN (eriklindernoren) GeneratorResNet: reflection padding, instance norm."""
    y = b.act(
        b.instance_norm(b.conv(b.pad(x, [0, 0, 3, 3, 0, 0, 3, 3], "reflect"), 64, 7, padding=0, bias=True))
    )
    for out in (128, 256):
        y = b.act(b.instance_norm(b.conv(y, out, 3, stride=2, padding=1, bias=True)))
    for _ in range(residual_blocks):
        z = b.pad(y, [0, 0, 1, 1, 0, 0, 1, 1], "reflect")
        z = b.act(b.instance_norm(b.conv(z, 256, 3, padding=0, bias=True)))
        z = b.instance_norm(
            b.conv(b.pad(z, [0, 0, 1, 1, 0, 0, 1, 1], "reflect"), 256, 3, padding=0, bias=True)
        )
        y = b.add(y, z)
    for out in (128, 64):
        y = b.act(b.instance_norm(b.conv(b.upsample(y, 2), out, 3, padding=1, bias=True)))
    y = b.conv(b.pad(y, [0, 0, 3, 3, 0, 0, 3, 3], "reflect"), 3, 7, padding=0, bias=True)
    return b.act(y, "Tanh")


def _patch_discriminator(b: GraphBuilder, x: Tensor) -> Tensor:
    """PyTorch-GAN Discriminator: four stride-2 4×4 convolutions (no norm on the first), then 1 map."""
    y = x
    for out, normalize in ((64, False), (128, True), (256, True), (512, True)):
        y = b.conv(y, out, 4, stride=2, padding=1, bias=True)
        y = b.act(b.instance_norm(y) if normalize else y, "LeakyRelu", alpha=0.2)
    y = b.pad(y, [0, 0, 1, 0, 0, 0, 0, 1])  # nn.ZeroPad2d((1, 0, 1, 0))
    return b.conv(y, 1, 4, padding=1, bias=True)


def cyclegan(*, image: int, residual_blocks: int) -> onnx.ModelProto:
    """One CycleGAN training step of PyTorch-GAN's cyclegan.py (which Gavel runs): per image pair,
    6 generator passes (identity ×2, translation ×2, cycle ×2) and 6 discriminator passes."""
    b = GraphBuilder("cyclegan")
    real = {side: b.input(f"real_{side}", ["N", 3, image, image]) for side in ("A", "B")}

    def generator(name: str, x: Tensor) -> Tensor:
        with b.scope(name):
            return _resnet_generator(b, x, residual_blocks)

    def discriminator(name: str, x: Tensor) -> Tensor:
        with b.scope(name):
            return _patch_discriminator(b, x)

    identity = [generator("G_BA", real["A"]), generator("G_AB", real["B"])]
    fake_b, fake_a = generator("G_AB", real["A"]), generator("G_BA", real["B"])
    cycle = [generator("G_BA", fake_b), generator("G_AB", fake_a)]
    judged = [
        discriminator("D_B", fake_b),
        discriminator("D_A", fake_a),
        discriminator("D_A", real["A"]),
        discriminator("D_A", fake_a),  # on a replayed fake: same cost
        discriminator("D_B", real["B"]),
        discriminator("D_B", fake_b),
    ]
    return b.model([*identity, *cycle, *judged])


def dcgan_mnist(*, noise: int) -> onnx.ModelProto:
    """TensorFlow's DCGAN tutorial, one training step per sample: the generator on a noise vector and
    the discriminator on a real and on a generated 28×28 image."""
    b = GraphBuilder("dcgan")
    z = b.input("noise", ["N", noise])
    with b.scope("generator"):
        g = b.act(b.batch_norm(b.linear(z, 7 * 7 * 256, bias=False)), "LeakyRelu", alpha=0.3)
        g = b.reshape(g, [0, 256, 7, 7], 256)
        for out, stride in ((128, 1), (64, 2)):
            g = b.conv_transpose(g, out, 5, stride=stride, padding=2, output_padding=stride - 1, bias=False)
            g = b.act(b.batch_norm(g), "LeakyRelu", alpha=0.3)
        fake = b.act(b.conv_transpose(g, 1, 5, stride=2, padding=2, output_padding=1, bias=False), "Tanh")

    def discriminator(image: Tensor) -> Tensor:
        with b.scope("discriminator"):
            d = b.act(b.conv(image, 64, 5, stride=2, bias=True), "LeakyRelu", alpha=0.3)
            d = b.act(b.conv(d, 128, 5, stride=2, bias=True), "LeakyRelu", alpha=0.3)
            return b.linear(b.flatten(d, 128 * 7 * 7), 1)

    real = b.input("image", ["N", 1, 28, 28])
    return b.model([discriminator(real), discriminator(fake)])


def dqn_cartpole(*, hidden: tuple[int, ...], actions: int) -> onnx.ModelProto:
    """TF-Agents DQN tutorial on CartPole: a dense Q-network on the 4 observation values, run on the
    observation and (as the target network) on the next one of each sampled 2-step trajectory."""
    b = GraphBuilder("dqn-cartpole")
    outputs = []
    for name in ("observation", "next_observation"):
        with b.scope("q_network"):  # same shapes; the target copy is not trained
            x = b.input(name, ["N", 4])
            for units in hidden:
                x = b.act(b.linear(x, units))
            outputs.append(b.linear(x, actions))
    return b.model(outputs)
