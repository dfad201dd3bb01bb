"""Graph features of a training job, computed from its ONNX computation graph.

Horus predicts GPU utilization and co-location interference from what the model's graph says (FLOPs,
parameters, counts of convolution / linear / activation / other layers, batch size), not from kernel
profiling. This module turns a graph-only ONNX model (weights may be absent: initializers with
external data, or weights exported as graph inputs) into those numbers.

How things are counted (see docs/prediction.md, "Features and catalog"):
- FLOPs are forward-pass FLOPs; a multiply-add is 2 FLOPs. Conv: 2·|out|·Cin/g·kH·kW;
  Gemm/MatMul: 2·M·N·K; LSTM/GRU/RNN: 2·T·D·N·(G·H·I + G·H·H) with G gates. Elementwise ops and
  activations 1 FLOP per output element, normalisation 2, pooling one per window element. Biases
  are not counted. A training step costs roughly 3× the forward FLOPs.
- A recurrent layer over T time steps and D directions is unrolled: it adds 2·T·D linear ops (the
  input and the hidden projections of each step), its gate nonlinearities per step to the
  activation ops, 1 recurrent op and T·D recurrent steps.
- A MatMul whose operands are both activations (e.g. Q·Kᵀ and P·V in self-attention) is an attention
  op, not a linear layer; a fused Attention/MultiHeadAttention node counts as one attention op.
- Activation bytes sum the outputs of compute nodes: a proxy for the memory kept for backward.

Per-sample quantities come from the graph at one batch size and scale linearly, so `at_batch`
gives the features at any batch size from a batch-independent profile (the catalog stores those).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import onnx.shape_inference
from google.protobuf.message import DecodeError

# Batch-independent quantities of a graph: what the catalog stores per model.
PROFILE_NAMES: tuple[str, ...] = (
    "flops_per_sample",  # forward FLOPs for one sample (multiply-add = 2)
    "conv_flops_per_sample",  # part of flops_per_sample in convolutions
    "linear_flops_per_sample",  # part in Gemm/MatMul with a weight operand and in recurrent cells
    "attention_flops_per_sample",  # part in activation×activation MatMuls (Q·Kᵀ, P·V)
    "params",  # number of trainable parameters (weights, biases, norm scales, embeddings)
    "param_bytes",  # their size in bytes at the graph's dtypes
    "activation_bytes_per_sample",  # outputs of compute nodes for one sample
    "input_bytes_per_sample",  # model inputs for one sample (what the data loader delivers)
    "conv_ops",  # Conv / ConvTranspose nodes
    "linear_ops",  # Gemm / MatMul with a weight, + 2 per recurrent time step and direction
    "activation_ops",  # Relu, Sigmoid, Tanh, Gelu, Softmax, … + recurrent gate nonlinearities per step
    "norm_ops",  # BatchNorm, LayerNorm, InstanceNorm, GroupNorm, LRN
    "pool_ops",  # Max/Average/Global pooling
    "recurrent_ops",  # LSTM / GRU / RNN layers
    "recurrent_steps",  # time steps × directions over all recurrent layers
    "attention_ops",  # activation×activation MatMuls and fused attention nodes
    "embedding_ops",  # Gather from a parameter table
    "elementwise_ops",  # Add, Mul, Div, Sqrt, reductions, …
    "other_ops",  # layout and bookkeeping: Reshape, Transpose, Concat, Slice, Dropout, Pad, …
)
# Quantities that depend on the batch size.
BATCH_NAMES: tuple[str, ...] = (
    "batch_size",
    "flops_per_batch",  # flops_per_sample × batch_size
    "activation_bytes_per_batch",  # activation_bytes_per_sample × batch_size
    "input_bytes_per_batch",  # input_bytes_per_sample × batch_size
)
FEATURE_NAMES: tuple[str, ...] = PROFILE_NAMES + BATCH_NAMES
# Profile entries measured over the whole inferred batch and divided by its size.
_PER_SAMPLE_NAMES = tuple(name for name in PROFILE_NAMES if name.endswith("_per_sample"))


def _ops(names: str) -> frozenset[str]:
    return frozenset(names.split())


_CONV = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"})
_MATMUL = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul"})
_CONV_WEIGHT_INPUT = {"QLinearConv": 3}  # other convolutions take the weight second
_RECURRENT_GATES = {"LSTM": 5, "GRU": 3, "RNN": 1}  # nonlinearities per cell step
_ACTIVATION = _ops(
    """
    Relu LeakyRelu PRelu Sigmoid Tanh Elu Selu Celu Gelu FastGelu BiasGelu Erf HardSigmoid HardSwish
    Softplus Softsign Mish ThresholdedRelu Clip Softmax LogSoftmax QuickGelu
    """
)
_NORM = _ops(
    """
    BatchNormalization InstanceNormalization LayerNormalization GroupNormalization LpNormalization
    MeanVarianceNormalization LRN SkipLayerNormalization SimplifiedLayerNormalization
    RMSNormalization
    """
)
_POOL = frozenset({"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
_FUSED_ATTENTION = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
_ELEMENTWISE = _ops(
    """
    Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal Max Min Sum Mean Sin Cos Floor Ceil Round
    Sign Where Equal Less Greater Not And Or ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd
    ReduceSumSquare ReduceLogSumExp CumSum
    """
)
# Nodes that produce no work on the device worth counting.
_IGNORED = frozenset({"Constant", "ConstantOfShape", "Shape", "Size", "Identity"})
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
_NORM_FLOPS_PER_ELEMENT = 2  # scale and shift; statistics are a lower-order term
# Categories whose outputs are kept for the backward pass (layout ops mostly alias their input).
_ACTIVATION_CATEGORIES = _ops("conv linear attention recurrent activation norm pool embedding elementwise")

Shape = tuple[int, ...]


@dataclass
class _Graph:
    """The shape-inferred graph and what is known about each tensor."""

    nodes: list[onnx.NodeProto]
    shapes: dict[str, Shape]  # fully known shapes only
    itemsize: dict[str, int]
    params: set[str]  # tensor names that hold parameters
    weight_derived: set[str]  # parameters, constants and what is computed from them alone (Wᵀ, …)
    data_inputs: list[str]
    batch: int  # batch size the shapes were inferred at


@dataclass
class _Tally:
    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROFILE_NAMES, 0.0))

    def add(self, name: str, amount: float) -> None:
        self.counts[name] += amount


def from_onnx(model: bytes | str | Path | onnx.ModelProto, batch_size: int) -> dict[str, float]:
    """Features (keyed by FEATURE_NAMES) of an ONNX model trained at `batch_size`.

    The batch dimension may be symbolic (any axis; the one symbolic dimension the data inputs share)
    or fixed (then axis 0 of the first data input). Weights need not be present. Raises ValueError
    on unreadable input or when a non-batch dimension is unknown.
    """
    return at_batch(profile_onnx(model), batch_size)


def profile_onnx(model: bytes | str | Path | onnx.ModelProto) -> dict[str, float]:
    """Batch-independent profile (keyed by PROFILE_NAMES) of an ONNX model."""
    graph = _prepare(_load(model))
    tally = _Tally()
    for node in graph.nodes:
        _count_node(node, graph, tally)
    _count_params(graph, tally)
    tally.add("input_bytes_per_sample", sum(_nbytes(graph, name) for name in graph.data_inputs))
    for name in _PER_SAMPLE_NAMES:
        tally.counts[name] /= graph.batch
    return tally.counts


def at_batch(profile: Mapping[str, float], batch_size: int) -> dict[str, float]:
    """Features at `batch_size` from a batch-independent profile (per-sample quantities scale)."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    missing = [name for name in PROFILE_NAMES if name not in profile]
    if missing:
        raise ValueError(f"profile lacks {', '.join(missing)}")
    features = {name: float(profile[name]) for name in PROFILE_NAMES}
    features["batch_size"] = float(batch_size)
    features["flops_per_batch"] = features["flops_per_sample"] * batch_size
    features["activation_bytes_per_batch"] = features["activation_bytes_per_sample"] * batch_size
    features["input_bytes_per_batch"] = features["input_bytes_per_sample"] * batch_size
    return features


