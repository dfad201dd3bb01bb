"""Export a reference PyTorch module to a graph-only ONNX model (needs the [catalog] extra and torch).

Only `python hack/gen_catalog.py --from-torch` imports this module. It exports with torch.onnx's
dynamo exporter at opset 20 (Gelu and LayerNormalization are single ops there; no fused Attention
op, so Q·Kᵀ and P·V stay MatMuls that graph_profile.py counts) and keeps the graph as the module
computes it in training:

- batch norm stays a BatchNormalization node (the exporter's default optimizer folds it into the
  preceding convolution, as for inference; training runs it);
- nothing computed from a parameter is folded into a new initializer (a transposed weight stays a
  Transpose of the parameter), so the float initializers are exactly the module's parameters and
  its batch-norm running statistics, and `graph_profile.profile_onnx` counts the parameters
  `module.parameters()` holds: `export` checks that and refuses a graph that disagrees;
- other float buffers (rotary frequencies, fixed position tables) become Constant nodes;
- weights keep their shapes, not their values (external data in a file that is not shipped);
- the nodes carry no stack traces (they name local paths: the same export on another machine would
  write other bytes);
- an LSTM takes its weights as parameters in ONNX's layout, not through the exporter's re-layout of
  torch's (Slice, Concat, Unsqueeze of the parameters: nodes a training step never runs), and its
  output keeps its number of steps from the input, so a recurrent graph can be re-shaped to another
  sequence length (spec.model.inputShape).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir
import torch
from onnx_ir.passes import common as common_passes
from onnxscript import rewriter
from onnxscript.optimizer import _constant_folding
from onnxscript.rewriter import _fuse_batchnorm

from horus_operator.prediction import graph_profile

OPSET = 20
LARGE_CONSTANT = 1024  # elements
WEIGHTS_LOCATION = "weights-not-shipped.bin"
_FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


@dataclass(frozen=True)
class Exported:
    model: onnx.ModelProto
    torch_params: int  # unique parameters of the module (tied weights once)
    profile: dict[str, float]


def versions() -> dict[str, str]:
    """The packages the committed graphs were exported with."""
    import importlib.metadata

    packages = ("torch", "torchvision", "torchaudio", "transformers", "onnxscript", "onnx")
    return {name: importlib.metadata.version(name) for name in packages}


def parameter_count(module: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())  # parameters() de-duplicates


def randomize(module: torch.nn.Module, seed: int = 0) -> None:
    """Distinct values in every parameter and float buffer: exporters merge initializers with equal
    contents (fresh batch-norm scales are all ones), which would hide parameters from the count."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
        for name, buffer in module.named_buffers():
            if buffer.is_floating_point() and name.endswith(("running_mean", "running_var")):
                buffer.copy_(torch.rand(buffer.shape, generator=generator) + 0.5)


def export(
    module: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    *,
    kwargs: dict | None = None,
    unused: Sequence[str] = (),
) -> Exported:
    """The graph of `module(*inputs, **kwargs)` in eval mode (no dropout; batch norm with running
    statistics, which costs the same as with batch statistics), weights without values. `unused`
    names parameters that the eval-mode forward does not touch (they are not in the graph)."""
    module.eval()
    randomize(module)
    named = dict(module.named_parameters())
    params = parameter_count(module) - sum(named[name].numel() for name in unused)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module,
            tuple(inputs),
            kwargs=kwargs,
            dynamo=True,
            opset_version=OPSET,
            optimize=False,
            verbose=False,
        )
    model = program.model
    parameter_names = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    _optimize(model)
    _strip_weights(model, parameter_names)
    proto = ir.serde.serialize_model(model)
    for node in proto.graph.node:  # the exporter's stack traces name the paths of this checkout
        del node.metadata_props[:]
    _lstm_weights_as_parameters(proto)
    _lstm_steps_from_input(proto.graph)
    profile = graph_profile.profile_onnx(proto)
    if profile["params"] != params:
        raise ValueError(
            f"the exported graph holds {profile['params']:,.0f} parameters, the module {params:,}: "
            "a parameter was folded, merged or dropped"
        )
    return Exported(proto, params, profile)


