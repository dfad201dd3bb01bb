"""Loading an ONNX model for counting: weights dropped, the batch fixed, shapes inferred.

`graph_profile` counts FLOPs, parameters and activation bytes over the `Graph` this module prepares. The
preparation is its own step because it decides what the counts mean: which graph inputs are data and
which are weights exported as inputs, what the batch size is, and which tensors derive from weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnx.shape_inference
from google.protobuf.message import DecodeError

# Input positions holding weights: a graph input used only there is a parameter, not data.
_WEIGHT_SLOTS: dict[str, frozenset[int]] = {
    "Conv": frozenset({1, 2}),
    "ConvTranspose": frozenset({1, 2}),
    "Gemm": frozenset({1, 2}),
    "MatMul": frozenset({1}),
    "BatchNormalization": frozenset({1, 2, 3, 4}),
    "InstanceNormalization": frozenset({1, 2}),
    "LayerNormalization": frozenset({1, 2}),
    "GroupNormalization": frozenset({1, 2}),
    "LSTM": frozenset({1, 2, 3}),
    "GRU": frozenset({1, 2, 3}),
    "RNN": frozenset({1, 2, 3}),
    "Gather": frozenset({0}),
    "PRelu": frozenset({1}),
}
# BatchNorm running mean and variance: state, neither data nor trainable parameters.
_BUFFER_SLOTS: dict[str, frozenset[int]] = {"BatchNormalization": frozenset({3, 4})}
_DATA, _WEIGHT, _BUFFER = 0, 1, 2  # roles of a tensor at one input position
_INDEX_TYPES = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL})

Shape = tuple[int, ...]


@dataclass
class Graph:
    """The shape-inferred graph and what is known about each tensor."""

    nodes: list[onnx.NodeProto]
    shapes: dict[str, Shape]  # fully known shapes only
    itemsize: dict[str, int]
    params: set[str]  # tensor names that hold parameters
    weight_derived: set[str]  # parameters, constants and what is computed from them alone (Wᵀ, …)
    data_inputs: list[str]
    batch: int  # batch size the shapes were inferred at


def load(model: bytes | str | Path | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, bytes):
            proto = onnx.load_model_from_string(model)
        else:
            proto = onnx.load(str(model), load_external_data=False)
    except (DecodeError, OSError, RuntimeWarning, ValueError) as error:
        raise ValueError(f"cannot read ONNX model {_describe(model)}: {error}") from error
    if not proto.graph.node:
        raise ValueError(f"ONNX model {_describe(model)} has no graph nodes (not an ONNX model?)")
    return proto


def _describe(model: bytes | str | Path) -> str:
    return f"({len(model)} bytes)" if isinstance(model, bytes) else str(model)


def prepare(original: onnx.ModelProto) -> Graph:
    model = onnx.ModelProto()
    model.CopyFrom(original)
    graph = model.graph
    _drop_weight_values(graph)
    roles = _tensor_roles(graph)
    params = _parameter_names(graph, roles)
    initializers = {tensor.name for tensor in graph.initializer}
    data_inputs = _data_inputs(graph, roles)
    batch = _fix_batch_dimension(graph, data_inputs)
    # Stale intermediate shapes may name the symbolic batch; infer them afresh.
    del graph.value_info[:]
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except onnx.shape_inference.InferenceError as error:
        raise ValueError(f"ONNX shape inference failed: {error}") from error
    shapes, itemsize = _tensor_types(inferred.graph)
    nodes = list(inferred.graph.node)
    derived = _weight_derived(nodes, params | initializers)
    return Graph(nodes, shapes, itemsize, params, derived, data_inputs, batch)


def data_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs that carry data (not weights exported as inputs), in graph order."""
    return _data_inputs(model.graph, _tensor_roles(model.graph))


def _data_inputs(graph: onnx.GraphProto, roles: Mapping[str, set[int]]) -> list[str]:
    initializers = {tensor.name for tensor in graph.initializer}
    return [
        value.name
        for value in graph.input
        if value.name not in initializers and not _feeds_weight_slots_only(roles, value.name)
    ]


def _drop_weight_values(graph: onnx.GraphProto) -> None:
    """Keep the shapes of floating-point initializers, drop their values: counting needs only the
    shapes, and shape inference then stays far below protobuf's 2 GB limit for big models. Integer
    initializers keep their values: shapes and indices feed shape inference."""
    for tensor in graph.initializer:
        if tensor.data_type not in _INDEX_TYPES:
            for values in ("raw_data", "float_data", "double_data", "int32_data", "external_data"):
                tensor.ClearField(values)
            tensor.data_location = onnx.TensorProto.DEFAULT