# ---- loading and shape inference ----


def _load(model: bytes | str | Path | onnx.ModelProto) -> onnx.ModelProto:
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


def _prepare(original: onnx.ModelProto) -> _Graph:
    model = onnx.ModelProto()
    model.CopyFrom(original)
    graph = model.graph
    _drop_weight_values(graph)
    roles = _tensor_roles(graph)
    params = _parameter_names(graph, roles)
    initializers = {tensor.name for tensor in graph.initializer}
    data_inputs = [
        value.name
        for value in graph.input
        if value.name not in initializers and not _feeds_weight_slots_only(roles, value.name)
    ]
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
    return _Graph(nodes, shapes, itemsize, params, derived, data_inputs, batch)


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


def _numel(graph: _Graph, name: str) -> int:
    return math.prod(graph.shapes.get(name, (0,)))


def _nbytes(graph: _Graph, name: str) -> int:
    return _numel(graph, name) * graph.itemsize.get(name, 4)


# ---- counting ----


def _count_params(graph: _Graph, tally: _Tally) -> None:
    for name in graph.params:
        tally.add("params", _numel(graph, name))
        tally.add("param_bytes", _nbytes(graph, name))


def _count_node(node: onnx.NodeProto, graph: _Graph, tally: _Tally) -> None:
    category, flops = _classify(node, graph)
    if category == "ignored":
        return
    if category == "recurrent":
        _count_recurrent(node, graph, tally)
    else:
        tally.add(f"{category}_ops", 1)
        tally.add("flops_per_sample", flops)
        if category in ("conv", "linear", "attention"):
            tally.add(f"{category}_flops_per_sample", flops)
    if category in _ACTIVATION_CATEGORIES:
        tally.add("activation_bytes_per_sample", sum(_nbytes(graph, name) for name in node.output if name))