def _optimize(model: ir.Model) -> None:
    """The exporter's own clean-up (constant folding of shape arithmetic, no-op removal) without the
    inference-only rewrites: batch-norm folding, and folding anything computed from a weight."""
    rules = [rule for rule in rewriter._DEFAULT_REWRITE_RULES if rule not in _fuse_batchnorm.rules]
    initializers = set(model.graph.initializers)

    def should_fold(node: ir.Node) -> bool | None:
        uses_weight = any(
            value is not None and value.name in initializers and value.dtype in _FLOAT_TYPES
            for value in node.inputs
        )
        return False if uses_weight else None

    passes = ir.passes.Sequential(
        common_passes.InlinePass(),
        ir.passes.PassManager(
            [
                _constant_folding.FoldConstantsPass(
                    shape_inference=True,
                    input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                    output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
                    should_fold=should_fold,
                ),
                rewriter.RewritePass(rules),
                common_passes.RemoveUnusedNodesPass(),
                common_passes.RemoveUnusedFunctionsPass(),
                common_passes.RemoveUnusedOpsetsPass(),
            ],
            steps=2,
            early_stop=True,
        ),
        common_passes.RemoveUnusedNodesPass(),
        common_passes.CommonSubexpressionEliminationPass(),
    )
    passes(model)
    _global_average_pools(model.graph)


def _global_average_pools(graph: ir.Graph) -> None:
    """AdaptiveAvgPool2d(1) as a GlobalAveragePool node (the exporter writes ReduceMean over H, W),
    as torch's TorchScript exporter has it: a pooling op, not a reduction."""
    for node in list(graph):
        if node.op_type != "ReduceMean" or len(node.inputs) != 2 or node.inputs[1] is None:
            continue
        data, axes = node.inputs
        keepdims = node.attributes.get_int("keepdims", 1)
        if axes.const_value is None or data.shape is None or len(data.shape) != 4 or not keepdims:
            continue
        if sorted(int(axis) % 4 for axis in axes.const_value.numpy().reshape(-1)) != [2, 3]:
            continue
        pool = ir.node("GlobalAveragePool", inputs=[data], num_outputs=1)
        graph.insert_before(node, pool)
        pool.outputs[0].shape, pool.outputs[0].dtype = node.outputs[0].shape, node.outputs[0].dtype
        node.outputs[0].replace_all_uses_with(pool.outputs[0], replace_graph_outputs=True)
        graph.remove(node, safe=True)


def _constant(tensor: ir.TensorProtocol) -> list[ir.Node]:
    """A Constant node with the buffer's values when small; a large one (a target network's weights,
    a relative-position table) as ConstantOfShape: counting needs its shape, not its values."""
    if tensor.size <= LARGE_CONSTANT:
        return [ir.node("Constant", inputs=[], attributes={"value": tensor}, num_outputs=1)]
    dims = ir.tensor(np.asarray(tensor.shape.numpy(), dtype=np.int64))
    shape = ir.node("Constant", inputs=[], attributes={"value": dims}, num_outputs=1)
    zero = ir.tensor(np.zeros(1, tensor.dtype.numpy()))
    return [
        shape,
        ir.node("ConstantOfShape", inputs=[shape.outputs[0]], attributes={"value": zero}, num_outputs=1),
    ]


def _batch_norm_statistic(value: ir.Value) -> bool:
    """Running mean or variance of a BatchNormalization node (FrozenBatchNorm2d computes with its
    statistics in elementwise ops: there they are constants)."""
    uses = list(value.uses())
    return bool(uses) and all(
        node.op_type == "BatchNormalization" and index in (3, 4) for node, index in uses
    )


def _strip_weights(model: ir.Model, parameter_names: set[str]) -> None:
    """Parameters and running statistics keep only their shapes; other float initializers (buffers
    and folded constants) become Constant nodes; integer initializers (shapes, indices) stay."""
    graph = model.graph
    for name, value in list(graph.initializers.items()):
        tensor = value.const_value
        if tensor is None or tensor.dtype not in _FLOAT_TYPES:
            continue
        if name in parameter_names or _batch_norm_statistic(value):
            value.const_value = ir.ExternalTensor(
                WEIGHTS_LOCATION,
                offset=0,
                length=math.prod(tensor.shape) * tensor.dtype.itemsize,
                dtype=tensor.dtype,
                shape=tensor.shape,
                name=name,
            )
            continue
        del graph.initializers[name]
        nodes = _constant(tensor)
        graph.insert_before(next(iter(graph)), nodes)
        constant = nodes[-1]
        value.replace_all_uses_with(constant.outputs[0])
        if value in graph.outputs:  # a buffer returned as it is: keep it under its name
            constant.outputs[0].name = name


