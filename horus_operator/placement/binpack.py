"""`binpack`: interference-blind packing by GPU memory, as gpushare- and HAMi-style binpack schedulers do.

Jobs are taken in the caller's queue order (skipping those that do not fit). A job goes to the shared GPU
it leaves with the least free memory (most-allocated first), else to an empty GPU (best fit). Predicted
memory is the only thing it looks at: it never asks how much co-tenants slow each other down. It keeps
the same co-location limit and memory margin as `horus` (`Limits`), and honours maxSlowdown 1.0 as a
request for a whole GPU, as a user of those schedulers would ask for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from horus_operator.placement.base import (
    Limits,
    PlacedCluster,
    PlacementCall,
    RequestKinds,
    summarise_reasons,
)
from horus_operator.placement.index import GpuSlot, wants_whole_gpus
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.prediction.api import Predictor, Workload


class BinpackPolicy:
    name = "binpack"

    def __init__(self, predictor: Predictor, limits: Limits | None = None) -> None:
        self.predictions = CachedPredictions(predictor)
        self.limits = limits or Limits()
        self._alike = RequestKinds(_alike)
        # What the last call searched in vain after its last placement: the call that follows it on that
        # cluster need not search those kinds of jobs again.
        self._searched: _Searched | None = None

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        previous, self._searched = self._searched, None
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            # Jobs alike fit the same GPUs: once one fits nowhere, skip its likes until a placement.
            fits_nowhere: set[int] = set()
            # (kind, share scope) of the jobs searched in vain since the last placement, and those the
            # previous call left on this very cluster (each fits nowhere here).
            in_vain: set[tuple[int, str]] = set()
            known = previous.in_vain_under(call) if previous is not None else frozenset()
            room, headroom = call.has_room(), call.shared_headroom_mib()
            for request in call.queue_prefix(queue):
                if not room:
                    break
                alike = self._alike(request)
                if alike in fits_nowhere:
                    continue
                if (alike, request.share_scope) in known:  # searched in vain already: as if searched now
                    fits_nowhere.add(alike)
                    continue
                whole = wants_whole_gpus(request)
                # A long queue in a full cluster asks this of every kind of job on every call: the
                # headroom answers most of them without visiting the groups.
                may_share = not whole and call.may_fit_beside(request, headroom)
                shared = self._most_allocated(call, request) if may_share else None
                if shared is not None:
                    call.place(request, [shared], "packed by memory onto a shared GPU")
                else:
                    slots = call.whole_gpus(request)
                    if slots is None:
                        fits_nowhere.add(alike)
                        in_vain.add((alike, request.share_scope))
                        continue
                    call.place(request, slots, "packed by memory onto an empty GPU")
                fits_nowhere.clear()
                in_vain.clear()
                known = frozenset()
                room, headroom = call.has_room(), call.shared_headroom_mib()
            if call.assignments:
                self._searched = _Searched(PlacedCluster(call), frozenset(in_vain))
            assignments = call.assignments
        if self._searched is not None:
            self._searched.cluster.handed_back()
        return assignments

    def _most_allocated(self, call: PlacementCall, request: JobRequest) -> GpuSlot | None:
        best: tuple[float, GpuSlot] | None = None
        for group in call.index.shared_groups(below=self.limits.max_jobs_per_gpu):
            # The rest of a group differs only in telemetry: the first that fits stands for it.
            slot = call.first_with_room(request, group.slots.values())
            if slot is None:
                continue
            free = slot.gpu.memory_mib - call.used_memory_mib(slot)
            if best is None or free < best[0]:
                best = (free, slot)
        return None if best is None else best[1]

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            fits = (
                call.whole_gpus(request) is not None
                if wants_whole_gpus(request)
                else self._most_allocated(call, request) is not None or call.whole_gpus(request) is not None
            )
            if fits:
                return "waiting: a GPU fits; earlier jobs in the queue go first"
            reasons = (
                call.room(request, slot) or f"fewer than {request.gpus} free GPUs on one node"
                for slot in call.index.slots.values()
                if slot.usable
            )
            return summarise_reasons(reasons, call.unusable())


@dataclass(frozen=True)
class _Searched:
    """What a call that placed jobs searched in vain after its last placement: `in_vain`, the (kind,
    share scope) of the jobs that fit nowhere on the cluster it left (`cluster`). Whether a job fits
    depends only on its kind, its share scope and the cluster, so on that cluster the next call knows
    those jobs' answers without searching, and decides as it would have (valid for the next call only)."""

    cluster: PlacedCluster
    in_vain: frozenset[tuple[int, str]]

    def in_vain_under(self, call: PlacementCall) -> frozenset[tuple[int, str]]:
        """What is known to fit nowhere on `call`'s cluster: `in_vain` if it is the one left, else none."""
        return self.in_vain if self.cluster.is_under(call) else frozenset()


def _alike(request: JobRequest) -> tuple[Workload, int, bool]:
    """Jobs with equal answers fit the same GPUs (workloads are equal in model, batch size, features key
    and precision)."""
    return (request.workload, request.gpus, wants_whole_gpus(request))
