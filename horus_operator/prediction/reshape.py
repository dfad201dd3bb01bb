"""A catalog architecture at another input size: its graph re-shaped and counted again.

The catalog profiles each architecture at one input size (ImageNet's 224×224 crops, a 1,024-token
block, …). A job that trains it on CIFAR-10's 32×32 images does a fiftieth of that work and holds a
fiftieth of the activations; scaling the stored profile would be exact only for some nets and sizes,
so the graph (shipped in `data/graphs/`, written by `hack/gen_catalog.py`) gets the job's per-sample
shape on its data inputs, ONNX shape inference runs again, and `graph_profile.profile_onnx` counts it as
it counts any graph.

A shape the graph cannot take is refused (`ShapeError`) rather than counted wrong: shape inference
finds a conflict (three channels expected, a flattened feature map that no longer fits its linear
layer), a tensor shrinks to nothing (too small an image for the net's downsampling), or a Reshape
with a size written into the graph no longer holds its input (a graph exported at a fixed size, such
as a ViT's patch sequence or a transformer's sequence length: describe such a transformer by its
Hugging Face config instead).

Pure: a model in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import onnx
import onnx.shape_inference

from horus_operator.prediction import graph_profile, onnx_graph


class ShapeError(ValueError):
    """The graph cannot take the requested input shape; the message says why."""


def profile_at(model: onnx.ModelProto, sample_shape: Sequence[int]) -> dict[str, float]:
    """The profile (features.PROFILE_NAMES) of `model` with per-sample input shape `sample_shape`
    (without the batch axis: [3, 32, 32] for an image, [512] for a token sequence). It applies to every
    data input of that rank; ShapeError when there is none or the graph cannot take the shape."""
    if not sample_shape or any(size < 1 for size in sample_shape):
        raise ShapeError(f"{list(sample_shape)}: every dimension must be at least 1")
    reshaped = _with_sample_shape(model, tuple(sample_shape))
    _check_consistent(reshaped)
    try:
        return graph_profile.profile_onnx(reshaped)
    except ValueError as error:
        raise ShapeError(str(error)) from error


def sample_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Each data input's shape without its batch axis, as the graph has it."""
    return {value.name: _sample_dims(value)[1] for value in _data_values(model)}


def _data_values(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    names = set(onnx_graph.data_inputs(model))
    return [value for value in model.graph.input if value.name in names]


def _sample_dims(value: onnx.ValueInfoProto) -> tuple[list[onnx.TensorShapeProto.Dimension], tuple[int, ...]]:
    """The input's non-batch dimensions and their sizes: the batch axis is the symbolic one, else the
    first (as `onnx_graph` reads the batch)."""
    dims = list(value.type.tensor_type.shape.dim)
    symbolic = [axis for axis, dim in enumerate(dims) if not dim.HasField("dim_value") or dim.dim_value <= 0]
    batch_axis = symbolic[0] if symbolic else 0
    sample = [dim for axis, dim in enumerate(dims) if axis != batch_axis]
    return sample, tuple(dim.dim_value for dim in sample)


def _with_sample_shape(model: onnx.ModelProto, shape: tuple[int, ...]) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    matched = False
    for value in _data_values(copy):
        sample, sizes = _sample_dims(value)
        if len(sizes) == len(shape):
            matched = True
            for dim, size in zip(sample, shape, strict=True):
                dim.Clear()
                dim.dim_value = size
    if not matched:
        inputs = ", ".join(f"{name} {list(sizes)}" for name, sizes in sample_shapes(model).items())
        raise ShapeError(
            f"{list(shape)} has the rank of no input of the model (its inputs per sample: {inputs})"
        )
    del copy.graph.value_info[:]  # shapes inferred at the old size
    for output in copy.graph.output:
        output.type.tensor_type.ClearField("shape")
    return copy


def _check_consistent(model: onnx.ModelProto) -> None:
    """Strict shape inference at batch 1, then what it lets pass: a vanished dimension, a Reshape to a
    size written into the graph that no longer holds its input."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in _data_values(fixed):
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
                dim.dim_value = 1
    try:
        inferred = onnx.shape_inference.infer_shapes(fixed, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as error:
        raise ShapeError(f"ONNX shape inference fails: {str(error).splitlines()[0]}") from error
    shapes = _known_shapes(inferred.graph)
    for node in inferred.graph.node:
        _check_node(node, shapes)


def _check_node(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> None:
    where = f"{node.op_type} node {node.name or node.output[0]!r}"
    for name in node.output:
        if 0 in shapes.get(name, ()):
            raise ShapeError(f"{where} leaves an empty tensor {list(shapes[name])}: the input is too small")
    if node.op_type == "Conv" and node.input[0] in shapes and node.input[1] in shapes:
        # ONNX's inference does not compare a convolution's input channels with its weight's
        groups = next((a.i for a in node.attribute if a.name == "group"), 1)
        channels, expected = shapes[node.input[0]][1], shapes[node.input[1]][1] * groups
        if channels != expected:
            raise ShapeError(f"{where} takes {expected} input channels, the shape gives it {channels}")
    if node.op_type in _WINDOWED and node.input[0] in shapes:
        _check_window(node, shapes, where)
    if node.op_type == "Reshape" and node.input[0] in shapes and node.output[0] in shapes:
        before, after = shapes[node.input[0]], shapes[node.output[0]]
        if math.prod(before) != math.prod(after):
            raise ShapeError(
                f"{where} has a size written into the graph ({list(after)}) that no longer holds its "
                f"input ({list(before)}): the graph was made at one input size"
            )


_WINDOWED = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})


def _check_window(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """A window larger than its padded input: ONNX's inference still gives a size (integer division
    rounds towards zero), PyTorch stops ("output size is too small")."""
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    spatial = shapes[node.input[0]][2:]
    kernel = attributes.get("kernel_shape") or shapes.get(node.input[1], (0, 0))[2:]
    if len(kernel) != len(spatial):
        return
    pads = attributes.get("pads") or [0] * (2 * len(spatial))
    dilations = attributes.get("dilations") or [1] * len(spatial)
    for axis, size in enumerate(spatial):
        span = dilations[axis] * (kernel[axis] - 1) + 1
        if size + pads[axis] + pads[axis + len(spatial)] < span:
            raise ShapeError(f"{where}: a {span}-wide window on a {size}-wide input: the input is too small")


def _known_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {tensor.name: tuple(tensor.dims) for tensor in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(dim.HasField("dim_value") for dim in dims):
            shapes[value.name] = tuple(dim.dim_value for dim in dims)
    return shapes