def _lstm_steps_from_input(graph: onnx.GraphProto) -> None:
    """The exporter unpacks an LSTM's output Y [steps, directions, batch, hidden] (through a
    Transpose) with a Reshape whose target holds the number of steps as a number; 0 ("this axis of the
    input", allowzero unset) is the same at the exported length and follows any other."""
    producers = {output: node for node in graph.node for output in node.output}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    for node in graph.node:
        if node.op_type != "Reshape" or any(a.name == "allowzero" and a.i for a in node.attribute):
            continue
        source = producers.get(node.input[0])
        if source is not None and source.op_type == "Transpose":
            source = producers.get(source.input[0])
        if source is None or source.op_type != "LSTM" or node.input[1] not in initializers:
            continue
        name = f"{node.input[1]}_steps_from_input"  # a copy: the target may be shared by other nodes
        if name not in initializers:
            target = onnx.numpy_helper.to_array(initializers[node.input[1]]).copy()
            target[0] = 0
            initializers[name] = onnx.numpy_helper.from_array(target, name)
            graph.initializer.append(initializers[name])
        node.input[1] = name


_LAYOUT_OPS = frozenset({"Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Constant"})


def _lstm_weights_as_parameters(model: onnx.ModelProto) -> None:
    """The exporter re-lays a torch LSTM's weights into ONNX's gate order with Slice, Concat and
    Unsqueeze nodes on the parameters. Each LSTM's W, R and B computed that way become one parameter of
    the shape the op takes (the same elements, so the count is unchanged) and the re-layout goes."""
    graph = model.graph
    producers = {output: node for node in graph.node for output in node.output}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    shapes = {
        value.name: [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        for value in onnx.shape_inference.infer_shapes(model).graph.value_info
    }
    replaced = False
    for node in graph.node:
        if node.op_type != "LSTM":
            continue
        for index, role in zip((1, 2, 3), "WRB", strict=False):
            sources = _layout_sources(
                node.input[index] if index < len(node.input) else "", producers, initializers
            )
            if not sources:
                continue
            source = initializers[min(sources)]
            shape = shapes[node.input[index]]
            if math.prod(shape) != sum(math.prod(initializers[name].dims) for name in sources):
                continue
            name = f"{node.name}.{role}"
            tensor = onnx.TensorProto(name=name, data_type=source.data_type, dims=shape)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            length = math.prod(shape) * onnx.helper.tensor_dtype_to_np_dtype(source.data_type).itemsize
            for key, value in (("location", WEIGHTS_LOCATION), ("offset", "0"), ("length", str(length))):
                tensor.external_data.add(key=key, value=value)
            graph.initializer.append(tensor)
            node.input[index] = name
            replaced = True
    if replaced:
        _remove_dead_nodes(graph)


def _layout_sources(name: str, producers: dict, initializers: dict) -> set[str]:
    """The float parameters `name` is computed from when only layout ops compute it, else none."""
    sources: set[str] = set()
    pending = [name] if name else []
    while pending:
        value = pending.pop()
        if value in initializers:
            if initializers[value].data_type == onnx.TensorProto.FLOAT:
                sources.add(value)
            continue
        node = producers.get(value)
        if node is None or node.op_type not in _LAYOUT_OPS:
            return set()
        pending += [input_ for input_ in node.input if input_]
    return sources if name not in initializers else set()


def _remove_dead_nodes(graph: onnx.GraphProto) -> None:
    """Nodes whose outputs nothing reads, and the initializers only they read."""
    read_by_dead: set[str] = set()
    while True:
        used = {name for node in graph.node for name in node.input} | {value.name for value in graph.output}
        dead = [node for node in graph.node if not any(output in used for output in node.output)]
        for node in dead:
            read_by_dead.update(node.input)
            graph.node.remove(node)
        if not dead:
            break
    for tensor in [tensor for tensor in graph.initializer if tensor.name in read_by_dead - used]:
        graph.initializer.remove(tensor)
