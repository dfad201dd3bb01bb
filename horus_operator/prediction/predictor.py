"""The Predictor the operator, the placement policies and the simulator call.

Everything is cached by (GPU type, workload key): a job's design row, its utilization (the busy
fraction of `roofline.estimate` on that GPU's datasheet figures, or the observed one its workload
carries, `Workload.busy`) and memory, and each ordered pair's slowdown (and the physical prior's
alone, `prior_slowdowns`). Pairs not yet cached are predicted in one batched XGBoost call, so the
amortised cost of a placement query is a few dictionary look-ups. The slowdown rows end with the
neighbour columns the shipped measurements give the pair (by GPU type, catalog model name and batch
size), when the slowdown model was trained with them.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from horus_operator.prediction import artifacts, design, features, memory_spread, roofline, slowdown
from horus_operator.prediction.api import JobPrediction, UnknownModelError, Workload
from horus_operator.prediction.gpus import GPU_SPECS, check_precision, normalize_gpu

FeatureSource = Callable[[str, int], Mapping[str, float]]
# model, batch size, features key, precision, framework, host CPUs, observed busy fraction (None: the
# roofline's), observed peak memory (None: predicted), observed process floor (None: the table's)
WorkloadKey = tuple[str, int, str, str, str, float, float | None, float | None, float | None]


def _catalog_lookup(model: str, batch_size: int) -> Mapping[str, float]:
    from horus_operator.prediction import catalog  # the catalog's data file loads on first use

    return catalog.lookup(model, batch_size)


@dataclass(frozen=True)
class PairPrediction:
    slowdown_a: float
    slowdown_b: float
    feasible: bool


@dataclass
class _JobEntry:
    row: dict[str, float]  # design.job_row
    prediction: JobPrediction
    demand: tuple[float, float]  # busy fraction and host CPUs alone: what the slowdown prior reads


class XGBoostPredictor:
    """Implements prediction.api.Predictor with the trained artifacts."""

    def __init__(self, models: artifacts.Artifacts, feature_source: FeatureSource = _catalog_lookup) -> None:
        self.models = models
        self._feature_source = feature_source
        self._jobs: dict[tuple[str, WorkloadKey], _JobEntry] = {}
        self._pairs: dict[tuple[str, WorkloadKey, WorkloadKey], float] = {}
        self._prior_pairs: dict[tuple[str, WorkloadKey, WorkloadKey], float] = {}  # the prior's alone

    # ---- Predictor protocol ----

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return self._job(workload, normalize_gpu(gpu)).prediction

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        gpu = normalize_gpu(gpu)
        entries = [self._job(workload, gpu) for workload in workloads]
        if len(workloads) < 2:
            return tuple(1.0 for _ in workloads)  # a GPU of its own is always allowed
        capacity = GPU_SPECS[gpu].memory_mib if memory_mib is None else memory_mib
        if sum(entry.prediction.memory_mib for entry in entries) > capacity:
            return None
        return self._combined(gpu, workloads, entries, self._pairs)

    def prior_slowdowns(self, gpu: str, workloads: Sequence[Workload]) -> tuple[float, ...]:
        """The time-sharing prior's answer alone (`slowdown.SlowdownPrior`, no trees), each ordered pair
        from both jobs' demands and a set's pairwise excesses added as `slowdowns` adds them."""
        gpu = normalize_gpu(gpu)
        return self._combined(
            gpu, workloads, [self._job(workload, gpu) for workload in workloads], self._prior_pairs
        )

    # ---- batch interface (CLI, simulator warm-up) ----

    def pairs(self, requests: Sequence[tuple[str, Workload, Workload]]) -> list[PairPrediction]:
        """Slowdowns of both jobs and feasibility for each (gpu, a, b), predicted in one batch."""
        resolved = [(normalize_gpu(gpu), a, b) for gpu, a, b in requests]
        by_gpu: dict[str, list[tuple[tuple[WorkloadKey, _JobEntry], tuple[WorkloadKey, _JobEntry]]]] = {}
        for gpu, a, b in resolved:
            entry_a, entry_b = (_key(a), self._job(a, gpu)), (_key(b), self._job(b, gpu))
            by_gpu.setdefault(gpu, []).extend([(entry_a, entry_b), (entry_b, entry_a)])
        for gpu, ordered in by_gpu.items():
            self._fill_pairs(gpu, ordered)
        results = []
        for gpu, a, b in resolved:
            memory = self._job(a, gpu).prediction.memory_mib + self._job(b, gpu).prediction.memory_mib
            results.append(
                PairPrediction(
                    slowdown_a=self._pairs[(gpu, _key(a), _key(b))],
                    slowdown_b=self._pairs[(gpu, _key(b), _key(a))],
                    feasible=memory <= GPU_SPECS[gpu].memory_mib,
                )
            )
        return results

    # ---- internals ----

    def _job(self, workload: Workload, gpu: str) -> _JobEntry:
        cache_key = (gpu, _key(workload))
        entry = self._jobs.get(cache_key)
        if entry is None:
            job_features = self._features(workload)
            precision = check_precision(workload.precision)
            row = design.job_row(job_features, gpu, precision)
            step = roofline.estimate(job_features, GPU_SPECS[gpu], precision, self.models.roofline)
            busy = step.busy if workload.busy is None else workload.busy  # observed, where it was
            memory_mib = self.models.memory.memory_mib(
                job_features, precision, gpu, workload.framework, workload.process_floor_mib
            )
            min_memory_mib = self.models.memory.floor_mib(job_features, precision)
            if workload.peak_memory_mib is not None:  # observed: a measured peak wins over the envelope
                memory_mib = workload.peak_memory_mib
                min_memory_mib = min(min_memory_mib, memory_mib)
            prediction = JobPrediction(
                utilization=busy,
                memory_mib=memory_mib,
                min_memory_mib=min_memory_mib,
                step_s=step.step_ms / 1000.0,
                memory_source=memory_spread.source_of(
                    workload.features, observed=workload.peak_memory_mib is not None
                ),
            )
            demand = (busy, workload.host_cpus)
            entry = self._jobs[cache_key] = _JobEntry(row=row, prediction=prediction, demand=demand)
        return entry

    def _features(self, workload: Workload) -> Mapping[str, float]:
        if workload.features is None:
            return self._feature_source(workload.model, workload.batch_size)
        try:
            # Custom features may come at any batch size: rescale from the batch-independent profile.
            return features.at_batch(workload.features, workload.batch_size)
        except ValueError as error:
            raise UnknownModelError(f"workload {workload.model!r}: {error}") from error

    def _combined(
        self,
        gpu: str,
        workloads: Sequence[Workload],
        entries: Sequence[_JobEntry],
        answers: Mapping[tuple[str, WorkloadKey, WorkloadKey], float],
    ) -> tuple[float, ...]:
        """Each workload's slowdown beside the others (`entries`: theirs from `_job`) from `answers`
        (`_pairs` or `_prior_pairs`, both filled for every ordered pair first), pairwise excesses added
        (`slowdown.combine`)."""
        keys = [_key(workload) for workload in workloads]
        self._fill_pairs(gpu, list(itertools.permutations(zip(keys, entries, strict=True), 2)))
        return slowdown.combine([[answers.get((gpu, own, other), 1.0) for other in keys] for own in keys])

    def _fill_pairs(
        self, gpu: str, ordered: Sequence[tuple[tuple[WorkloadKey, _JobEntry], tuple[WorkloadKey, _JobEntry]]]
    ) -> None:
        missing = {
            (own_key, other_key): (own, other)
            for (own_key, own), (other_key, other) in ordered
            if (gpu, own_key, other_key) not in self._pairs
        }
        if not missing:
            return
        law = self.models.slowdown_prior
        demands = [slowdown.SlowdownPrior.inputs(own.demand, other.demand) for own, other in missing.values()]
        pairs = design.pair_matrix([(own.row, other.row) for own, other in missing.values()])
        matrix, prior = slowdown.tree_inputs(pairs, np.array(demands), law)
        if self.models.neighbours is not None:
            queries = [
                (gpu, _measured_as(own_key), _measured_as(other_key)) for own_key, other_key in missing
            ]
            matrix = np.hstack([matrix, self.models.neighbours.matrix(queries)])
        residual = self.models.slowdown.predict(matrix)
        predicted = slowdown.from_raw(slowdown.blended(residual, matrix, prior, law))
        for (own_key, other_key), value, alone in zip(missing, predicted, np.exp(prior), strict=True):
            self._pairs[(gpu, own_key, other_key)] = float(value)
            self._prior_pairs[(gpu, own_key, other_key)] = float(alone)


def _key(workload: Workload) -> WorkloadKey:
    if workload.features is not None and not workload.features_key:
        # Unkeyed custom features: key by their values so equal graphs share cache entries.
        features_key = repr(sorted(workload.features.items()))
    else:
        features_key = workload.features_key
    return (
        workload.model,
        workload.batch_size,
        features_key,
        workload.precision,
        workload.framework,
        workload.host_cpus,
        workload.busy,
        workload.peak_memory_mib,
        workload.process_floor_mib,
    )


@functools.cache
def _measured_as(key: WorkloadKey) -> tuple[str, int]:
    """The (model, batch size) under which measurements of a workload would be stored: catalog names."""
    from horus_operator.prediction import catalog

    try:
        return catalog.canonical(key[0]), key[1]
    except UnknownModelError:
        return key[0], key[1]


@functools.cache
def _load_cached(directory: str) -> XGBoostPredictor:
    return XGBoostPredictor(artifacts.load(directory or None))


def load_predictor(models_dir: str | Path | None = None) -> XGBoostPredictor:
    """The predictor for the models in `models_dir` (default: the shipped ones); cached per directory."""
    directory = "" if models_dir is None else str(Path(models_dir).resolve())
    return _load_cached(directory)
