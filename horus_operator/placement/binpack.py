"""`binpack`: interference-blind packing by GPU memory, as gpushare- and HAMi-style binpack schedulers do.

Jobs are taken in the caller's queue order (skipping those that do not fit). A job goes to the shared GPU
it leaves with the least free memory (most-allocated first), else to an empty GPU (best fit). Predicted
memory is the only thing it looks at: it never asks how much co-tenants slow each other down. It keeps
the same co-location limit and memory margin as `horus` (`Limits`), and honours maxSlowdown 1.0 as a
request for a whole GPU, as a user of those schedulers would ask for one.
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.placement.base import (
    Limits,
    PlacementCall,
    RequestKinds,
    stated_share_left,
    summarise_reasons,
)
from horus_operator.placement.index import GpuSlot, wants_whole_gpus
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, Settled
from horus_operator.prediction.api import Predictor, Workload


class BinpackPolicy:
    name = "binpack"

    def __init__(self, predictor: Predictor, limits: Limits | None = None) -> None:
        self.predictions = CachedPredictions(predictor)
        self.limits = limits or Limits()
        self._alike = RequestKinds(_alike)

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        """Jobs in queue order, each where it packs, read as far as the calls after this one would read
        (`settling_prefix`). A placement only takes room, so a job that fit nowhere still fits nowhere
        once later ones are placed: those calls would place nothing, and the answer says so
        (`Settled`)."""
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            # Jobs alike fit the same GPUs: once one fits nowhere, skip its likes.
            fits_nowhere: set[int] = set()
            room, headroom = call.has_room(), call.shared_headroom_mib()
            for request in call.settling_prefix(queue):
                if not room:  # read, then passed over, as the calls after this one would
                    break
                alike = self._alike.of(request)
                if alike in fits_nowhere:
                    continue
                whole = wants_whole_gpus(request)
                # A long queue in a full cluster asks this of every kind of job on every call: the
                # headroom answers most of them without visiting the groups.
                # A stated share asks no memory prediction (`PlacementCall.room`).
                may_share = not whole and (request.gpu_milli > 0 or call.may_fit_beside(request, headroom))
                shared = self._most_allocated(call, request) if may_share else None
                if shared is not None:
                    call.place(request, [shared], "packed by memory onto a shared GPU")
                else:
                    slots = call.whole_gpus(request)
                    if slots is None:
                        fits_nowhere.add(alike)
                        continue
                    call.place(request, slots, "packed by memory onto an empty GPU")
                room, headroom = call.has_room(), call.shared_headroom_mib()
            return Settled(call.assignments)

    def _most_allocated(self, call: PlacementCall, request: JobRequest) -> GpuSlot | None:
        best: tuple[float, GpuSlot] | None = None
        for group in call.index.shared_groups(below=self.limits.max_jobs_per_gpu):
            # The rest of a group differs only in telemetry: the first that fits stands for it.
            slot = call.first_with_room(request, group.slots.values())
            if slot is None:
                continue
            # Packed by what the job states where it states a share, else by predicted memory.
            free = (
                float(stated_share_left(slot))
                if request.gpu_milli
                else slot.gpu.memory_mib - call.used_memory_mib(slot)
            )
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


def _alike(request: JobRequest) -> tuple[Workload, int, bool, frozenset[str], int]:
    """Jobs with equal answers fit the same GPUs (workloads are equal in model, batch size, features key
    and precision)."""
    return (request.workload, request.gpus, wants_whole_gpus(request), request.avoid_nodes, request.gpu_milli)