def _weight_derived(nodes: list[onnx.NodeProto], constants: set[str]) -> set[str]:
    """Tensors computed from parameters and constants only, e.g. a tied embedding transposed into
    a projection matrix: a MatMul with one of them is a linear layer, not attention."""
    derived = set(constants)
    for node in nodes:  # ONNX nodes are topologically sorted
        if all(name in derived for name in node.input if name):
            derived.update(node.output)
    return derived


def _tensor_roles(graph: onnx.GraphProto) -> dict[str, set[int]]:
    """For each tensor name, the roles (_DATA, _WEIGHT, _BUFFER) of the input slots it feeds."""
    roles: dict[str, set[int]] = {}
    for node in graph.node:
        weight_slots = _WEIGHT_SLOTS.get(node.op_type, frozenset())
        buffer_slots = _BUFFER_SLOTS.get(node.op_type, frozenset())
        for position, name in enumerate(node.input):
            role = _BUFFER if position in buffer_slots else _WEIGHT if position in weight_slots else _DATA
            roles.setdefault(name, set()).add(role)
    return roles


def _parameter_names(graph: onnx.GraphProto, roles: Mapping[str, set[int]]) -> set[str]:
    """Trainable tensors: floating-point initializers and graph inputs used only in weight slots.

    Integer initializers (shapes, indices) and BatchNorm running statistics are not parameters.
    """
    initializers = {tensor.name for tensor in graph.initializer if tensor.data_type not in _INDEX_TYPES}
    weight_inputs = {value.name for value in graph.input if _feeds_weight_slots_only(roles, value.name)}
    return {name for name in initializers | weight_inputs if roles.get(name) != {_BUFFER}}


def _feeds_weight_slots_only(roles: Mapping[str, set[int]], name: str) -> bool:
    """True for weights and buffers exported as graph inputs (torch.onnx.export(export_params=False))."""
    return roles.get(name, {_DATA}) <= {_WEIGHT, _BUFFER}


def _fix_batch_dimension(graph: onnx.GraphProto, data_inputs: list[str]) -> int:
    """Make every data input shape concrete; returns the batch size the graph now has.

    A symbolic batch is set to 1. Any other unknown dimension is an error: FLOPs need it.
    """
    dims = [
        (value.name, axis, dim)
        for value in graph.input
        if value.name in data_inputs
        for axis, dim in enumerate(value.type.tensor_type.shape.dim)
    ]
    if not dims:
        raise ValueError("the ONNX graph has no data input with a known shape")
    # An unnamed unknown dimension is its own symbol: it cannot be told apart from a sequence length.
    symbols = {dim.dim_param or f"?{name}[{axis}]" for name, axis, dim in dims if _is_unknown(dim)}
    if len(symbols) > 1:
        raise ValueError(
            f"the ONNX inputs have several symbolic dimensions {sorted(symbols)}; only the batch may be "
            "symbolic (export with fixed sequence lengths and image sizes)"
        )
    if symbols:
        for _, _, dim in dims:
            if _is_unknown(dim):
                dim.Clear()
                dim.dim_value = 1
        return 1
    _, _, first_dim = dims[0]
    return first_dim.dim_value


def _is_unknown(dim: onnx.TensorShapeProto.Dimension) -> bool:
    return not dim.HasField("dim_value") or dim.dim_value <= 0


def _tensor_types(graph: onnx.GraphProto) -> tuple[dict[str, Shape], dict[str, int]]:
    shapes: dict[str, Shape] = {}
    itemsize: dict[str, int] = {}
    for tensor in graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
        itemsize[tensor.name] = _itemsize(tensor.data_type)
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            continue
        dims = tensor_type.shape.dim
        if all(dim.HasField("dim_value") for dim in dims):
            shapes[value.name] = tuple(dim.dim_value for dim in dims)
            itemsize[value.name] = _itemsize(tensor_type.elem_type)
    return shapes, itemsize


def _itemsize(elem_type: int) -> int:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except (KeyError, TypeError):
        return 4


def numel(graph: Graph, name: str) -> int:
    return math.prod(graph.shapes.get(name, (0,)))


def nbytes(graph: Graph, name: str) -> int:
    return numel(graph, name) * graph.itemsize.get(name, 4)
