"""Measured co-location pairs: what really happens when two jobs share a GPU, as far as measurements say.

Read from a CSV in the colocation format (`gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,
tput_b_alone,tput_a_shared,tput_b_shared`): the slowdown of a in a pair is `tput_a_alone /
tput_a_shared`; both shared throughputs 0 means the pair cannot share (out of memory, or not measured —
the source does not say which; both are treated as "cannot share"). Isolated throughputs come from the
`tput_*_alone` columns. Optional columns `util_a_alone,util_b_alone` (0–1, blank where unknown) give each
job's measured GPU busy fraction alone: what a node agent would observe of it running alone
(`utilization`).

Two shells read it as ground truth: the simulator (`sim/truth.py`, jobs progress by it) and the fake
NVML backend (`agent/fake.py --truth`, which reports it instead of echoing predictions). Both ask
`slowdowns`, so they agree on every set of co-tenants:

- **More than two jobs on a GPU** (only if a policy is configured to allow it; all defaults cap at 2):
  the table is pairwise, so truth is extrapolated additively, job i's slowdown = 1 + sum over co-tenants
  j of (s_ij - 1), where s_ij is i's measured slowdown next to j alone. Additive excess is an
  assumption, not a measurement.
- **A pair missing from the table** raises `Unmeasured`: each reader decides what stands in for it.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ConfigKey = tuple[str, str, int]  # (gpu, model, batch size)


# Gavel's measured pairs (docs/evaluation.md), in the repository's data/ (not in the wheel), and the CPU
# cores their jobs kept busy beside the training loop, read from Gavel's command lines.
GAVEL_PAIRS = Path(__file__).resolve().parents[2] / "data" / "colocation" / "gavel_pairs_train.csv"
GAVEL_HOST_CPUS = GAVEL_PAIRS.with_name("gavel_host_cpus.csv")


def gavel_truth() -> TruthTable:
    """Gavel's pairs with their jobs' host CPUs: the truth `horus simulate` and the benches replay by
    default (without the CPUs, the prior would not see the A3C jobs' emulators their pairs measured)."""
    return TruthTable.from_csv(GAVEL_PAIRS, read_host_cpus(GAVEL_HOST_CPUS))


def read_host_cpus(path: str | Path) -> dict[str, float]:
    """`model,host_cpus[,source]` rows (data/colocation/gavel_host_cpus.csv): model name -> CPU cores
    its measured jobs kept busy beside the training loop (data-loader workers, emulator processes)."""
    with open(path, newline="") as handle:
        return {row["model"]: float(row["host_cpus"]) for row in csv.DictReader(handle)}


class Unmeasured(LookupError):
    """A pair of configurations the table has no measurement for."""


@dataclass(frozen=True)
class TruthTable:
    isolated: dict[ConfigKey, float]  # steps/s alone
    pairs: dict[tuple[ConfigKey, ConfigKey], tuple[float, float] | None]  # both orders; None: cannot share
    # model -> CPU cores its measured jobs kept busy beside the training loop (`read_host_cpus`): what
    # those jobs' pods would declare, so a simulated job of that model carries it (Workload.host_cpus).
    host_cpus: dict[str, float] = field(default_factory=dict)
    utilization: dict[ConfigKey, float] = field(default_factory=dict)  # busy fraction alone, where measured

    @classmethod
    def from_csv(cls, path: str | Path, host_cpus: dict[str, float] | None = None) -> TruthTable:
        isolated: dict[ConfigKey, float] = {}
        pairs: dict[tuple[ConfigKey, ConfigKey], tuple[float, float] | None] = {}
        utilization: dict[ConfigKey, float] = {}
        with open(path, newline="") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                a = (row["gpu"], row["model_a"], int(row["batch_a"]))
                b = (row["gpu"], row["model_b"], int(row["batch_b"]))
                for config, column in ((a, "util_a_alone"), (b, "util_b_alone")):
                    busy = _busy_fraction(row.get(column), f"{path}:{line} {column}")
                    if busy is not None:
                        utilization[config] = busy
                alone_a, alone_b = float(row["tput_a_alone"]), float(row["tput_b_alone"])
                shared_a, shared_b = float(row["tput_a_shared"]), float(row["tput_b_shared"])
                isolated[a], isolated[b] = alone_a, alone_b
                if shared_a <= 0 or shared_b <= 0:
                    pairs[(a, b)] = pairs[(b, a)] = None
                else:
                    slowdown_a, slowdown_b = max(1.0, alone_a / shared_a), max(1.0, alone_b / shared_b)
                    pairs[(a, b)], pairs[(b, a)] = (slowdown_a, slowdown_b), (slowdown_b, slowdown_a)
        return cls(isolated=isolated, pairs=pairs, host_cpus=dict(host_cpus or {}), utilization=utilization)

    def configs(self, gpu: str) -> list[tuple[str, int]]:
        """(model, batch) measured alone on `gpu`, in a stable order."""
        return sorted((model, batch) for g, model, batch in self.isolated if g == gpu)

    def slowdowns(self, gpu: str, configs: Sequence[tuple[str, int]]) -> tuple[float, ...] | None:
        """Measured slowdown of each (model, batch) when all of them share one `gpu`; None when some
        pair cannot share. `Unmeasured` when some pair is not in the table."""
        keys = [(gpu, model, batch) for model, batch in configs]
        excess = [0.0] * len(keys)
        for i, a in enumerate(keys):
            for j, b in enumerate(keys):
                if i == j:
                    continue
                if (a, b) not in self.pairs:
                    raise Unmeasured(f"{a} next to {b}")
                pair = self.pairs[(a, b)]
                if pair is None:
                    return None
                excess[i] += pair[0] - 1.0
        return tuple(1.0 + e for e in excess)


def _busy_fraction(cell: str | None, where: str) -> float | None:
    """A `util_*_alone` cell: None where absent or blank; `ValueError` outside 0–1."""
    if cell is None or not cell.strip():
        return None
    value = float(cell)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{where}: {cell!r} is not a busy fraction (0-1)")
    return value