def _classify(node: onnx.NodeProto, graph: _Graph) -> tuple[str, float]:
    """The node's category (a *_ops feature prefix, "recurrent" or "ignored") and its FLOPs."""
    op = node.op_type
    out = _numel(graph, node.output[0]) if node.output else 0
    if op in _IGNORED:
        return "ignored", 0.0
    if op in _CONV:
        return "conv", _conv_flops(node, graph)
    if op in _MATMUL:
        is_attention = op == "MatMul" and not any(name in graph.weight_derived for name in node.input[:2])
        return ("attention" if is_attention else "linear"), _matmul_flops(node, graph)
    if op in _RECURRENT_GATES:
        return "recurrent", 0.0
    if op in _FUSED_ATTENTION:
        return "attention", 0.0
    if op == "Gather" and node.input[0] in graph.params:
        return "embedding", 0.0
    if op in _ACTIVATION:
        return "activation", float(out)
    if op in _NORM:
        return "norm", float(out * _NORM_FLOPS_PER_ELEMENT)
    if op in _POOL:
        return "pool", _pool_flops(node, graph)
    if op in _ELEMENTWISE:
        return "elementwise", float(max(out, *(_numel(graph, name) for name in node.input if name)))
    return "other", 0.0


def _attribute(node: onnx.NodeProto, name: str, default: object) -> object:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _conv_flops(node: onnx.NodeProto, graph: _Graph) -> float:
    weight = _known_shape(graph, node, node.input[_CONV_WEIGHT_INPUT.get(node.op_type, 1)])
    per_output = math.prod(weight[1:])  # Cin/groups × kernel (Conv); Cout/groups × kernel (ConvTranspose)
    counted = node.input[0] if node.op_type == "ConvTranspose" else node.output[0]
    return 2.0 * math.prod(_known_shape(graph, node, counted)) * per_output


def _matmul_flops(node: onnx.NodeProto, graph: _Graph) -> float:
    left = _known_shape(graph, node, node.input[0])
    reduced = left[0] if node.op_type == "Gemm" and _attribute(node, "transA", 0) else left[-1]
    return 2.0 * math.prod(_known_shape(graph, node, node.output[0])) * reduced


def _known_shape(graph: _Graph, node: onnx.NodeProto, name: str) -> Shape:
    """The shape of a tensor whose size FLOPs depend on; ValueError when inference left it unknown."""
    shape = graph.shapes.get(name)
    if not shape:
        raise ValueError(
            f"{node.op_type} node {node.name or node.output[0]!r}: shape of {name!r} is unknown after ONNX "
            "shape inference (fix the input shapes or export with static sizes)"
        )
    return shape


def _pool_flops(node: onnx.NodeProto, graph: _Graph) -> float:
    if node.op_type.startswith("Global"):
        return float(_numel(graph, node.input[0]))
    kernel = _attribute(node, "kernel_shape", [1])
    return float(_numel(graph, node.output[0]) * math.prod(kernel))


def _count_recurrent(node: onnx.NodeProto, graph: _Graph, tally: _Tally) -> None:
    x_shape, w_shape, r_shape = (_known_shape(graph, node, name) for name in node.input[:3])
    batch_first = _attribute(node, "layout", 0) == 1
    steps, batch = (x_shape[1], x_shape[0]) if batch_first else (x_shape[0], x_shape[1])
    directions, gate_rows, input_size = w_shape
    hidden = r_shape[2]
    flops = 2.0 * steps * directions * batch * gate_rows * (input_size + hidden)
    unrolled = steps * directions
    tally.add("flops_per_sample", flops)
    tally.add("linear_flops_per_sample", flops)
    tally.add("linear_ops", 2 * unrolled)
    tally.add("activation_ops", _RECURRENT_GATES[node.op_type] * unrolled)
    tally.add("recurrent_ops", 1)
    tally.add("recurrent_steps", unrolled)


def describe(features: Mapping[str, float]) -> Iterable[tuple[str, float]]:
    """(name, value) pairs in FEATURE_NAMES order, for printing."""
    return ((name, features[name]) for name in FEATURE_NAMES if name in features)
