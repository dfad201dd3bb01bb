"""What really happens when jobs share a GPU, as far as measurements say: the simulator's ground truth.

Read from a CSV in the colocation format (`gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,
tput_b_alone,tput_a_shared,tput_b_shared`): the slowdown of a in a pair is `tput_a_alone /
tput_a_shared`; both shared throughputs 0 means the pair cannot share (out of memory, or not measured —
the source does not say which; both are treated as "cannot share"). Isolated throughputs come from the
`tput_*_alone` columns.

- **Pairs missing from the table** fall back to the predictor; the simulator reports the share of
  co-located job-time that measured truth covered (`truth_coverage`).
- **More than two jobs on a GPU** (only if a policy is configured to allow it; all defaults cap at 2):
  the table is pairwise, so truth is extrapolated additively, job i's slowdown = 1 + sum over co-tenants
  j of (s_ij - 1), where s_ij is i's measured slowdown next to j alone. It is covered only if every pair
  is. Additive excess is an assumption, not a measurement.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from horus_operator.prediction.api import Predictor, Workload

ConfigKey = tuple[str, str, int]  # (gpu, model, batch size)


@dataclass(frozen=True)
class TruthTable:
    isolated: dict[ConfigKey, float]  # steps/s alone
    pairs: dict[tuple[ConfigKey, ConfigKey], tuple[float, float] | None]  # both orders; None: cannot share

    @classmethod
    def from_csv(cls, path: str | Path) -> TruthTable:
        isolated: dict[ConfigKey, float] = {}
        pairs: dict[tuple[ConfigKey, ConfigKey], tuple[float, float] | None] = {}
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle):
                a = (row["gpu"], row["model_a"], int(row["batch_a"]))
                b = (row["gpu"], row["model_b"], int(row["batch_b"]))
                alone_a, alone_b = float(row["tput_a_alone"]), float(row["tput_b_alone"])
                shared_a, shared_b = float(row["tput_a_shared"]), float(row["tput_b_shared"])
                isolated[a], isolated[b] = alone_a, alone_b
                if shared_a <= 0 or shared_b <= 0:
                    pairs[(a, b)] = pairs[(b, a)] = None
                else:
                    slowdown_a, slowdown_b = max(1.0, alone_a / shared_a), max(1.0, alone_b / shared_b)
                    pairs[(a, b)], pairs[(b, a)] = (slowdown_a, slowdown_b), (slowdown_b, slowdown_a)
        return cls(isolated=isolated, pairs=pairs)

    def configs(self, gpu: str) -> list[tuple[str, int]]:
        """(model, batch) measured alone on `gpu`, in a stable order."""
        return sorted((model, batch) for g, model, batch in self.isolated if g == gpu)


@dataclass(frozen=True)
class TrueSlowdowns:
    slowdowns: tuple[float, ...] | None  # None: the jobs cannot share the GPU
    measured: bool  # every pair involved came from the table


class Truth:
    """Answers "how slow does each of these jobs really run together?" for the simulator."""

    def __init__(self, table: TruthTable, fallback: Predictor) -> None:
        self.table = table
        self.fallback = fallback
        self._memo: dict[tuple[str, float | None, tuple[Workload, ...]], TrueSlowdowns] = {}

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> TrueSlowdowns:
        """`memory_mib`: the GPU's capacity, for pairs the table lacks (see `Predictor.slowdowns`)."""
        if len(workloads) <= 1:
            return TrueSlowdowns((1.0,) * len(workloads), measured=True)
        key = (gpu, memory_mib, tuple(workloads))
        found = self._memo.get(key)
        if found is None:
            found = self._measure(gpu, workloads, memory_mib)
            self._memo[key] = found
        return found

    def _measure(self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None) -> TrueSlowdowns:
        configs = [(gpu, w.model, w.batch_size) for w in workloads]
        excess = [0.0] * len(workloads)
        for i, a in enumerate(configs):
            for j, b in enumerate(configs):
                if i == j:
                    continue
                if (a, b) not in self.table.pairs:
                    return TrueSlowdowns(self.fallback.slowdowns(gpu, workloads, memory_mib), measured=False)
                pair = self.table.pairs[(a, b)]
                if pair is None:
                    return TrueSlowdowns(None, measured=True)
                excess[i] += pair[0] - 1.0
        return TrueSlowdowns(tuple(1.0 + e for e in excess), measured=True)
