"""Memoised predictions for placement: one predictor call per (workload, GPU type) and per co-tenant set.

A policy asks the same questions thousands of times per second ("what does resnet50/64 use on a V100?",
"how much do these two slow each other down?"); the answers depend only on the workloads and the GPU
type, so they are cached for the policy's lifetime. Slowdown queries are cached under the workloads'
sorted order, so (a, b) and (b, a) cost one prediction. A predictor that learns (`api.Basis`) has a
`revision`: cached slowdowns from an older revision are dropped before the next answer. Jobs share a
GPU only where the upper bounds of their memory fit it (`memory_spread`); alone, a job's prediction is
read as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from horus_operator.placement.index import Group, workload_order
from horus_operator.prediction.api import (
    FROM_PRIOR,
    PREDICTED,
    Basis,
    JobPrediction,
    LearningPredictor,
    Predictor,
    Workload,
)
from horus_operator.prediction.memory_spread import sharing_memory_mib

_GroupKey = tuple[str, float, tuple[Workload, ...]]  # GPU type, its memory, the workloads in sorted order
_UNASKED: tuple[float, ...] = (-1.0,)  # `_per_workload`'s cache miss, told apart by identity


class CachedPredictions:
    """Wraps a `Predictor`; answers are identical, repeated questions are free."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        # Asked once: a protocol check costs a lookup per member, and `job` reads the revision each call.
        self._learning = predictor if isinstance(predictor, LearningPredictor) else None
        self._jobs: dict[tuple[Workload, str], JobPrediction] = {}
        self._slowdowns: dict[_GroupKey, tuple[float, ...] | None] = {}
        self._spreads: dict[_GroupKey, tuple[float, ...] | None] = {}
        self._tenants_memory: dict[int, float] = {}  # group token -> MiB (`tenants_memory_mib`)
        self._revision = self._predictor_revision()

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        key = (workload, gpu)
        found = self._jobs.get(key)
        if found is not None and self._predictor_revision() != self._revision:
            self.sync()  # a learning predictor may since have seen jobs of this kind alone
            found = None
        if found is None:
            found = self.predictor.job(workload, gpu)
            self._jobs[key] = found
        return found

    def tenants_memory_mib(self, group: Group) -> float:
        """The predicted GPU memory of the tenants of a shareable GPU group, cached by its token: binpack
        asks it of every group after every placement."""
        self.sync()
        found = self._tenants_memory.get(group.token)
        if found is None:
            product, _, tenants = group.key
            found = self._tenants_memory[group.token] = sum(
                (self.job(workload, product).memory_mib for workload, _ in tenants), 0.0
            )
        return found

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float
    ) -> tuple[float, ...] | None:
        """Per-workload slowdowns in the order given; None when they cannot share a GPU of `memory_mib`
        (the snapshot GPU's capacity, the one placement checks fit against): the predictor says so, or
        the upper bounds of their memory do not fit together (`_sharing`)."""
        answer = self._per_workload(self._slowdowns, self._sharing, 1.0, gpu, workloads, memory_mib)
        return None if answer is None else tuple(max(1.0, slowdown) for slowdown in answer)

    def _sharing(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float
    ) -> tuple[float, ...] | None:
        """The predictor's slowdowns of jobs sharing a GPU, or None where the memory each is given beside
        others (`memory_spread.sharing_memory_mib`: an unproven job's upper bound, a proven one's
        observed peak and a margin) does not fit in `memory_mib` together (issue 45, item 4)."""
        given = sum((sharing_memory_mib(self.job(workload, gpu)) for workload in workloads), 0.0)
        if given > memory_mib:
            return None
        return self.predictor.slowdowns(gpu, workloads, memory_mib)

    def spreads(self, gpu: str, workloads: Sequence[Workload], memory_mib: float) -> tuple[float, ...]:
        """Per workload, the standard deviation of ln(its slowdown) next to the others, as a learning
        predictor knows it (`LearningPredictor.spreads`); 0 from a fixed prior, which states none."""
        if self._learning is None:
            return (0.0,) * len(workloads)
        answer = self._per_workload(self._spreads, self._learning.spreads, 0.0, gpu, workloads, memory_mib)
        return answer if answer is not None else (0.0,) * len(workloads)

    def _per_workload(
        self,
        cache: dict[_GroupKey, tuple[float, ...] | None],
        ask: Callable[[str, Sequence[Workload], float], tuple[float, ...] | None],
        alone: float,
        gpu: str,
        workloads: Sequence[Workload],
        memory_mib: float,
    ) -> tuple[float, ...] | None:
        """`ask`'s per-workload answer about a group sharing a GPU, cached under the workloads' sorted
        order and handed back in the order given; a job alone gets `alone`, unasked."""
        if len(workloads) <= 1:
            return (alone,) * len(workloads)
        self.sync()
        order = sorted(range(len(workloads)), key=lambda i: workload_order(workloads[i]))
        canonical = tuple(workloads[i] for i in order)
        key = (gpu, memory_mib, canonical)
        # One look-up, not `in` then `[]`: a key hashes its workloads again each time (Python code).
        sorted_answer = cache.get(key, _UNASKED)
        if sorted_answer is _UNASKED:
            sorted_answer = cache[key] = ask(gpu, canonical, memory_mib)
        if sorted_answer is None:
            return None
        answer = [0.0] * len(workloads)
        for position, original in enumerate(order):
            answer[original] = sorted_answer[position]
        return tuple(answer)

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        """Per workload, whether its slowdown next to the others is the model's or corrected by
        observations (not cached: asked once per placement)."""
        if self._learning is None:
            return (FROM_PRIOR,) * len(workloads)
        return self._learning.basis(gpu, workloads)

    def utilization_source(self, workload: Workload, gpu: str) -> str:
        """ "observed" where the predictor answers `job` from a busy fraction seen on the cluster, else
        "predicted" (asked once per placement)."""
        if self._learning is None:
            return PREDICTED
        return self._learning.utilization_source(workload, gpu)

    def sync(self) -> int:
        """The predictor's revision, after dropping answers cached from an older one (a learning
        predictor's job answers change too, once it has seen a job's busy fraction). Callers that
        memoise judgements of their own drop them when it changes."""
        revision = self._predictor_revision()
        if revision != self._revision:
            self._slowdowns.clear()
            self._spreads.clear()
            self._jobs.clear()
            self._tenants_memory.clear()
            self._revision = revision
        return revision

    def _predictor_revision(self) -> int:
        return self._learning.revision if self._learning is not None else 0
