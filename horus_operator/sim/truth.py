"""The simulator's ground truth: measured slowdowns (`prediction/measured.py`), the predictor where
measurements end.

- **Pairs missing from the table** fall back to the predictor; the simulator reports the share of
  co-located job-time that measured truth covered (`truth_coverage`).
- **More than two jobs on a GPU**: the table's additive extrapolation (`TruthTable.slowdowns`), covered
  only if every pair is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from horus_operator.prediction.api import Predictor, Workload
from horus_operator.prediction.measured import TruthTable, Unmeasured


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
        try:
            measured = self.table.slowdowns(gpu, [(w.model, w.batch_size) for w in workloads])
        except Unmeasured:
            return TrueSlowdowns(self.fallback.slowdowns(gpu, workloads, memory_mib), measured=False)
        return TrueSlowdowns(measured, measured=True)

    def utilization(self, gpu: str, workload: Workload) -> float | None:
        """The busy fraction `workload` measured alone on `gpu` (the table's `util_*_alone`), if any."""
        return self.table.utilization.get((gpu, workload.model, workload.batch_size))
