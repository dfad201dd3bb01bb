"""The GPU table: GPU Feature Discovery products resolve to their own datasheet row, never another's."""

from __future__ import annotations

import pytest

from horus_operator.prediction.api import UnknownGpuError
from horus_operator.prediction.gpus import GPU_SPECS, gpu_spec, normalize_gpu

# Product strings as GPU Feature Discovery writes them into `nvidia.com/gpu.product`.
GFD_PRODUCTS = [
    ("Tesla-K80", "k80"),
    ("Tesla-P100-PCIE-16GB", "p100"),
    ("Tesla-V100-SXM2-16GB", "v100"),
    ("Tesla-V100-PCIE-16GB", "v100-pcie"),
    ("Tesla-V100-SXM2-32GB", "v100-32gb"),
    ("Tesla-T4", "t4"),
    ("NVIDIA-A10", "a10"),
    ("NVIDIA-A10G", "a10g"),
    ("NVIDIA-A30", "a30"),
    ("NVIDIA-A40", "a40"),
    ("NVIDIA-A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA-A100-PCIE-40GB", "a100-40gb"),
    ("NVIDIA-A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA-A100-80GB-PCIe", "a100-80gb-pcie"),
    ("NVIDIA-L4", "l4"),
    ("NVIDIA-L40", "l40"),
    ("NVIDIA-L40S", "l40s"),
    ("NVIDIA-H100-PCIe", "h100-pcie"),
    ("NVIDIA-H100-80GB-HBM3", "h100"),
    ("NVIDIA-H100-NVL", "h100-nvl"),
    ("NVIDIA-H200", "h200"),
    ("NVIDIA-H200-NVL", "h200-nvl"),
    ("NVIDIA-GeForce-RTX-3090", "rtx-3090"),
    ("NVIDIA-GeForce-RTX-4090", "rtx-4090"),
    ("NVIDIA-RTX-A6000", "rtx-a6000"),
    ("NVIDIA-RTX-6000-Ada-Generation", "rtx-6000-ada"),
    ("NVIDIA-B200", "b200"),
    ("NVIDIA-B300-SXM6-AC", "b300"),
    ("NVIDIA-GB200", "gb200"),
    ("NVIDIA-GeForce-RTX-5090", "rtx-5090"),
    # short names, as in `horus predict --gpu` and the simulator
    ("v100", "v100"),
    ("P100", "p100"),
    ("a100", "a100-40gb"),
    ("h100", "h100"),
    ("rtx-4090", "rtx-4090"),
]


@pytest.mark.parametrize(("product", "expected"), GFD_PRODUCTS)
def test_products_resolve_to_their_own_row(product: str, expected: str) -> None:
    assert normalize_gpu(product) == expected


def test_every_row_is_reachable_by_its_name() -> None:
    assert all(normalize_gpu(name) == name for name in GPU_SPECS)


def test_large_gpus_keep_their_memory() -> None:
    assert gpu_spec("NVIDIA-H100-80GB-HBM3").memory_mib == 80 * 1024
    assert gpu_spec("NVIDIA-H200").memory_mib == 141 * 1024
    assert gpu_spec("NVIDIA-A100-SXM4-40GB").memory_mib == 40 * 1024
    assert gpu_spec("NVIDIA-B200").memory_mib == 180 * 1024


def test_precision_picks_the_fast_path_where_there_is_one() -> None:
    assert gpu_spec("h100").peak_tflops("bf16") > 10 * gpu_spec("h100").peak_tflops("fp32")
    assert gpu_spec("v100").peak_tflops("amp") == 125
    assert gpu_spec("v100").peak_tflops("bf16") == gpu_spec("v100").fp32_tflops  # no BF16 before Ampere
    with pytest.raises(ValueError, match="precision 'fp8'"):
        gpu_spec("h100").peak_tflops("fp8")


# The RTX 5090 D is its own product (a China variant with other limits), not an RTX 5090.
@pytest.mark.parametrize(
    "product", ["", "x900", "AMD-MI250", "NVIDIA-GH200-480GB", "NVIDIA-GeForce-RTX-5090-D"]
)
def test_unknown_products_are_refused_by_name(product: str) -> None:
    with pytest.raises(UnknownGpuError, match="unknown GPU"):
        normalize_gpu(product)


def test_a_mig_slice_is_refused_naming_the_label() -> None:
    with pytest.raises(UnknownGpuError, match=r"NVIDIA-A100-SXM4-40GB-MIG-1g\.5gb.*MIG"):
        normalize_gpu("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
