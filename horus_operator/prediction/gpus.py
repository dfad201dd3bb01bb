"""GPU types the models know, their datasheet figures, and the mapping from node labels to them.

The models are trained on measurements from three GPU types (Gavel's K80, P100 and V100). Anything else
a node reports through GPU Feature Discovery (`nvidia.com/gpu.product`) is mapped to the supported type
of the nearest generation:

- Kepler / Maxwell (K80, K40, K20, M60, M40, M4, GTX 9xx, Titan X Maxwell) -> ``k80``
- Pascal (P100, P40, P4, GTX 10xx, Titan Xp) -> ``p100``
- Volta and newer (V100, T4, A100, A30, A10, A40, L4, L40, H100, H200, RTX, Titan V...) -> ``v100``

Mapping newer GPUs onto ``v100`` is an extrapolation: their slowdowns and memory capacity are predicted as
if they were a 16 GiB V100, which under-uses large-memory GPUs but never oversubscribes them. A product
that matches none of these families raises `UnknownGpuError`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from horus_operator.prediction.api import UnknownGpuError


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU (for the K80: one of the two GK210 chips on the board)."""

    memory_mib: int
    peak_tflops_fp32: float  # boost clock
    memory_bandwidth_gbs: float


GPU_SPECS: dict[str, GpuSpec] = {
    "k80": GpuSpec(memory_mib=12 * 1024, peak_tflops_fp32=4.37, memory_bandwidth_gbs=240.0),
    "p100": GpuSpec(memory_mib=16 * 1024, peak_tflops_fp32=9.3, memory_bandwidth_gbs=732.0),
    "v100": GpuSpec(memory_mib=16 * 1024, peak_tflops_fp32=15.7, memory_bandwidth_gbs=900.0),
}

GPU_TYPES: tuple[str, ...] = tuple(GPU_SPECS)

# First match wins; patterns see the lower-cased product with separators turned into spaces.
_FAMILY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(k80|k40m?|k20[xm]?|k520|m60|m40|m4|gtx 9\d0|titan x maxwell)\b"), "k80"),
    (re.compile(r"\b(p100|p40|p4|p6|gtx 10\d0( ti)?|titan xp?)\b"), "p100"),
    (
        re.compile(
            r"\b(v100s?|titan v|t4|a100|a800|a30|a40|a10g?|a16|a2|l4|l40s?|h100|h800|h200|gh200|b100|b200"
            r"|rtx \w+|quadro rtx \w+)\b"
        ),
        "v100",
    ),
)


@functools.lru_cache(maxsize=256)  # called on every prediction with a node's product label
def normalize_gpu(product: str) -> str:
    """The model GPU type (`k80|p100|v100`) for a GPU type or GPU Feature Discovery product label,
    e.g. "Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-80GB" or "p100"."""
    text = re.sub(r"[-_/\s]+", " ", product.strip().lower())
    if text in GPU_SPECS:
        return text
    for pattern, gpu_type in _FAMILY_PATTERNS:
        if pattern.search(text):
            return gpu_type
    raise UnknownGpuError(f"unknown GPU {product!r}: supported types are {', '.join(GPU_TYPES)}")
