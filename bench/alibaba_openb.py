"""Alibaba's GPU-sharing trace (openb) as FGD's benchmark (issue 46 item 5): allocation ratio at 100 %
requested, Horus's policies beside FGD's six published ones.

Each trace variant FGD's experiments report (`data/traces/alibaba-openb/README.md`) is tuned to 130 % of
the 1,213 GPU nodes' 6,212 GPUs and replayed one pod at a time with no departures, per seed
(`horus_operator/sim/openb.py`); the number is the allocation ratio (GPU thousandths allocated over the
cluster's) where the requested ratio reaches 100 %, the mean over the seeds. FGD's are the means over
its 10 seeds (42..51) of `fgd_analysis_allo_discrete.csv`, column 100. Horus's policies, every pod
stating its share (`JobRequest.gpu_milli`):
- `horus` — pods state their CPU, memory and GPU models, nodes their CPU and memory left
  (`Replay(hosts=True)`): every pod where it adds least to its node's FGD expected fragmentation for
  the kinds of pods seen so far (`placement/nodefrag.py`; a node's GPUs beyond what its CPU and memory
  left feed counted lost), pods asking no GPU included;
- `horus-gpuview` — pods state only their share (CPU, memory and models through `avoid_nodes`): a
  fraction where it adds least to FGD's expected fragmentation of its GPU and its node's empty GPUs
  (`placement/fragmentation.py`, `ShareMix`), then best fit; whole GPUs as any job alone;
- `horus-bestfit` — `horus-gpuview` with `share_fragmentation` off: the GPU left fullest, then the node
  with the fewest empty GPUs;
- `binpack` — the shared GPU left fullest, else empty GPUs best fit, in queue order;
- `exclusive` — every pod on GPUs of its own (Kubernetes' default).

    .venv/bin/python bench/alibaba_openb.py [--seeds N] [--variants default,cpu050,...] \\
        [--policies horus,...] [--out out/bench/alibaba_openb.json]

`--seeds 1` (seed 42 only) is the quick path.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from horus_operator.placement.base import Limits
from horus_operator.placement.binpack import BinpackPolicy
from horus_operator.placement.exclusive import ExclusivePolicy
from horus_operator.placement.horus import HorusPolicy, HorusTunables
from horus_operator.placement.types import Policy
from horus_operator.sim.openb import (
    Replay,
    StatedSharePredictor,
    allocation_at,
    read_nodes,
    read_pods,
    tuned,
)

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "data" / "traces"
VARIANTS_DIR = TRACES / "alibaba-openb"
NODES = TRACES / "alibaba_openb_node_list_gpu_node.csv"
FGD_RESULTS = VARIANTS_DIR / "fgd_analysis_allo_discrete.csv"
FIRST_SEED = 42  # FGD's seeds are 42..51
FGD_POLICIES = ("FGD", "BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random")
VARIANTS = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)
# No pod states under 50 thousandths of a GPU in any variant: at most 20 share one.
LIMITS = Limits(max_jobs_per_gpu=21)


def _policies() -> dict[str, Callable[[], Policy]]:
    predictor = StatedSharePredictor()
    return {
        "horus": lambda: HorusPolicy(predictor, LIMITS),
        "horus-gpuview": lambda: HorusPolicy(predictor, LIMITS),
        "horus-bestfit": lambda: HorusPolicy(predictor, LIMITS, HorusTunables(share_fragmentation=False)),
        "binpack": lambda: BinpackPolicy(predictor, LIMITS),
        "exclusive": lambda: ExclusivePolicy(predictor, LIMITS),
    }


STATING_HOSTS = frozenset({"horus"})  # the policies whose pods state CPU, memory and GPU models


def pod_list(variant: str) -> Path:
    if variant == "default":
        return TRACES / "alibaba_openb_pod_list_default.csv"
    return VARIANTS_DIR / f"openb_pod_list_{variant}.csv"


def fgd_published() -> dict[str, dict[str, float]]:
    """Variant -> FGD's policy -> mean allocation ratio (%) at 100 % requested over its seeds."""
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    with FGD_RESULTS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            variant = row["workload"].removeprefix("openb_pod_list_")
            policy = row["sc_policy"].split("-", 1)[1]
            ratios[(variant, policy)].append(float(row["100"]))
    published: dict[str, dict[str, float]] = defaultdict(dict)
    for (variant, policy), values in ratios.items():
        published[variant][policy] = round(statistics.fmean(values), 1)
    return published


def replay(variant: str, name: str, seed: int) -> float | None:
    run = Replay(read_nodes(NODES), _policies()[name](), name in STATING_HOSTS)
    pods = tuned(read_pods(pod_list(variant)), run.capacity_milli, random.Random(seed))
    return allocation_at(list(run.run(pods)), run.capacity_milli)


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--seeds", type=int, default=10, help="seeds 42.. (FGD ran 10)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--policies", default=",".join(_policies()))
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench" / "alibaba_openb.json")
    args = parser.parse_args()
    policies = args.policies.split(",")
    variants = args.variants.split(",")
    seeds = range(FIRST_SEED, FIRST_SEED + args.seeds)
    published = fgd_published()
    results: dict[str, dict[str, object]] = {}
    print(f"allocation ratio (%) at 100 % requested; Horus: mean of seeds {seeds.start}..{seeds.stop - 1}")
    columns = policies + [f"FGD:{policy}" for policy in FGD_POLICIES]
    print(f"{'variant':<12}" + "".join(f"{name:>18}" for name in columns))
    for variant in variants:
        per_policy: dict[str, object] = {}
        means: list[str] = []
        for name in policies:
            started = time.perf_counter()
            ratios = [replay(variant, name, seed) for seed in seeds]
            found = [ratio for ratio in ratios if ratio is not None]
            mean = round(statistics.fmean(found), 1) if found else None
            per_policy[name] = {
                "per_seed": dict(zip(seeds, ratios, strict=True)),
                "mean": mean,
                "seconds": round(time.perf_counter() - started, 1),
            }
            means.append(f"{mean:>18.1f}" if mean is not None else f"{'-':>18}")
        fgd = published.get(variant, {})
        results[variant] = {"horus_policies": per_policy, "fgd_published": fgd}
        fgd_cells = "".join(f"{fgd[p]:>18.1f}" if p in fgd else f"{'-':>18}" for p in FGD_POLICIES)
        print(f"{variant:<12}" + "".join(means) + fgd_cells, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seeds": list(seeds), "variants": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
