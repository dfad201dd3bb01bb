"""The cluster as the scheduling cycle sees it, from the cache: GPU nodes, and who holds which GPUs.

Holders are DLJob pods (read again only for the jobs whose pods changed, on the kept index:
`placement.keeper`), and, read whole for every view since they are few, the pods the pod route released,
the targets held for jobs between pods of a move, the placements kept while their pods wait for their
binding (`nominations.py`), and preempted pods still stopping.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from horus_operator.operator import cluster_view
from horus_operator.operator.binding import Bindings, reservations
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods
from horus_operator.operator.moves.mover import Mover
from horus_operator.operator.moves.preempter import Preempter
from horus_operator.operator.nominations import Nominations
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.placement.keeper import Holders, IndexKeeper
from horus_operator.placement.types import ClusterSnapshot, Node, RunningJob


class ClusterViews:
    def __init__(
        self,
        *,
        cache: ClusterCache,
        bindings: Bindings,
        mover: Mover,
        preempter: Preempter | None,
        podroute: PodRoute | None,
        nominations: Nominations,
        telemetry_ttl: float,
    ) -> None:
        self._cache, self._bindings, self._mover = cache, bindings, mover
        self._preempter, self._podroute, self._telemetry_ttl = preempter, podroute, telemetry_ttl
        self._nominations = nominations
        self._gpu_nodes: tuple[Node, ...] = ()  # the last view's nodes (`gpu_nodes`'s `previous`)
        self._kept = IndexKeeper()  # the cluster's index, by the cache's changes (`view`)

    def snapshot(self, now: datetime, moving: Collection[str]) -> ClusterSnapshot:
        """The cluster as the API server shows it, with the targets of jobs between pods (but those of
        `moving`), the nominated placements and the GPUs of preempted pods still stopping held."""
        stopping = tuple(job for jobs in self._stopping().values() for job in jobs)
        held = stopping + self._nominations.held()
        snapshot = ClusterSnapshot(
            nodes=self.nodes(now),
            running=cluster_view.running_jobs([*self._cache.all_pods(), *self.routed()]) + held,
            now=now.timestamp(),
        )
        return self._mover.reserved(snapshot, but=moving)

    def view(self, now: datetime) -> ClusterSnapshot:
        """The cluster as the API server shows it, with the targets of all jobs between pods held, on
        the kept index: only the jobs whose pods changed since the last view are read again."""
        changed = self._cache.take_holders_changed()
        if changed is None:  # a resync: the cache was replaced
            self._kept.forget()
        nodes = self.nodes(now)
        holders = self._kept.index(
            nodes,
            {key: self._holding(key) for key in changed or ()},
            every=lambda: {key: self._holding(key) for key in self._cache.pods},
            fleeting=self._fleeting_holders(),
        )
        return ClusterSnapshot(nodes=nodes, now=now.timestamp(), index=holders)

    def forget(self) -> None:
        """Build the next view's index afresh (a policy that failed half-way may have left jobs in it)."""
        self._kept.forget()

    def nodes(self, now: datetime) -> tuple[Node, ...]:
        self._gpu_nodes = cluster_view.gpu_nodes(
            self._cache.node_views.values(),
            now=now.timestamp(),
            gpunodes=self._cache.gpunodes.values(),
            telemetry_ttl=self._telemetry_ttl,
            slice_gpus=self._cache.slice_gpus(),
            claimed=self._bindings.taken(),
            claimed_slots=self._bindings.taken_slots(),
            reserved=reservations.reported(self._cache.reservations.values()),
            previous=self._gpu_nodes,
        )
        return self._gpu_nodes

    def routed(self) -> list[pods.PodView]:
        return self._podroute.placed() if self._podroute is not None else []

    def _holding(self, key: str) -> tuple[RunningJob, ...]:
        return cluster_view.running_jobs(self._cache.job_pods(key))

    def _fleeting_holders(self) -> Holders:
        """The holders read whole for every view (few): the pods the pod route released, the targets
        held for jobs between pods, the nominated placements, and preempted pods still stopping."""
        routed = {f"pod-route {pod.namespace}/{pod.name}": pod for pod in self.routed()}
        holders: dict[str, tuple[RunningJob, ...]] = {
            source: cluster_view.running_jobs([pod]) for source, pod in routed.items()
        }
        holders.update((f"move {job.request.key}", (job,)) for job in self._mover.held())
        holders.update((f"nominated {job.request.key}", (job,)) for job in self._nominations.held())
        holders.update((f"preempted {key}", jobs) for key, jobs in self._stopping().items())
        return holders

    def _stopping(self) -> dict[str, tuple[RunningJob, ...]]:
        """The GPUs that preempted pods still being deleted hold, by job key."""
        return self._preempter.held() if self._preempter is not None else {}
