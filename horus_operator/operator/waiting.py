"""What the loop holds for each DLJob between decisions, and how it tells a waiting job why it waits.

A waiting job's reason goes into its status message (and an Event when it changes); its place in the
queue (`status.queue`) is recorded for the head of the queue only, at most once per resync period, so
positions cost no status write per job per cycle. A pod of the pod route is told through the route (an
Event and the pod's condition) instead.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.operator.reports import Reporter
from horus_operator.placement.queueorder import Ordering
from horus_operator.placement.types import JobRequest
from horus_operator.placement.waitqueue import WaitQueue


@dataclass(slots=True)
class JobRecord:
    """What the loop has told or learnt of one DLJob between decisions; forgotten with the job."""

    waiting: str = ""  # why it still waits (its status message; an Event when it changes)
    explained_at: datetime | None = None  # its last wait explanation: one per resync period at most
    place: dict[str, Any] | None = None  # its status.queue, while it waits
    unsatisfiable: InvalidJob | None = None  # no node of this cluster could ever take it
    name_conflicts: int = 0  # tries that met a foreign pod of its pod's name


class JobRecords:
    def __init__(
        self, *, cache: ClusterCache, reports: Reporter, podroute: PodRoute | None, resync_every: float
    ) -> None:
        self._cache, self._reports, self._podroute = cache, reports, podroute
        self._resync_every = resync_every
        self._records: dict[str, JobRecord] = {}  # job key -> what the loop holds for it

    def __getitem__(self, key: str) -> JobRecord:
        return self._records.setdefault(key, JobRecord())

    def get(self, key: str) -> JobRecord | None:
        return self._records.get(key)

    def forget(self, key: str) -> None:
        self._records.pop(key, None)

    def explanation_due(self, request: JobRequest, now: datetime) -> bool:
        """At most one explanation per job per resync period: an explanation scans every GPU."""
        last = self[request.key].explained_at
        return last is None or (now - last).total_seconds() >= self._resync_every

    def note_waiting(self, key: str, message: str, now: datetime) -> None:
        """Say why a job still waits: in its status message, and an Event when the reason changed."""
        if self._podroute is not None and self._podroute.owns(key):
            self._podroute.explain(key, message)  # an Event and the pod's condition
            return
        body = self._cache.jobs.get(key)
        if body is None:  # deleted meanwhile: its record is gone, and stays gone
            return
        record = self[key]
        record.explained_at = now
        if record.waiting == message:
            return
        record.waiting = message
        self._cache.mark([key])
        self._reports.post_later(body, kind="Normal", reason="Waiting", message=message)

    def note_places(
        self, queue: WaitQueue, told: Collection[str], ordering: Ordering, *, skip: Collection[str]
    ) -> None:
        """The queue place (status.queue) of the waiting jobs just told why they wait: the head of the
        queue, each at most once per resync period (`explanation_due`)."""
        left, position, waiting = set(told), 0, len(queue) - len(skip)
        for request in queue:
            if not left:
                return
            if request.key in skip:
                continue
            position += 1
            if request.key in left:
                left.discard(request.key)
                self[request.key].place = {
                    "position": position,
                    "waiting": waiting,
                    "order": str(ordering.order),
                    "reason": ordering.reason(request, queue.standing(request.key)),
                }
