"""`--crosscheck`: the catalog's matrix FLOPs against onnx-tool's, an independent profiler (the [catalog]
extra)."""

from __future__ import annotations

import math

import onnx

from catalog.entries import Entry
from horus_operator.prediction import graph_profile

MATRIX_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM")
# Graphs whose shapes onnx-tool's own shape inference gets wrong (onnx's is right): not comparable.
ONNX_TOOL_MISREADS = {
    "pointnet": "onnx-tool infers a batch of 1,024 after the transform net's Reshape to (-1, k, k)",
}
CROSSCHECK_TOLERANCE = 1e-3


def run(entries: list[Entry]) -> int:
    """Compare 2 × onnx-tool's multiply-accumulates in the matrix ops with our conv + linear +
    attention FLOPs, per entry. Elementwise ops are left out on purpose: the tools cost them
    differently (onnx-tool charges batch norm several MACs per element). A strided ConvTranspose is
    not comparable: onnx-tool charges every output position, including the zeros the stride inserts
    (stride² × the |input|·Cout·k² multiply-adds it performs). Exit status 1 above the tolerance."""
    worst = 0.0
    for entry in entries:
        model = entry.graph()
        profile = graph_profile.profile_onnx(model)
        ours = sum(profile[f"{part}_flops_per_sample"] for part in ("conv", "linear", "attention"))
        theirs = _onnx_tool_matrix_flops(model)
        difference = abs(theirs - ours) / ours
        misread = ONNX_TOOL_MISREADS.get(entry.name)
        comparable = not misread and not _has_strided_conv_transpose(model)
        worst = max(worst, difference if comparable else 0.0)
        note = "" if comparable else f"  ({misread or 'strided ConvTranspose'}: not comparable)"
        print(f"{entry.name:<34} ours {ours:12.5e}  onnx-tool {theirs:12.5e}  {100 * difference:.4f}%{note}")
    print(f"largest difference {100 * worst:.4f}% (tolerance {100 * CROSSCHECK_TOLERANCE:.1f}%)")
    return 0 if worst <= CROSSCHECK_TOLERANCE else 1


def _has_strided_conv_transpose(model: onnx.ModelProto) -> bool:
    return any(
        node.op_type == "ConvTranspose"
        and any(attribute.name == "strides" and max(attribute.ints) > 1 for attribute in node.attribute)
        for node in model.graph.node
    )


def _onnx_tool_matrix_flops(model: onnx.ModelProto) -> float:
    import numpy as np
    import onnx_tool  # the [catalog] extra; only this check needs it

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:  # onnx-tool reads only Constant's `value` form
        if node.op_type == "Constant" and node.attribute[0].name != "value":
            array = np.asarray(onnx.helper.get_attribute_value(node.attribute[0]))
            array = array.astype(np.float32 if node.attribute[0].name.startswith("value_float") else np.int64)
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("value", onnx.numpy_helper.from_array(array)))
    for tensor in copy.graph.initializer:  # onnx-tool reads weights: give them zero data
        if tensor.data_location == onnx.TensorProto.EXTERNAL:  # integer ones (shapes) keep their values
            zeros = np.zeros(list(tensor.dims), np.float32)
            tensor.CopyFrom(onnx.numpy_helper.from_array(zeros, tensor.name))
    for value in copy.graph.input:  # batch 1
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.Clear()
                dim.dim_value = 1
    profiled = onnx_tool.Model(copy)
    profiled.graph.shape_infer()
    profiled.graph.profile()
    macs = 0.0
    for node in profiled.graph.nodemap.values():
        shapes = [profiled.graph.tensormap[name].shape for name in node.input]
        if (
            node.op_type == "LSTM"
        ):  # only onnx-tool's gate-matmul term; its gate elementwise terms are left out
            macs += (math.prod(shapes[1]) + math.prod(shapes[2])) * shapes[0][0] * shapes[0][1]
        elif node.op_type in MATRIX_OPS:
            macs += node.macs[0] if isinstance(node.macs, list | tuple) else node.macs
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 2:  # onnx-tool adds the bias; we don't
            macs -= math.prod(profiled.graph.tensormap[node.output[0]].shape)
    return 2.0 * macs
