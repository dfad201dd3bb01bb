"""The pod route's side of the scheduling loop: the managed pods (fed by the watch, listed on each
resync), the gated ones as waiting requests, and their release once the scheduling cycle has placed
them.

Level-triggered like the DLJob route: everything is read back from the pods. A pod is released by one
patch guarded by the resourceVersion its decision read (`release.release_operations`), so it is never
released twice nor to two GPUs, whichever replica decided and whenever one died; a released pod holds
its GPUs in every snapshot (`placed`). Why a pod waits is said by an Event and its `horus.dev/Placed`
condition, each once per change of reason.

A gang's pods (`pod_spec.group`) are queued as one gang, which the scheduling cycle places all or none
(`placement/gangs.py`); the loop releases every member the cycle placed, after the cycle. Releases of
several pods cannot be one write, so a release can be cut short (the operator dies, a pod changed). The
pods say how far it got: the gang's released members hold their GPUs, and its gated ones are queued as
the rest of the gang (`JobRequest.gang_placed`), placed together the next cycle that has room for them.
No member is ever released twice (each release is guarded by its pod's resourceVersion).

A DRA-bound pod (it references the claims the webhook named, `admission.own_claims`) gets its claims
created for the chosen GPUs before its release, owned by the pod. A claim found already made (a restart
between creating it and releasing the pod) is kept where it selects the chosen GPU, and deleted and made
again where the new decision chose another: the pod is gated, so nothing has been allocated for it.

A reserve-bound pod (its containers told no GPU by the variable, `admission.reserved`) waits, like a
DLJob's, for the reservations of the slots the cycle chose to report their GPUs (`binding/reserve.py`,
the placement kept meanwhile), and is released with their UUIDs in the CDI device annotation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from horus_operator.api import keys, pod_spec
from horus_operator.api.dljob import Binding, InvalidJob, JobSpec
from horus_operator.operator import apierrors
from horus_operator.operator.cache import ClusterCache, newer
from horus_operator.operator.dra import claims
from horus_operator.operator.jobs import jobspec, pods, refusals, template
from horus_operator.operator.jobs.jobspec import WorkloadResolver
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.kube import Kube
from horus_operator.operator.messages import placed_message
from horus_operator.operator.podroute import admission, release
from horus_operator.operator.podroute.release import ManagedPod
from horus_operator.placement.types import Assignment, JobRequest
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)
POD = pods.INVOLVED_POD  # the involved object of the route's Events
Verdict = tuple[JobSpec, Workload] | InvalidJob


@dataclasses.dataclass(frozen=True)
class Waiting:
    """A gated pod as the scheduling loop queues it."""

    job: JobSpec
    workload: Workload
    request: JobRequest
    binding: Binding  # as the webhook bound it (`admission.bound_by`)


# A pod admitted reserve-bound while the operator ran `--reservation-device-mode cdi`, gated under one that
# does not: released, its containers (told no GPU) would get none.
UNRESERVABLE = InvalidJob(
    f"spec.containers[*].env[{pods.VISIBLE_DEVICES}]",
    pods.NO_GPU,
    "admitted reserve-bound, its GPUs to be named by a CDI device annotation, but the operator no longer "
    "runs --reservation-device-mode cdi; delete the pod to have it admitted again",
)


class PodRoute:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        resolver: WorkloadResolver,
        namespace: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        reserve_cdi: bool = False,
    ) -> None:
        """`reserve_cdi`: the operator runs `--reservation-device-mode cdi`, the only way a reserve-bound
        pod is told its GPUs (`admission.binding_of`)."""
        self._kube, self._cache, self._resolver = kube, cache, resolver
        self._namespace, self._clock, self._reserve_cdi = namespace, clock, reserve_cdi
        self.pods: dict[str, ManagedPod] = {}  # queue key -> the pod as last seen
        self.dirty: set[str] = set()
        self._watched: dict[str, str] | None = None  # during a resync: key -> version the watch wrote
        self._verdicts: dict[str, Verdict] = {}  # pod uid -> its spec and workload, or why not
        self._resolving: set[str] = set()  # pod uids whose workload is read off the loop
        self._told: dict[str, str] = {}  # queue key -> the last reason posted (Event and condition)
        self._tasks: set[asyncio.Task[None]] = set()
        self._gangs: dict[str, set[str]] = {}  # gang name -> the queue keys of its pods as last seen
        self._stopping: set[str] = set()  # uids of the pods deleted for a placement not Horus's
        self._refused: set[str] = set()  # queue keys of released pods kube-scheduler refuses (as last seen)

    @staticmethod
    def owns(key: str) -> bool:
        return pod_spec.is_request_key(key)

    # The watch and the resync.
    def put(self, body: Mapping[str, Any]) -> None:
        pod = release.read(body)
        if self._watched is not None:
            self._watched[pod.key] = pod.version
        self._leave_gang(self.pods.get(pod.key))
        self.pods[pod.key] = pod
        self._join_gang(pod)
        if _refused_released(pod):
            self._refused.add(pod.key)
        self._mark(pod.key)

    def drop(self, body: Mapping[str, Any]) -> None:
        pod = release.read(body)
        if self._watched is not None:
            self._watched[pod.key] = pod.version
        self._leave_gang(self.pods.pop(pod.key, None))
        self._forget(pod)
        self._mark(pod.key)

    async def resync(self) -> None:
        """The managed pods as listed, except those the watch wrote while the list was in flight (as
        `ClusterCache.replace_all` merges)."""
        self._watched = {}
        try:
            listed = {
                pod.key: pod for pod in map(release.read, await self._kube.list_managed_pods(self._namespace))
            }
            merged = {
                key: pod
                for key, pod in listed.items()
                if key not in self._watched or newer(pod.version, self._watched[key])
            }
            for key in self._watched:
                if key not in merged and key in self.pods:
                    merged[key] = self.pods[key]
        finally:
            self._watched = None
        stale = set(self.pods) | set(merged)
        self.pods, self._gangs = merged, {}
        self._refused = {key for key, pod in merged.items() if _refused_released(pod)}
        for pod in merged.values():
            self._join_gang(pod)
        self._told.clear()
        for key in stale:
            self._mark(key)
        log.info("pod route: %d managed pods, %d gated", len(merged), sum(p.waiting for p in merged.values()))

    def take_dirty(self) -> set[str]:
        taken, self.dirty = self.dirty, set()
        return taken

    def placed(self) -> list[PodView]:
        """The released pods: they hold their GPUs until they end, as a DLJob's pods do."""
        return [pod.view for pod in self.pods.values() if pod.placed]

    # Deciding.
    def waiting(self, key: str) -> Waiting | None:
        """The request to queue for `key`, None when it is not a gated pod Horus can place (yet)."""
        pod = self.pods.get(key)
        if pod is not None and pod.tampered and not pod.view.deleting:
            self._stop(pod)
        if pod is None or not pod.waiting:
            return None
        verdict = self._verdict(pod)
        if verdict is None:
            return None
        if isinstance(verdict, InvalidJob):
            self.refuse(key, verdict)
            return None
        job, workload = verdict
        request = dataclasses.replace(jobspec.request(job, workload, pod.created_at), key=key)
        binding = admission.bound_by(pod.body.get("spec") or {})
        if binding is Binding.RESERVE and not self._reserve_cdi:
            self.refuse(key, UNRESERVABLE)
            return None
        if binding is Binding.DRA:
            request = dataclasses.replace(request, share_scope=pod_spec.own_claims_scope(key))
        if pod.group is not None:
            members = (self.pods[member] for member in self._gangs[pod.group.name])
            placed = sum(member.placed for member in members)
            request = dataclasses.replace(
                request, gang=pod.group.name, gang_size=pod.group.size, gang_placed=placed
            )
        return Waiting(job, workload, request, binding)

    def stop_unschedulable(self, grace: timedelta) -> list[PodView]:
        """Released pods kube-scheduler has left unschedulable on their node for over `grace`: deleted,
        once, saying why, so their GPUs are free again (a released pod holds them in Horus's books until
        it ends: one that never runs, by its own making or its node's, would hold them for ever). Their
        controllers make them again, gated. Their views, for the loop to judge the nodes."""
        now, stopped = self._clock(), []
        for key in list(self._refused):
            pod = self.pods.get(key)
            if pod is None or not _refused_released(pod):
                self._refused.discard(key)
                continue
            since = pod.view.unschedulable_since
            if since is None or now - since <= grace or pod.view.uid in self._stopping:
                continue
            self._stopping.add(pod.view.uid)
            cause = refusals.judge(pod.view.scheduling_message).cause
            message = f"unschedulable on {pod.view.node} for over {int(grace.total_seconds())}s"
            message += f": {cause}; deleted, its GPUs freed" if cause else "; deleted, its GPUs freed"
            log.warning("pod %s/%s %s", pod.namespace, pod.name, message)
            event = self._kube.post_event(
                pod.body, kind="Warning", reason="Replacing", message=message, involved_kind=POD
            )
            self._spawn(event)
            self._spawn(self._kube.delete_pod(pod.namespace, pod.name))
            stopped.append(pod.view)
        return stopped

    def _verdict(self, pod: ManagedPod) -> Verdict | None:
        uid = pod.view.uid
        if uid in self._verdicts:
            return self._verdicts[uid]
        try:
            job = dataclasses.replace(
                admission.check(pod.body), template={"spec": pod.body.get("spec") or {}}
            )
        except InvalidJob as invalid:
            self._verdicts[uid] = invalid
            return invalid
        if job.resolved_off_loop:  # a ConfigMap to read or a graph to count: not on the loop
            if uid not in self._resolving:
                self._resolving.add(uid)
                self._spawn(self._resolve_later(pod, job))
            return None
        self._verdicts[uid] = self._resolved(pod, job, self._resolve(job))
        return self._verdicts[uid]

    def _resolve(self, job: JobSpec) -> Workload | InvalidJob:
        try:
            return self._resolver.workload(job)
        except InvalidJob as invalid:
            return invalid

    async def _resolve_later(self, pod: ManagedPod, job: JobSpec) -> None:
        try:
            workload = await self._kube.call(self._resolve, job)
        finally:
            self._resolving.discard(pod.view.uid)
        self._verdicts[pod.view.uid] = self._resolved(pod, job, workload)
        self._mark(pod.key)

    def _resolved(self, pod: ManagedPod, job: JobSpec, workload: Workload | InvalidJob) -> Verdict:
        if isinstance(workload, InvalidJob):
            return pod_spec.renamed(workload, pod.body["metadata"].get("annotations") or {})
        cpus = template.host_cpus(job.template)  # what the pod may keep busy beside its training loop
        return job, dataclasses.replace(workload, host_cpus=cpus)

    # Releasing.
    async def release(
        self,
        assignment: Assignment,
        request: JobRequest,
        hostname: str,
        uuids: Sequence[str | None],
        cdi_devices: Sequence[str] = (),
    ) -> bool:
        """Release the pod of `assignment` to its GPUs (`uuids`: as its binding tells them; `cdi_devices`:
        the CDI devices of a reserve-bound pod); False when it was not (it changed or went since the
        decision read it: the watch brings it back and the next cycle decides again)."""
        pod = self.pods.get(assignment.job)
        verdict = self._verdicts.get(pod.view.uid) if pod is not None else None
        if pod is None or not pod.waiting or not isinstance(verdict, tuple):
            return False
        job, _ = verdict
        spec = pod.body.get("spec") or {}
        own, binding = admission.own_claims(spec), admission.bound_by(spec)
        if own and not await self._claim(pod, own, uuids):
            return False
        placement = pods.Placement(
            job=job,
            request=request,
            assignment=assignment,
            attempt=0,
            hostname=hostname,
            gpu_uuids=tuple(uuids),
            claims=own,
            cdi_devices=tuple(cdi_devices),
            binding=binding,
        )
        annotations = pods.placement_annotations(placement)
        if binding is Binding.ENV:  # what the containers read through the downward API
            devices = pods.visible_devices(assignment.gpu_indices, tuple(uuids))
            annotations[keys.ANNOTATION_VISIBLE_DEVICES] = devices
        try:
            # The record's digest first, where the pod's owner cannot write: the release that follows
            # is Horus's by it (`release.tampered`).
            condition = release.released_condition(annotations, self._clock())
            noted = release.read(
                await self._kube.guard_pod_condition(pod.namespace, pod.name, condition, pod.version)
            )
            operations = release.release_operations(noted, annotations, hostname)
            stored = await self._kube.json_patch_pod(pod.namespace, pod.name, operations)
        except (apierrors.Conflict, apierrors.Rejected) as error:
            log.info(
                "pod %s/%s changed before its release (%s); deciding again", pod.namespace, pod.name, error
            )
            self._mark(pod.key)
            return False
        except apierrors.NotFound:
            return False
        self.put(stored)
        message = placed_message(assignment)
        self._tell(pod, "Normal", "Placed", message, placed=True)
        log.info("pod %s/%s released: %s", pod.namespace, pod.name, message)
        return True

    async def _claim(self, pod: ManagedPod, names: Sequence[str], uuids: Sequence[str | None]) -> bool:
        """The pod's claims, each selecting its GPU of the placement, created or kept; False while one
        is not so yet (the pod is decided again)."""
        for position, (name, uuid) in enumerate(zip(names, uuids, strict=True)):
            if not await self._claim_one(pod, position, name, uuid or ""):
                return False
        return True

    async def _claim_one(self, pod: ManagedPod, position: int, name: str, uuid: str) -> bool:
        stored = self._cache.claims.get((pod.namespace, name))
        if stored is not None and stored.owner_uid != pod.view.uid:
            field = f"spec.resourceClaims[{position}].resourceClaimName"
            reason = "a ResourceClaim of that name exists and is not this pod's; delete it or the pod"
            self.refuse(pod.key, InvalidJob(field, name, reason))
            return False
        if stored is not None and stored.selects(uuid) and not stored.deleting:
            return True
        body = claims.pod_claim_body(pod.namespace, name, uuid, pod.name, pod.view.uid)
        if stored is not None:  # made for another GPU by an earlier decision; its spec is immutable
            log.info("pod %s/%s: claim %s selects another GPU; made again", pod.namespace, pod.name, name)
            await self._kube.delete_claim(pod.namespace, name)
            self._cache.drop_claim(body)
        created = await self._kube.create_claim(body)
        if created is None:  # there, and not seen yet (or still going): decided again once it is seen
            self._mark(pod.key)
            return False
        self._cache.put_claim(created)
        return True

    # Telling why.
    def refuse(self, key: str, invalid: InvalidJob) -> None:
        """A gated pod Horus cannot run (found after admission: a ConfigMap missing, no node large
        enough): it stays gated; its owner deletes or replaces it."""
        pod = self.pods.get(key)
        if pod is not None:
            annotations = pod.body["metadata"].get("annotations") or {}
            message = str(pod_spec.renamed(invalid, annotations))
            if self._told.get(key) != message:
                log.info("pod %s/%s cannot be placed: %s", pod.namespace, pod.name, message)
            self._tell(pod, "Warning", "InvalidSpec", message)

    def _stop(self, pod: ManagedPod) -> None:
        """Delete a pod whose placement is not Horus's (`release.tampered`), once, saying why: it holds
        no GPU in Horus's books, and may use GPUs given to others. Its controller makes it again, gated."""
        if pod.view.uid in self._stopping:
            return
        self._stopping.add(pod.view.uid)
        message = f"stopped: {pod.tampered}"
        log.warning("pod %s/%s %s", pod.namespace, pod.name, message)
        self._spawn(
            self._kube.post_event(
                pod.body, kind="Warning", reason="Tampered", message=message, involved_kind=POD
            )
        )
        self._spawn(self._kube.delete_pod(pod.namespace, pod.name))

    def explain(self, key: str, message: str) -> None:
        pod = self.pods.get(key)
        if pod is not None and pod.waiting:
            self._tell(pod, "Normal", "Waiting", message)

    def _tell(self, pod: ManagedPod, kind: str, reason: str, message: str, *, placed: bool = False) -> None:
        if self._told.get(pod.key) == message:
            return
        self._told[pod.key] = message
        condition = {
            "type": keys.CONDITION_PLACED,
            "status": "True" if placed else "False",
            "reason": reason,
            "message": message[:1024],
            "lastTransitionTime": self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        self._spawn(
            self._kube.post_event(pod.body, kind=kind, reason=reason, message=message, involved_kind=POD)
        )
        self._spawn(self._kube.set_pod_condition(pod.namespace, pod.name, condition))

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _mark(self, key: str) -> None:
        self.dirty.add(key)
        self._cache.wake.set()

    def _join_gang(self, pod: ManagedPod) -> None:
        """Note `pod` in its gang; its fellows are queued again (how many of them are placed changed)."""
        if pod.group is not None:
            members = self._gangs.setdefault(pod.group.name, set())
            members.add(pod.key)
            self.dirty |= members

    def _leave_gang(self, pod: ManagedPod | None) -> None:
        if pod is None or pod.group is None:
            return
        members = self._gangs.get(pod.group.name, set())
        members.discard(pod.key)
        self.dirty |= members
        if not members:
            self._gangs.pop(pod.group.name, None)

    def _forget(self, pod: ManagedPod) -> None:
        self._told.pop(pod.key, None)
        self._verdicts.pop(pod.view.uid, None)
        self._stopping.discard(pod.view.uid)


def _refused_released(pod: ManagedPod) -> bool:
    return (
        pod.placed
        and not pod.view.deleting
        and not pod.view.bound_node
        and pod.view.unschedulable_since is not None
    )
