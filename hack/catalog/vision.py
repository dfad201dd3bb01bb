"""Convolutional image models, layer for layer as their reference PyTorch definitions build them.

ImageNet models follow torchvision.models (3×224×224 input, 1000 classes); CIFAR models follow
kuangliu/pytorch-cifar (the ResNet-18 Gavel trains, DPN) and dyhan0920/PyramidNet-PyTorch
(3×32×32, 10 classes). Each function returns the output logits of one forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from catalog.builder import GraphBuilder, Tensor

IMAGENET = (3, 224, 224)
CIFAR = (3, 32, 32)


def image_input(b: GraphBuilder, shape: tuple[int, int, int]) -> Tensor:
    return b.input("image", ["N", *shape])


def conv_bn(
    b: GraphBuilder,
    x: Tensor,
    out: int,
    kernel: int,
    *,
    stride: int = 1,
    groups: int = 1,
    act: str | None = "Relu",
    padding: int | None = None,
) -> Tensor:
    y = b.batch_norm(b.conv(x, out, kernel, stride=stride, groups=groups, padding=padding))
    if act == "Relu6":
        return b.relu6(y)
    if act == "Swish":
        return b.swish(y)
    return b.act(y, act) if act else y


def classifier(b: GraphBuilder, x: Tensor, classes: int) -> Tensor:
    return b.linear(b.flatten(b.global_avg_pool(x)), classes)


# ---- ResNet / ResNeXt (torchvision; CIFAR stem from kuangliu) ----


def _basic_block(b: GraphBuilder, x: Tensor, planes: int, stride: int, _groups: int, _width: int) -> Tensor:
    y = conv_bn(b, x, planes, 3, stride=stride)
    y = conv_bn(b, y, planes, 3, act=None)
    return b.act(b.add(y, _shortcut(b, x, planes, stride)))


def _bottleneck(
    b: GraphBuilder, x: Tensor, planes: int, stride: int, groups: int, width_per_group: int
) -> Tensor:
    width = planes * width_per_group // 64 * groups
    y = conv_bn(b, x, width, 1)
    y = conv_bn(b, y, width, 3, stride=stride, groups=groups)
    y = conv_bn(b, y, planes * 4, 1, act=None)
    return b.act(b.add(y, _shortcut(b, x, planes * 4, stride)))


def _shortcut(b: GraphBuilder, x: Tensor, out: int, stride: int) -> Tensor:
    if stride == 1 and x.features == out:
        return x
    return conv_bn(b, x, out, 1, stride=stride, act=None)


def resnet(
    depth_blocks: Sequence[int],
    *,
    bottleneck: bool,
    input_shape: tuple[int, int, int] = IMAGENET,
    classes: int = 1000,
    groups: int = 1,
    width_per_group: int = 64,
    name: str = "resnet",
) -> onnx.ModelProto:
    b = GraphBuilder(name)
    x = image_input(b, input_shape)
    # kuangliu's CIFAR stem is one 3×3 convolution; torchvision's a 7×7/2 convolution and a 3×3/2 max-pool
    cifar = input_shape == CIFAR
    x = conv_bn(b, x, 64, 3) if cifar else b.max_pool(conv_bn(b, x, 64, 7, stride=2), 3, 2, 1)
    block = _bottleneck if bottleneck else _basic_block
    for stage, blocks in enumerate(depth_blocks):
        planes = 64 * 2**stage
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            x = block(b, x, planes, stride, groups, width_per_group)
    return b.model([classifier(b, x, classes)])


# ---- VGG ----

VGG_CONFIGS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [
        64,
        64,
        "M",
        128,
        128,
        "M",
        256,
        256,
        256,
        256,
        "M",
        512,
        512,
        512,
        512,
        "M",
        512,
        512,
        512,
        512,
        "M",
    ],
}


def vgg(config: str, *, adaptive_pool: bool = False) -> onnx.ModelProto:
    """torchvision's VGG. Its AdaptiveAvgPool2d((7, 7)) is the identity at 224×224 and left out of the
    catalog's graph; `adaptive_pool` keeps its shape for other input sizes (the graph shipped for
    spec.model.inputShape): a global average and an expansion to 7×7, which holds torchvision's shapes
    at any size (its values only where the last feature map is 1×1, CIFAR's case)."""
    b = GraphBuilder(config)
    x = image_input(b, IMAGENET)
    for layer in VGG_CONFIGS[config]:
        x = b.max_pool(x, 2, 2) if layer == "M" else b.act(b.conv(x, int(layer), 3, bias=True))
    if adaptive_pool:
        x = Tensor(b.op("Expand", [b.global_avg_pool(x).name, b.constant([1, 1, 7, 7])]), 4, x.features)
    x = b.flatten(x, 512 * 7 * 7)  # 224 input leaves 7×7, so the adaptive pool is the identity
    x = b.act(b.linear(x, 4096))
    x = b.act(b.linear(x, 4096))
    return b.model([b.linear(x, 1000)])


# ---- DenseNet ----


def densenet(growth: int, blocks: Sequence[int], init_features: int, name: str) -> onnx.ModelProto:
    b = GraphBuilder(name)
    x = b.max_pool(conv_bn(b, image_input(b, IMAGENET), init_features, 7, stride=2), 3, 2, 1)
    for index, layers in enumerate(blocks):
        features = [x]
        for _ in range(layers):
            joined = b.concat(features) if len(features) > 1 else features[0]
            y = b.conv(b.act(b.batch_norm(joined)), 4 * growth, 1)
            features.append(b.conv(b.act(b.batch_norm(y)), growth, 3))
        x = b.concat(features)
        if index < len(blocks) - 1:
            x = b.avg_pool(b.conv(b.act(b.batch_norm(x)), x.features // 2, 1), 2, 2)
    return b.model([classifier(b, b.act(b.batch_norm(x)), 1000)])


# ---- MobileNetV2, MNASNet, EfficientNet (inverted residuals) ----


def mobilenet_v2() -> onnx.ModelProto:
    b = GraphBuilder("mobilenet_v2")
    x = conv_bn(b, image_input(b, IMAGENET), 32, 3, stride=2, act="Relu6")
    settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]
    for expand, out, repeats, first_stride in settings:
        for index in range(repeats):
            x = _inverted_residual(b, x, out, 3, first_stride if index == 0 else 1, expand, "Relu6")
    x = conv_bn(b, x, 1280, 1, act="Relu6")
    return b.model([classifier(b, x, 1000)])


def _inverted_residual(
    b: GraphBuilder,
    x: Tensor,
    out: int,
    kernel: int,
    stride: int,
    expand: int,
    act: str,
    expansions: list[Tensor] | None = None,
) -> Tensor:
    """MobileNetV2 block; appends the expansion output to `expansions` when given (U-Net taps)."""
    hidden = x.features * expand
    y = x
    if expand != 1:
        y = conv_bn(b, x, hidden, 1, act=act)
        if expansions is not None:
            expansions.append(y)
    elif expansions is not None:
        expansions.append(x)  # keeps list positions equal to block numbers
    y = conv_bn(b, y, hidden, kernel, stride=stride, groups=hidden, act=act)
    y = conv_bn(b, y, out, 1, act=None)
    return b.add(y, x) if stride == 1 and x.features == out else y


def mnasnet(alpha: float, name: str) -> onnx.ModelProto:
    def depth(channels: int) -> int:  # torchvision's _round_to_multiple_of(channels * alpha, 8)
        value = channels * alpha
        rounded = max(8, int(value + 4) // 8 * 8)
        return rounded if rounded >= 0.9 * value else rounded + 8

    b = GraphBuilder(name)
    d = [depth(c) for c in (32, 16, 24, 40, 80, 96, 192, 320)]
    x = conv_bn(b, image_input(b, IMAGENET), d[0], 3, stride=2)
    x = conv_bn(b, x, d[0], 3, groups=d[0])
    x = conv_bn(b, x, d[1], 1, act=None)
    stacks = [
        (d[2], 3, 2, 3, 3),
        (d[3], 5, 2, 3, 3),
        (d[4], 5, 2, 6, 3),
        (d[5], 3, 1, 6, 2),
        (d[6], 5, 2, 6, 4),
        (d[7], 3, 1, 6, 1),
    ]
    for out, kernel, stride, expand, repeats in stacks:
        for index in range(repeats):
            x = _inverted_residual(b, x, out, kernel, stride if index == 0 else 1, expand, "Relu")
    x = conv_bn(b, x, 1280, 1)
    return b.model([classifier(b, x, 1000)])


def efficientnet_b0() -> onnx.ModelProto:
    b = GraphBuilder("efficientnet_b0")
    x = conv_bn(b, image_input(b, IMAGENET), 32, 3, stride=2, act="Swish")
    stages = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    ]
    for expand, kernel, stride, out, repeats in stages:
        for index in range(repeats):
            x = _mbconv(b, x, out, kernel, stride if index == 0 else 1, expand)
    x = conv_bn(b, x, 1280, 1, act="Swish")
    return b.model([classifier(b, x, 1000)])


def _mbconv(b: GraphBuilder, x: Tensor, out: int, kernel: int, stride: int, expand: int) -> Tensor:
    """torchvision MBConv: expand, depthwise, squeeze-excitation (SiLU, sigmoid gate), project."""
    hidden = x.features * expand
    y = conv_bn(b, x, hidden, 1, act="Swish") if expand != 1 else x
    y = conv_bn(b, y, hidden, kernel, stride=stride, groups=hidden, act="Swish")
    gate = b.swish(b.conv(b.global_avg_pool(y), max(1, x.features // 4), 1, bias=True))
    y = b.mul(y, b.act(b.conv(gate, hidden, 1, bias=True), "Sigmoid"))
    y = conv_bn(b, y, out, 1, act=None)
    return b.add(y, x) if stride == 1 and x.features == out else y


# ---- ShuffleNetV2 ----


def shufflenet_v2(stage_out: Sequence[int], name: str) -> onnx.ModelProto:
    b = GraphBuilder(name)
    x = b.max_pool(conv_bn(b, image_input(b, IMAGENET), 24, 3, stride=2), 3, 2, 1)
    for out, repeats in zip(stage_out[:3], (4, 8, 4), strict=True):
        x = _shuffle_unit(b, x, out, 2)
        for _ in range(repeats - 1):
            x = _shuffle_unit(b, x, out, 1)
    x = conv_bn(b, x, stage_out[3], 1)
    return b.model([classifier(b, x, 1000)])


def _shuffle_unit(b: GraphBuilder, x: Tensor, out: int, stride: int) -> Tensor:
    half = out // 2
    if stride == 1:
        keep, x = b.split_channels(x, [x.features // 2, x.features // 2])
    else:
        keep = conv_bn(b, conv_bn(b, x, x.features, 3, stride=2, groups=x.features, act=None), half, 1)
    y = conv_bn(b, x, half, 1)
    y = conv_bn(b, y, half, 3, stride=stride, groups=half, act=None)
    y = conv_bn(b, y, half, 1)
    joined = b.concat([keep, y])
    # channel shuffle with 2 groups: [N, 2, C/2, H·W] → swap the group axes → back to [N, C, H, W]
    grouped = b.transpose(b.reshape(joined, [0, 2, out // 2, -1], out), [0, 2, 1, 3])
    return Tensor(b.op("Reshape", [grouped.name, b.op("Shape", [joined.name])]), 4, out)


# ---- SqueezeNet, GoogLeNet ----


def squeezenet(version: str) -> onnx.ModelProto:
    b = GraphBuilder(f"squeezenet{version}")
    x = image_input(b, IMAGENET)
    if version == "1_0":
        x = b.max_pool(b.act(b.conv(x, 96, 7, stride=2, padding=0, bias=True)), 3, 2, ceil=True)
        plan = [
            (16, 64),
            (16, 64),
            (32, 128),
            "M",
            (32, 128),
            (48, 192),
            (48, 192),
            (64, 256),
            "M",
            (64, 256),
        ]
    else:
        x = b.max_pool(b.act(b.conv(x, 64, 3, stride=2, padding=0, bias=True)), 3, 2, ceil=True)
        plan = [
            (16, 64),
            (16, 64),
            "M",
            (32, 128),
            (32, 128),
            "M",
            (48, 192),
            (48, 192),
            (64, 256),
            (64, 256),
        ]
    for step in plan:
        if step == "M":
            x = b.max_pool(x, 3, 2, ceil=True)
        else:
            squeeze, expand = step
            s = b.act(b.conv(x, squeeze, 1, bias=True))
            x = b.concat([b.act(b.conv(s, expand, 1, bias=True)), b.act(b.conv(s, expand, 3, bias=True))])
    x = b.act(b.conv(x, 1000, 1, bias=True))
    return b.model([b.flatten(b.global_avg_pool(x))])


def googlenet() -> onnx.ModelProto:
    """torchvision GoogLeNet as trained from scratch: with both auxiliary classifiers."""
    b = GraphBuilder("googlenet")
    x = b.max_pool(conv_bn(b, image_input(b, IMAGENET), 64, 7, stride=2), 3, 2, ceil=True)
    x = b.max_pool(conv_bn(b, conv_bn(b, x, 64, 1), 192, 3), 3, 2, ceil=True)
    x = _inception(b, x, 64, 96, 128, 16, 32, 32)
    x = b.max_pool(_inception(b, x, 128, 128, 192, 32, 96, 64), 3, 2, ceil=True)
    x = _inception(b, x, 192, 96, 208, 16, 48, 64)
    outputs = [_aux_head(b, x)]
    x = _inception(b, x, 160, 112, 224, 24, 64, 64)
    x = _inception(b, x, 128, 128, 256, 24, 64, 64)
    x = _inception(b, x, 112, 144, 288, 32, 64, 64)
    outputs.append(_aux_head(b, x))
    x = b.max_pool(_inception(b, x, 256, 160, 320, 32, 128, 128), 2, 2, ceil=True)
    x = _inception(b, x, 256, 160, 320, 32, 128, 128)
    x = _inception(b, x, 384, 192, 384, 48, 128, 128)
    return b.model([classifier(b, x, 1000), *outputs])


def _inception(
    b: GraphBuilder, x: Tensor, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int
) -> Tensor:
    branch1 = conv_bn(b, x, c1, 1)
    branch2 = conv_bn(b, conv_bn(b, x, c3r, 1), c3, 3)
    branch3 = conv_bn(b, conv_bn(b, x, c5r, 1), c5, 3)  # torchvision uses 3×3 here, not 5×5
    branch4 = conv_bn(b, b.max_pool(x, 3, 1, 1, ceil=True), pool, 1)
    return b.concat([branch1, branch2, branch3, branch4])


def _aux_head(b: GraphBuilder, x: Tensor) -> Tensor:
    y = conv_bn(b, b.avg_pool(x, 5, 3), 128, 1)  # 14×14 → 4×4, the adaptive pool at 224 input
    y = b.act(b.linear(b.flatten(y, 128 * 4 * 4), 1024))
    return b.linear(y, 1000)


# ---- CIFAR: DPN-92 (kuangliu), PyramidNet-110 α=48 (dyhan0920) ----


def dpn92_cifar() -> onnx.ModelProto:
    b = GraphBuilder("dpn92")
    x = conv_bn(b, image_input(b, CIFAR), 64, 3)
    stages = [(96, 256, 3, 16, 1), (192, 512, 4, 32, 2), (384, 1024, 20, 24, 2), (768, 2048, 3, 128, 2)]
    for in_planes, out_planes, blocks, dense, stride in stages:
        for index in range(blocks):
            x = _dpn_block(b, x, in_planes, out_planes, dense, stride if index == 0 else 1, index == 0)
    return b.model([b.linear(b.flatten(b.avg_pool(x, 4, 4)), 10)])


def _dpn_block(
    b: GraphBuilder, x: Tensor, in_planes: int, out_planes: int, dense: int, stride: int, first: bool
) -> Tensor:
    y = conv_bn(b, x, in_planes, 1)
    y = conv_bn(b, y, in_planes, 3, stride=stride, groups=32)
    y = conv_bn(b, y, out_planes + dense, 1, act=None)
    shortcut = conv_bn(b, x, out_planes + dense, 1, stride=stride, act=None) if first else x
    s_res, s_dense = b.split_channels(shortcut, [out_planes, shortcut.features - out_planes])
    y_res, y_dense = b.split_channels(y, [out_planes, dense])
    return b.act(b.concat([b.add(s_res, y_res), s_dense, y_dense]))


def pyramidnet_cifar(depth: int = 110, alpha: int = 48) -> onnx.ModelProto:
    b = GraphBuilder(f"pyramidnet{depth}")
    blocks_per_stage = (depth - 2) // 6
    add_rate = alpha / (3 * blocks_per_stage)
    x = b.batch_norm(b.conv(image_input(b, CIFAR), 16, 3))
    width = 16.0
    for stage in range(3):
        for index in range(blocks_per_stage):
            width += add_rate
            x = _pyramid_block(b, x, round(width), 2 if stage > 0 and index == 0 else 1)
    x = b.act(b.batch_norm(x))
    return b.model([b.linear(b.flatten(b.avg_pool(x, 8, 8)), 10)])


def _pyramid_block(b: GraphBuilder, x: Tensor, out: int, stride: int) -> Tensor:
    y = b.conv(b.batch_norm(x), out, 3, stride=stride)
    y = b.batch_norm(b.conv(b.act(b.batch_norm(y)), out, 3))
    shortcut = b.avg_pool(x, 2, 2) if stride == 2 else x
    # zero-padded identity shortcut: extra channels are zeros, no parameters
    shortcut = b.pad(shortcut, [0, 0, 0, 0, 0, out - x.features, 0, 0])
    return b.add(y, Tensor(shortcut.name, 4, out))


# ---- the TensorFlow models of the alnair utilization data (Keras / TF-Hub definitions) ----


def mobilenet_v1(*, classes: int, image: int = 224) -> onnx.ModelProto:
    """Keras MobileNet (α = 1.0): a 3×3 stem and 13 depthwise-separable blocks, global pool, head."""
    b = GraphBuilder("mobilenet_v1")
    x = conv_bn(b, image_input(b, (3, image, image)), 32, 3, stride=2, act="Relu6")
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5, (1024, 2), (1024, 1)]
    for out, stride in plan:
        x = conv_bn(b, x, x.features, 3, stride=stride, groups=x.features, act="Relu6")
        x = conv_bn(b, x, out, 1, act="Relu6")
    return b.model([classifier(b, x, classes)])


def efficientnet_v2_s(*, classes: int, image: int = 224) -> onnx.ModelProto:
    """torchvision efficientnet_v2_s: Fused-MBConv stages, then MBConv stages with squeeze-excitation."""
    b = GraphBuilder("efficientnet_v2_s")
    x = conv_bn(b, image_input(b, (3, image, image)), 24, 3, stride=2, act="Swish")
    stages = [
        (_fused_mbconv, 1, 1, 24, 2),
        (_fused_mbconv, 4, 2, 48, 4),
        (_fused_mbconv, 4, 2, 64, 4),
        (_mbconv_3x3, 4, 2, 128, 6),
        (_mbconv_3x3, 6, 1, 160, 9),
        (_mbconv_3x3, 6, 2, 256, 15),
    ]
    for block, expand, stride, out, repeats in stages:
        for index in range(repeats):
            x = block(b, x, out, stride if index == 0 else 1, expand)
    x = conv_bn(b, x, 1280, 1, act="Swish")
    return b.model([classifier(b, x, classes)])


def _mbconv_3x3(b: GraphBuilder, x: Tensor, out: int, stride: int, expand: int) -> Tensor:
    return _mbconv(b, x, out, 3, stride, expand)


def _fused_mbconv(b: GraphBuilder, x: Tensor, out: int, stride: int, expand: int) -> Tensor:
    hidden = x.features * expand
    if hidden != x.features:
        y = conv_bn(b, conv_bn(b, x, hidden, 3, stride=stride, act="Swish"), out, 1, act=None)
    else:
        y = conv_bn(b, x, out, 3, stride=stride, act="Swish")
    return b.add(y, x) if stride == 1 and x.features == out else y


def inception_v3(*, classes: int, image: int, aux: bool) -> onnx.ModelProto:
    """torchvision Inception3 (BasicConv2d = convolution, batch norm, ReLU); `aux` adds the auxiliary
    classifier that runs in training."""
    b = GraphBuilder("inception_v3")
    x = conv_bn(b, image_input(b, (3, image, image)), 32, 3, stride=2, padding=0)
    x = conv_bn(b, conv_bn(b, x, 32, 3, padding=0), 64, 3)
    x = b.max_pool(x, 3, 2)
    x = b.max_pool(conv_bn(b, conv_bn(b, x, 80, 1), 192, 3, padding=0), 3, 2)
    for pool_features in (32, 64, 64):
        x = _inception_a(b, x, pool_features)
    x = _inception_b(b, x)
    for channels_7x7 in (128, 160, 160, 192):
        x = _inception_c(b, x, channels_7x7)
    outputs = []
    if aux:
        y = conv_bn(b, conv_bn(b, b.avg_pool(x, 5, 3), 128, 1), 768, 5, padding=0)
        outputs.append(classifier(b, y, classes))
    x = _inception_e(b, _inception_e(b, _inception_d(b, x)))
    return b.model([classifier(b, x, classes), *outputs])


def _inception_a(b: GraphBuilder, x: Tensor, pool_features: int) -> Tensor:
    branch5 = conv_bn(b, conv_bn(b, x, 48, 1), 64, 5)
    double3 = conv_bn(b, conv_bn(b, conv_bn(b, x, 64, 1), 96, 3), 96, 3)
    pool = conv_bn(b, b.avg_pool(x, 3, 1, 1), pool_features, 1)
    return b.concat([conv_bn(b, x, 64, 1), branch5, double3, pool])


def _inception_b(b: GraphBuilder, x: Tensor) -> Tensor:
    branch3 = conv_bn(b, x, 384, 3, stride=2, padding=0)
    double3 = conv_bn(b, conv_bn(b, conv_bn(b, x, 64, 1), 96, 3), 96, 3, stride=2, padding=0)
    return b.concat([branch3, double3, b.max_pool(x, 3, 2)])


def _conv_bn_chain(b: GraphBuilder, x: Tensor, layers: Sequence[tuple[int, tuple[int, int]]]) -> Tensor:
    for out, kernel in layers:
        x = b.act(b.batch_norm(b.conv(x, out, kernel)))
    return x


def _inception_c(b: GraphBuilder, x: Tensor, c7: int) -> Tensor:
    branch7 = _conv_bn_chain(b, x, [(c7, (1, 1)), (c7, (1, 7)), (192, (7, 1))])
    double7 = _conv_bn_chain(b, x, [(c7, (1, 1)), (c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))])
    pool = conv_bn(b, b.avg_pool(x, 3, 1, 1), 192, 1)
    return b.concat([conv_bn(b, x, 192, 1), branch7, double7, pool])


def _inception_d(b: GraphBuilder, x: Tensor) -> Tensor:
    branch3 = conv_bn(b, conv_bn(b, x, 192, 1), 320, 3, stride=2, padding=0)
    branch7 = _conv_bn_chain(b, x, [(192, (1, 1)), (192, (1, 7)), (192, (7, 1))])
    branch7 = conv_bn(b, branch7, 192, 3, stride=2, padding=0)
    return b.concat([branch3, branch7, b.max_pool(x, 3, 2)])


def _inception_e(b: GraphBuilder, x: Tensor) -> Tensor:
    def split_3x3(y: Tensor) -> Tensor:
        return b.concat([_conv_bn_chain(b, y, [(384, (1, 3))]), _conv_bn_chain(b, y, [(384, (3, 1))])])

    branch3 = split_3x3(conv_bn(b, x, 384, 1))
    double3 = split_3x3(conv_bn(b, conv_bn(b, x, 448, 1), 384, 3))
    pool = conv_bn(b, b.avg_pool(x, 3, 1, 1), 192, 1)
    return b.concat([conv_bn(b, x, 320, 1), branch3, double3, pool])


def unet_mobilenet_v2(*, image: int, classes: int) -> onnx.ModelProto:
    """TensorFlow's segmentation tutorial: a Keras MobileNetV2 encoder (without its last 1×1
    convolution) tapped at five resolutions, pix2pix upsampling blocks (transposed 3×3/2 convolution,
    batch norm, ReLU) joined with the taps, and a transposed convolution to `classes` maps."""
    b = GraphBuilder("unet-mobilenet_v2")
    x = conv_bn(b, image_input(b, (3, image, image)), 32, 3, stride=2, act="Relu6")
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]  # fmt: skip
    expansions: list[Tensor] = []  # block k's expansion output, in Keras' numbering
    for expand, out, repeats, first_stride in settings:
        for index in range(repeats):
            x = _inverted_residual(
                b, x, out, 3, first_stride if index == 0 else 1, expand, "Relu6", expansions
            )
    skips = [expansions[block] for block in (1, 3, 6, 13)]  # block_1_expand_relu, …, block_13_expand_relu
    for filters, skip in zip((512, 256, 128, 64), reversed(skips), strict=True):
        up = b.conv_transpose(x, filters, 3, stride=2, padding=1, output_padding=1, bias=False)
        x = b.concat([b.act(b.batch_norm(up)), skip])
    return b.model([b.conv_transpose(x, classes, 3, stride=2, padding=1, output_padding=1)])


def nasnet_mobile(*, classes: int, image: int = 224) -> onnx.ModelProto:
    """Keras NASNetMobile (NASNet-A 4@1056): a stride-2 stem, two stem reduction cells, then three
    stacks of 4 normal cells separated by reduction cells; each cell also reads the previous cell's
    input. Keras' asymmetric "correct" padding is written as symmetric padding that gives the same
    output sizes, so the FLOPs are the same."""
    b = GraphBuilder("nasnet_mobile")
    stem = b.batch_norm(b.conv(image_input(b, (3, image, image)), 32, 3, stride=2, padding=0))
    filters = 1056 // 24
    # (cell, width) in order; after a reduction cell the previous tensor is one resolution up
    plan = [
        (_nasnet_reduction, filters // 4),
        (_nasnet_reduction, filters // 2),
        *[(_nasnet_normal, filters)] * 4,
        (_nasnet_reduction, 2 * filters),
        *[(_nasnet_normal, 2 * filters)] * 4,
        (_nasnet_reduction, 4 * filters),
        *[(_nasnet_normal, 4 * filters)] * 4,
    ]
    x, previous, after_reduction = stem, None, False
    for cell, width in plan:
        p = _nasnet_adjust(b, previous, x, width, after_reduction)
        x, previous = cell(b, x, p, width), x
        after_reduction = cell is _nasnet_reduction
    return b.model([classifier(b, b.act(x), classes)])


def _separable(b: GraphBuilder, x: Tensor, filters: int, kernel: int, stride: int = 1) -> Tensor:
    """Keras' _separable_conv_block: twice (ReLU, depthwise k×k, pointwise 1×1, batch norm)."""
    for step_stride in (stride, 1):
        x = b.act(x)
        x = b.conv(x, x.features, kernel, stride=step_stride, groups=x.features)
        x = b.batch_norm(b.conv(x, filters, 1))
    return x


def _nasnet_adjust(b: GraphBuilder, previous: Tensor | None, x: Tensor, filters: int, reduce: bool) -> Tensor:
    """Keras' _adjust_block: bring the previous tensor to this cell's resolution and width."""
    if previous is None:
        return x
    if reduce:  # factorized reduction: two stride-2 paths offset by one pixel, half the filters each
        relu = b.act(previous)
        first = b.conv(b.avg_pool(relu, 1, 2), filters // 2, 1)
        padded = b.pad(relu, [0, 0, 0, 0, 0, 0, 1, 1])
        ends, axes = b.constant([2**62, 2**62]), b.constant([2, 3])
        shifted = Tensor(b.op("Slice", [padded.name, b.constant([1, 1]), ends, axes]), 4, relu.features)
        second = b.conv(b.avg_pool(shifted, 1, 2), filters // 2, 1)
        return b.batch_norm(b.concat([first, second]))
    if previous.features != filters:
        return b.batch_norm(b.conv(b.act(previous), filters, 1))
    return previous


def _nasnet_normal(b: GraphBuilder, x: Tensor, p: Tensor, filters: int) -> Tensor:
    h = b.batch_norm(b.conv(b.act(x), filters, 1))
    blocks = [
        b.add(_separable(b, h, filters, 5), _separable(b, p, filters, 3)),
        b.add(_separable(b, p, filters, 5), _separable(b, p, filters, 3)),
        b.add(b.avg_pool(h, 3, 1, 1), p),
        b.add(b.avg_pool(p, 3, 1, 1), b.avg_pool(p, 3, 1, 1)),
        b.add(_separable(b, h, filters, 3), h),
    ]
    return b.concat([p, *blocks])


def _nasnet_reduction(b: GraphBuilder, x: Tensor, p: Tensor, filters: int) -> Tensor:
    h = b.batch_norm(b.conv(b.act(x), filters, 1))
    x1 = b.add(_separable(b, h, filters, 5, 2), _separable(b, p, filters, 7, 2))
    x2 = b.add(b.max_pool(h, 3, 2, 1), _separable(b, p, filters, 7, 2))
    x3 = b.add(b.avg_pool(h, 3, 2, 1), _separable(b, p, filters, 5, 2))
    x4 = b.add(b.avg_pool(x1, 3, 1, 1), x2)
    x5 = b.add(_separable(b, x1, filters, 3), b.max_pool(h, 3, 2, 1))
    return b.concat([x2, x3, x4, x5])
