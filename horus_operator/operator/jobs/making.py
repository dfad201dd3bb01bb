"""Making a placed DLJob's pod: created once (a deterministic name, 409 = done), or the job told why not.

The pod is built from the placement and what its binding gives it (`binding.Binder.pod_claims`). The API
server may refuse the template itself (400/403/422: the job fails naming the field, `template.refused`),
or the name may belong to a pod the job does not control: one still being deleted is waited for, any
other fails the job after `MAX_NAME_CONFLICTS` tries, never adopted (its GPUs, phase and annotations
are not Horus's). The pods of a DLJob that is gone are stopped (`stop_unowned`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator import metrics
from horus_operator.operator.apierrors import ApiError
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods, template
from horus_operator.operator.jobs.reading import JobReader
from horus_operator.operator.kube import Kube
from horus_operator.operator.messages import placed_message
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.reports import Reporter
from horus_operator.operator.waiting import JobRecords

log = logging.getLogger(__name__)
MAX_NAME_CONFLICTS = 3  # re-decisions (one per resync period) that meet a foreign pod before the job fails


class PodMaker:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        reader: JobReader,
        records: JobRecords,
        reports: Reporter,
        metrics: OperatorMetrics,
    ) -> None:
        self._kube, self._cache, self._reader, self._records = kube, cache, reader, records
        self._reports, self._metrics = reports, metrics

    async def make(self, placement: pods.Placement, binding: str, *, moving: bool, now: datetime) -> None:
        job, assignment = placement.job, placement.assignment
        body = self._cache.jobs.get(job.key)
        if body is None:
            return
        pod = pods.build_pod(placement)
        try:
            stored, created = await self._kube.create_pod(pod)
        except ApiError as error:
            if error.status in (400, 403, 422):  # the template itself is refused: the user must fix it
                self._metrics.refused(metrics.POD_REJECTED)
                self._reader.refuse(job, template.refused(pod, error.reason, error.body))
                return
            raise
        if pods.controlling_dljob(stored["metadata"]) != job.uid:
            self._name_taken(job, stored, now)
            return
        record = self._records[job.key]
        record.name_conflicts, record.place, record.waiting = 0, None, ""
        self._cache.put_pod(stored)
        if created:
            self._metrics.placed(binding)
            reason = "Moved" if moving else "Placed"
            self._reports.post_later(body, kind="Normal", reason=reason, message=placed_message(assignment))

    async def stop_unowned(self, key: str) -> None:
        """Stop the pods of DLJob `key`, which this operator decided and which no longer exists: deleted
        with orphaning (`kubectl delete dljob --cascade=orphan`, which a DLJob-only tenant may do), a pod
        would keep running on its GPUs outside Horus's books, which no longer count them (issue 44,
        round 4). The garbage collector deletes them anyway when the DLJob is deleted the usual way. A
        pod wearing the labels of a DLJob never seen is left alone: not Horus's, it holds no GPU in its
        books, and it may be someone else's (tests/e2e/test_tenancy.py)."""
        for pod in list(self._cache.pods.get(key, {}).values()):
            if pod.holds_gpus:
                log.warning("deleting pod %s/%s: its DLJob %s is gone", pod.namespace, pod.name, key)
                await self._kube.delete_pod(pod.namespace, pod.name)
                self._cache.deleted_pod(key, pod.name)

    def _name_taken(self, job: JobSpec, pod: Mapping[str, Any], now: datetime) -> None:
        """The pod name of the job's attempt belongs to a pod the job does not control."""
        meta = pod["metadata"]
        where = f"pod {meta['namespace']}/{meta['name']}"
        if meta.get("deletionTimestamp"):
            self._records.note_waiting(job.key, f"waiting: {where} of an earlier owner is being deleted", now)
            return
        record = self._records[job.key]
        record.name_conflicts += 1
        if record.name_conflicts < MAX_NAME_CONFLICTS:
            # The same message each time: only the first marks the job, later tries come with the
            # periodic re-decision, so a pod the garbage collector is about to delete has time to go.
            self._records.note_waiting(job.key, f"waiting: {where} exists and is not this DLJob's", now)
            return
        reason = (
            f"{where} exists and is not this DLJob's (another owner, or none); delete it, or submit the "
            "job under another name"
        )
        self._reader.refuse(job, InvalidJob("metadata.name", job.name, reason))
