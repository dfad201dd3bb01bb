"""`exclusive`: what Kubernetes does by default — one job per GPU, first come first served.

Jobs are taken in the caller's queue order; a job that does not fit is skipped and later ones may start
(kube-scheduler retries unschedulable pods without blocking the queue). GPUs are chosen best fit: the
node with the fewest empty GPUs that still holds the job, which keeps whole nodes for multi-GPU jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.placement.base import Limits, PlacementCall, summarise_reasons
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, Settled
from horus_operator.prediction.api import Predictor


class ExclusivePolicy:
    name = "exclusive"

    def __init__(self, predictor: Predictor, limits: Limits | None = None) -> None:
        self.predictions = CachedPredictions(predictor)
        self.limits = limits or Limits()

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        """Jobs in queue order, each on empty GPUs, read as far as the calls after this one would read
        (`settling_prefix`): a placement only takes empty GPUs, so those calls would place nothing
        (`Settled`)."""
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            for request in call.settling_prefix(queue):
                if call.index.empty_count() == 0:
                    break
                slots = call.whole_gpus(request)
                if slots is not None:
                    call.place(request, slots, "whole GPU, first come first served")
            return Settled(call.assignments)

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            if call.whole_gpus(request) is not None:
                return "waiting: a GPU fits; earlier jobs in the queue go first"
            reasons = (
                "GPUs in use (exclusive: one job per GPU)"
                if slot.tenants
                else call.room(request, slot) or f"fewer than {request.gpus} free GPUs on one node"
                for slot in call.index.slots.values()
                if slot.usable
            )
            return summarise_reasons(reasons, call.unusable())
