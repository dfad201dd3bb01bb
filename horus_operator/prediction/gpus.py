"""GPUs as data: datasheet figures of current NVIDIA GPUs, and GPU Feature Discovery products mapped to them.

`data/gpus.csv` holds one row per GPU product (docs/prediction.md, "GPU table", gives the sources):
memory, memory bandwidth, FP32 peak, FP16 and BF16 peak (tensor cores where the GPU has them; dense, no
sparsity; 0 where the precision has no fast path), SM count, generation. The models take these figures
as features; no product is mapped onto another. A node's `nvidia.com/gpu.product` label (or a short name
such as `v100`, `h100`) resolves to its row by the row's `match` pattern, most specific row first; a
product no row matches, or a MIG slice, raises `UnknownGpuError` naming the value.

The datasheet memory is the capacity where nothing better is known (the CLI); placement uses the node's
`nvidia.com/gpu.memory` label.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from importlib import resources

from horus_operator.api.defaults import DEFAULT_PRECISION
from horus_operator.prediction.api import UnknownGpuError

PRECISIONS: tuple[str, ...] = (DEFAULT_PRECISION, "amp", "bf16")


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU (for the K80: one of the two GK210 chips on the board)."""

    name: str
    generation: str
    memory_mib: int
    memory_bandwidth_gbs: float
    fp32_tflops: float  # boost clock
    fp16_tflops: float  # tensor cores (fp32 accumulate) where present; 0: no fast FP16 path
    bf16_tflops: float  # 0: no BF16 fast path (before Ampere)
    sm_count: int  # 0 where NVIDIA publishes none (B200, B300, GB200); no model reads it

    def peak_tflops(self, precision: str) -> float:
        """Peak rate of the matrix maths a training step at `precision` runs on: FP32 for fp32, the
        FP16 (amp) or BF16 path where the GPU has one, else FP32 (the framework falls back)."""
        check_precision(precision)
        fast = {"fp32": 0.0, "amp": self.fp16_tflops, "bf16": self.bf16_tflops}[precision]
        return max(self.fp32_tflops, fast)


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return precision


def _load() -> tuple[dict[str, GpuSpec], tuple[tuple[re.Pattern[str], str], ...]]:
    text = resources.files(__package__).joinpath("data", "gpus.csv").read_text(encoding="utf-8")
    specs: dict[str, GpuSpec] = {}
    patterns = []
    for row in csv.DictReader(io.StringIO(text)):
        specs[row["name"]] = GpuSpec(
            name=row["name"],
            generation=row["generation"],
            memory_mib=int(row["memory_mib"]),
            memory_bandwidth_gbs=float(row["memory_bandwidth_gbs"]),
            fp32_tflops=float(row["fp32_tflops"]),
            fp16_tflops=float(row["fp16_tflops"]),
            bf16_tflops=float(row["bf16_tflops"]),
            sm_count=int(row["sm_count"]),
        )
        patterns.append((re.compile(row["match"]), row["name"]))
    return specs, tuple(patterns)


GPU_SPECS, _PATTERNS = _load()
GPU_TYPES: tuple[str, ...] = tuple(GPU_SPECS)
# The GPU types the shipped co-location measurements (Gavel) cover.
MEASURED_GPU_TYPES: tuple[str, ...] = ("k80", "p100", "v100")
_MIG = re.compile(r"\bmig\b")


def _words(product: str) -> str:
    return re.sub(r"[-_/\s]+", " ", product.strip().lower())


_BY_WORDS = {_words(name): name for name in GPU_SPECS}


@functools.lru_cache(maxsize=256)  # called on every prediction with a node's product label
def normalize_gpu(product: str) -> str:
    """The GPU table's name for a short name or GPU Feature Discovery product label, e.g.
    "Tesla-V100-SXM2-16GB" -> "v100", "NVIDIA-A100-SXM4-80GB" -> "a100-80gb", "NVIDIA-H100-PCIe"
    -> "h100-pcie"."""
    text = _words(product)
    if text in _BY_WORDS:
        return _BY_WORDS[text]
    if _MIG.search(text):
        raise UnknownGpuError(
            f"GPU {product!r} is a MIG instance: Horus schedules whole GPUs "
            "(run GPU Feature Discovery with mig.strategy=none on its nodes)"
        )
    for pattern, name in _PATTERNS:
        if pattern.search(text):
            return name
    raise UnknownGpuError(
        f"unknown GPU {product!r}: not in the GPU table (horus_operator/prediction/data/gpus.csv); "
        f"known: {', '.join(GPU_TYPES)}"
    )


def gpu_spec(product: str) -> GpuSpec:
    """The datasheet row of a short name or GPU Feature Discovery product label."""
    return GPU_SPECS[normalize_gpu(product)]
