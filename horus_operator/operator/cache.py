"""In-memory view of DLJobs, Horus pods and nodes, the names of PersistentVolumeClaims (and, where DRA is
served, ResourceClaims and ResourceSlices), fed by kopf watch events (and a full list on start).

The API server stays the truth: the cache only saves re-listing on every decision. Each change marks the
affected jobs dirty and wakes the scheduling loop.

A full list (a resync) runs while the watches keep delivering, and its answer can be older than an event
delivered while it was in flight (a node cordoned, a pod deleted). While `resyncing` (from before the
lists are requested until `replace_all` has taken them) the cache therefore notes the resourceVersion of
every object the watches write or delete, and the listing does not undo those writes unless its copy is
provably newer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from horus_operator.api import keys
from horus_operator.api.dljob import Binding
from horus_operator.operator import cluster_view, compact
from horus_operator.operator.binding import reservations
from horus_operator.operator.binding.reservations import ReservationView
from horus_operator.operator.cluster_view import NodesSummary, NodeView
from horus_operator.operator.dra import claims as claim_views
from horus_operator.operator.dra import slices
from horus_operator.operator.dra.claims import ClaimId, ClaimView, Device
from horus_operator.operator.dra.slices import SliceGpu
from horus_operator.operator.jobs import pods as pod_views
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.telemetry import gpunodes
from horus_operator.operator.telemetry.gpunodes import NodeTelemetry

T = TypeVar("T")

# The periodic re-decision of every job (its timers: stuck pods, NotReady nodes) goes in this many slices
# of the period, each job in the same slice every time: at 10,000 jobs one slice at once held the event
# loop for 1-2 s, during which no new DLJob was placed (bench/scale.py, docs/benchmarks.md).
REDECIDE_SLICES = 10
# How long the uid of an object the watch saw deleted is remembered (`_Tombstones`): far longer than an
# answer to the operator's own request can lag behind the watch.
TOMBSTONE_S = 300.0


def job_key(body: Mapping[str, Any]) -> str:
    meta = body["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def _version(body: Mapping[str, Any]) -> str:
    return str(body["metadata"].get("resourceVersion") or "")


def _uid(body: Mapping[str, Any]) -> str:
    return str(body["metadata"].get("uid") or "")


def newer(version: str, than: str) -> bool:
    """Whether `version` is provably later than `than`. resourceVersions are opaque to clients; those of an
    etcd-backed API server are increasing integers, so two integers compare. Anything else proves nothing."""
    return _integer(version) and _integer(than) and int(version) > int(than)


def _integer(version: str) -> bool:
    return version.isascii() and version.isdigit()


class ClusterCache:
    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`monotonic`: the clock of the periodic re-decision (`changed`)."""
        self._monotonic = monotonic
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, PodView]] = defaultdict(dict)  # job key -> pod name -> view
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_views: dict[str, NodeView] = {}  # node name -> its Node object, parsed once per change
        self._nodes_summary: NodesSummary | None = None  # of `node_views`; None: to derive again
        self.gpunodes: dict[str, NodeTelemetry] = {}  # node name -> its agent's GPUNode, parsed once
        # DRA (when the API server serves resource.k8s.io/v1): every ResourceClaim, and the GPUs of each
        # ResourceSlice of NVIDIA's driver, parsed once
        self.claims: dict[ClaimId, ClaimView] = {}
        self.slices: dict[str, list[SliceGpu]] = {}
        self._claim_jobs: dict[ClaimId, set[str]] = defaultdict(set)  # claim -> jobs whose pods use it
        # The jobs with a DRA-bound pod (perhaps no longer theirs: `dra_pods` filters). The claim keeper
        # reads their pods every cycle; walking every job's pods for it was a fifth of the operator's CPU
        # at 10,000 env-bound jobs (docs/benchmarks.md).
        self._dra_jobs: dict[str, None] = {}
        self.claims_changed = False
        self.reservations: dict[str, ReservationView] = {}  # reserve binding: by pod name
        # "namespace/name" of every PersistentVolumeClaim not being deleted: a job waits for those its
        # template names (jobs/volumes.py). Names only: nothing else of a claim is read.
        self.volume_claims: dict[str, None] = {}
        self.dirty: set[str] = set()
        # The DLJobs whose GPU-holding pods may have changed since `take_holders_changed` (the kept index
        # re-reads them); None: any may have (a resync, or never taken).
        self._holders_changed: set[str] | None = None
        self.nodes_changed = False
        self.wake = asyncio.Event()
        self._redecide_at = 0.0  # `monotonic()` when `changed` next marks a slice of the jobs
        self._next_slice = 0  # the slice of the jobs (`_redecide_slice`) it marks then
        # While a resync's lists are in flight: kind -> key -> the resourceVersion the watch last wrote or
        # deleted. None outside a resync.
        self._watched: dict[str, dict[str, str]] | None = None
        self._deleted = _Tombstones(monotonic)

    @contextlib.contextmanager
    def resyncing(self) -> Iterator[None]:
        """Request the lists and call `replace_all` inside: watch events from the start on win over the
        lists. Leaving (also when a list failed) stops noting them."""
        self._watched = {kind: {} for kind in _KINDS}
        try:
            yield
        finally:
            self._watched = None

    def _note(self, kind: str, key: str, body: Mapping[str, Any]) -> None:
        if self._watched is not None:
            self._watched[kind][key] = _version(body)

    def mark(self, keys: Iterable[str]) -> None:
        self.dirty.update(keys)
        self.wake.set()

    async def changed(self, *, redecide_every: float) -> None:
        """Until a change wakes the loop. Every job is marked at least every `redecide_every` seconds (for
        its timers: stuck pods, NotReady nodes), also where something changes all the time, as it does in
        a large cluster (once this waited for `redecide_every` seconds without any change): a slice of
        them (`REDECIDE_SLICES`) each `redecide_every / REDECIDE_SLICES` seconds, every slice that fell
        due since the last call (all of them on the first)."""
        if not self.dirty:
            with contextlib.suppress(TimeoutError):
                due_in = max(0.0, self._redecide_at - self._monotonic())
                await asyncio.wait_for(self.wake.wait(), timeout=due_in)
        now, every = self._monotonic(), redecide_every / REDECIDE_SLICES
        if now < self._redecide_at:
            return
        due = min(REDECIDE_SLICES, 1 + int((now - self._redecide_at) / every))
        slices = {(self._next_slice + n) % REDECIDE_SLICES for n in range(due)}
        self._next_slice = (self._next_slice + due) % REDECIDE_SLICES
        self._redecide_at = now + every
        self.mark(key for key in self.jobs if _redecide_slice(key) in slices)

    def take_dirty(self) -> set[str]:
        taken, self.dirty = self.dirty, set()
        self.wake.clear()
        return taken

    def take_holders_changed(self) -> set[str] | None:
        """The DLJobs whose pods may hold other GPUs than when last taken (`job_pods` then reads them);
        None: any may, every job is to be read."""
        taken, self._holders_changed = self._holders_changed, set()
        return taken

    def _holders_change(self, key: str) -> None:
        if self._holders_changed is not None:
            self._holders_changed.add(key)

    def put_job(self, body: Mapping[str, Any]) -> None:
        if self.store_job(body):
            self.mark([job_key(body)])

    def store_job(self, body: Mapping[str, Any]) -> bool:
        """Keep `body` as the API server just returned it (a status write; `compact.kept`), without
        re-deciding it; whether it was kept: not over a newer copy, nor once deleted (see `put_pod`)."""
        key = job_key(body)
        kept = self.jobs.get(key)
        if _uid(body) in self._deleted or (kept is not None and newer(_version(kept), than=_version(body))):
            return False
        self._note("job", key, body)
        self.jobs[key] = compact.kept(body)
        self._holders_change(key)  # its uid decides which pods are its own (`job_pods`)
        return True

    def drop_job(self, body: Mapping[str, Any]) -> None:
        """Marked, so the loop forgets the job: a queued one has no pod whose deletion would say so."""
        key = job_key(body)
        self._note("job", key, body)
        self._deleted.add(_uid(body))
        self.jobs.pop(key, None)
        self._holders_change(key)
        self.mark([key])

    def put_pod(self, body: Mapping[str, Any]) -> PodView:
        """Keep `body` unless the cache holds a provably newer copy: the answer to the operator's own
        create can arrive after the watch delivered the pod bound and Running (kwok binds and starts a
        pod within milliseconds), and no later event would undo the older copy (the job stayed
        Scheduled for good). Nor once the watch saw it deleted: that answer can come after the deletion
        too, and with no copy left to compare it would bring the pod back for good (its GPUs held in
        Horus's books) where a resync alone would clear it."""
        pod = pod_views.view(body)
        if pod.uid in self._deleted:
            return pod
        kept = self.pods.get(pod.job_key, {}).get(pod.name)
        if kept is not None and newer(kept.version, than=pod.version):
            return kept
        self._note("pod", job_key(body), body)
        self.pods[pod.job_key][pod.name] = pod
        self._index_claims(pod)
        self._holders_change(pod.job_key)
        self.mark([pod.job_key])
        return pod

    def _index_claims(self, pod: PodView) -> None:
        for claim in pod.claims:
            self._claim_jobs[(pod.namespace, claim)].add(pod.job_key)
        if pod.binding == Binding.DRA:
            self._dra_jobs[pod.job_key] = None

    def drop_pod(self, body: Mapping[str, Any]) -> None:
        self._note("pod", job_key(body), body)
        self._forget_pod(pod_views.view(body))

    def deleted_pod(self, job: str, name: str) -> None:
        """A pod of DLJob `job` the operator has just deleted at once (grace 0): gone from Horus's books
        before the watch says so. Its job may be placed again in the same cycle, and the kept index holds
        one job per key: the old pod, still held, would take the new one's place."""
        pod = self.pods.get(job, {}).get(name)
        if pod is not None:
            self._forget_pod(pod)

    def _forget_pod(self, pod: PodView) -> None:
        self._deleted.add(pod.uid)
        job_pods = self.pods.get(pod.job_key, {})
        job_pods.pop(pod.name, None)
        if not job_pods:
            self.pods.pop(pod.job_key, None)
            self._dra_jobs.pop(pod.job_key, None)
        self._holders_change(pod.job_key)
        self.mark([pod.job_key])

    def put_node(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._note("node", name, body)
        self.nodes[name] = compact.kept(body)
        seen = cluster_view.view(body)
        if seen == self.node_views.get(name):
            # A heartbeat (kwok, or a kubelet, rewrites every node's status every few minutes): nothing the
            # operator reads changed, so nothing is placed again.
            return
        self.node_views[name] = seen
        self._nodes_summary = None
        self.nodes_changed = True
        self.wake.set()

    def drop_node(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._note("node", name, body)
        self.nodes.pop(name, None)
        self.node_views.pop(name, None)
        self._nodes_summary = None
        self.mark(
            key for key, job_pods in self.pods.items() if any(p.node == name for p in job_pods.values())
        )

    def nodes_summary(self) -> NodesSummary:
        """Derived from all nodes once per change of any (a decision reads it for every job)."""
        if self._nodes_summary is None:
            self._nodes_summary = cluster_view.summarise(self.node_views.values())
        return self._nodes_summary

    def put_gpunode(self, body: Mapping[str, Any], *, received_at: float) -> NodeTelemetry:
        """`received_at`: the operator's clock now (freshness is judged by receipt, operator/gpunodes.py)."""
        name = body["metadata"]["name"]
        parsed = gpunodes.parse(body, received_at=received_at, previous=self.gpunodes.get(name))
        self.gpunodes[name] = parsed
        self.nodes_changed = True
        self.wake.set()
        return parsed

    def drop_gpunode(self, body: Mapping[str, Any]) -> None:
        self.gpunodes.pop(body["metadata"]["name"], None)
        self.nodes_changed = True

    def put_claim(self, body: Mapping[str, Any]) -> None:
        """Not over a newer copy, nor once deleted: the answer to the operator's own create may come after
        the watch's events (see `put_pod`)."""
        if _uid(body) in self._deleted:
            return
        claim = claim_views.view(body)
        previous = self.claims.get(claim.id)
        if previous is not None and newer(previous.version, than=claim.version):
            return
        self._note("claim", job_key(body), body)
        self.claims[claim.id] = claim
        self._claim_changed(claim, inventory=previous is None or previous.allocated != claim.allocated)

    def put_reservation(self, body: Mapping[str, Any]) -> None:
        """A reservation pod (`binding/reservations.py`): placements waiting for its GPU try again. Not
        over a provably newer copy (the answer to the operator's create can come after the watch's
        report), nor once deleted: a slot's reservation deleted and made again is a new pod of the same
        name, and the old one's last events, delivered late, would otherwise replace the new one (its
        GPU told to the new one's pods) or, its deletion, remove it (its pods stopped as unreserved)."""
        reservation = reservations.view(body)
        if reservation is None or reservation.uid in self._deleted:
            return
        kept = self.reservations.get(reservation.name)
        if kept is not None and newer(kept.version, than=reservation.version):
            return
        self._note("reservation", reservation.name, body)
        self.reservations[reservation.name] = reservation
        self.nodes_changed = True
        self.wake.set()

    def deleted_reservation(self, name: str, uid: str) -> None:
        """Deleted by the operator: gone at once (grace 0), before its watch event says so. Only incarnation
        `uid`: the deletions of a cycle are answered while the watch goes on, and the slot's next
        reservation, cached meanwhile, is not the one deleted."""
        self._deleted.add(uid)
        reservation = self.reservations.get(name)
        if reservation is not None and reservation.uid == uid:
            del self.reservations[name]
            self.nodes_changed = True
            self.wake.set()

    def drop_reservation(self, body: Mapping[str, Any]) -> None:
        reservation = reservations.view(body)
        if reservation is None:
            return
        self._note("reservation", reservation.name, body)
        self._deleted.add(reservation.uid)
        kept = self.reservations.get(reservation.name)
        if kept is not None and kept.uid != reservation.uid and newer(kept.version, than=reservation.version):
            return  # the slot's next reservation, made since: not this deletion's
        self.reservations.pop(reservation.name, None)
        self.nodes_changed = True
        self.wake.set()

    def drop_claim(self, body: Mapping[str, Any]) -> None:
        self._note("claim", job_key(body), body)
        self._deleted.add(_uid(body))
        claim = self.claims.pop(claim_views.view(body).id, None)
        if claim is not None:
            self._claim_changed(claim, inventory=bool(claim.allocated))

    def _claim_changed(self, claim: ClaimView, *, inventory: bool) -> None:
        """Its jobs are re-decided (their ClaimsAllocated condition); a GPU held by someone else's claim
        leaves the inventory, or comes back."""
        self.claims_changed = True
        if inventory and not claim.managed:
            self.nodes_changed = True
        self.mark(self._claim_jobs.get(claim.id, ()))

    def put_slice(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._note("slice", name, body)
        self.slices[name] = slices.gpus([body])
        self.nodes_changed = True
        self.wake.set()

    def drop_slice(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._note("slice", name, body)
        self.slices.pop(name, None)
        self.nodes_changed = True
        self.wake.set()

    def put_volume_claim(self, body: Mapping[str, Any]) -> None:
        """A claim being deleted counts as gone: kube-scheduler refuses a pod that names it."""
        if body["metadata"].get("deletionTimestamp"):
            self.drop_volume_claim(body)
            return
        key = job_key(body)
        self._note("volume_claim", key, body)
        if key not in self.volume_claims:
            self.volume_claims[key] = None
            self._namespace_changed(body["metadata"]["namespace"])

    def drop_volume_claim(self, body: Mapping[str, Any]) -> None:
        key = job_key(body)
        self._note("volume_claim", key, body)
        if key in self.volume_claims:
            del self.volume_claims[key]
            self._namespace_changed(body["metadata"]["namespace"])

    def _namespace_changed(self, namespace: str) -> None:
        """A claim came or went: the namespace's jobs are re-decided (those waiting for it are placed)."""
        self.mark(key for key in self.jobs if key.startswith(f"{namespace}/"))

    def has_volume_claim(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.volume_claims

    def slice_gpus(self) -> list[SliceGpu]:
        return [gpu for listed in self.slices.values() for gpu in listed]

    def devices(self) -> dict[Device, str]:
        """The UUID of each GPU the ResourceSlices list, by the name a claim's allocation gives it."""
        return {Device(keys.GPU_DRIVER, gpu.pool, gpu.device): gpu.uuid for gpu in self.slice_gpus()}

    def replace_all(
        self,
        *,
        jobs: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        nodes: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]] = (),
        resource_slices: Iterable[Mapping[str, Any]] = (),
        volume_claims: Iterable[Mapping[str, Any]] = (),
        reservation_pods: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        """Start from full listings (truth after a restart or a lost lease), requested after
        `resyncing`; what the watches wrote meanwhile stands unless the listing is provably newer."""
        watched = self._watched or {kind: {} for kind in _KINDS}
        stale_jobs = set(self.jobs) | set(self.pods)
        pods_by_key = {f"{pod.namespace}/{pod.name}": pod for pod in self._every_pod()}
        merged_jobs = _merge(self.jobs, _keyed(jobs, job_key, compact.kept), watched["job"])
        merged_pods = _merge(pods_by_key, _keyed(pods, job_key, pod_views.view), watched["pod"])
        merged_nodes = _merge(
            self.nodes, _keyed(nodes, lambda b: b["metadata"]["name"], compact.kept), watched["node"]
        )
        claims_by_key = {claim.key: claim for claim in self.claims.values()}
        merged_claims = _merge(claims_by_key, _keyed(claims, job_key, claim_views.view), watched["claim"])
        merged_slices = _merge(
            self.slices,
            _keyed(resource_slices, lambda b: b["metadata"]["name"], _slice_gpus),
            watched["slice"],
        )
        live_claims = (body for body in volume_claims if not body["metadata"].get("deletionTimestamp"))
        merged_volume_claims = _merge(
            self.volume_claims, _keyed(live_claims, job_key, lambda _: None), watched["volume_claim"]
        )
        listed_reservations = {
            view.name: (_version(body), view)
            for body in reservation_pods
            if (view := reservations.view(body)) is not None
        }
        merged_reservations = _merge(self.reservations, listed_reservations, watched["reservation"])
        self.jobs.clear()
        self.jobs.update(merged_jobs)
        self.pods.clear()
        self._claim_jobs.clear()
        self._dra_jobs.clear()
        for pod in merged_pods.values():
            self.pods[pod.job_key][pod.name] = pod
            self._index_claims(pod)
        self.nodes.clear()
        self.nodes.update(merged_nodes)
        self.node_views = {name: cluster_view.view(body) for name, body in merged_nodes.items()}
        self._nodes_summary = None
        self.claims = {claim.id: claim for claim in merged_claims.values()}
        self.slices = merged_slices
        self.volume_claims = merged_volume_claims
        self.reservations = merged_reservations
        self.nodes_changed = self.claims_changed = True
        self._holders_changed = None
        self.mark(stale_jobs | set(self.jobs) | set(self.pods))

    def all_pods(self) -> list[PodView]:
        """The pods of known DLJobs (`job_pods`): what holds GPUs and what the jobs' statuses read."""
        return [pod for key in self.pods for pod in self.job_pods(key)]

    def dra_pods(self) -> list[PodView]:
        """The DRA-bound ones of `all_pods`, without walking every job's pods."""
        return [pod for key in self._dra_jobs for pod in self.job_pods(key) if pod.binding == Binding.DRA]

    def job_pods(self, key: str) -> list[PodView]:
        """The pods that DLJob `key` controls. A pod with Horus's labels but another owner (made by
        anyone who may create pods, or left by an earlier DLJob of the same name) is none of its pods:
        it neither holds GPUs in Horus's books nor says how the job went."""
        body = self.jobs.get(key)
        uid = (body or {}).get("metadata", {}).get("uid")
        if not uid:
            return []
        return [pod for pod in self.pods.get(key, {}).values() if pod.owner_uid == uid]

    def _every_pod(self) -> list[PodView]:
        return [pod for job_pods in self.pods.values() for pod in job_pods.values()]


_KINDS = ("job", "pod", "node", "claim", "slice", "volume_claim", "reservation")


class _Tombstones:
    """The uids of objects the watch saw deleted, each for `TOMBSTONE_S` seconds. A uid names one object
    for good (one created again under its name gets another), so an answer that carries a buried uid is
    older than the deletion, whatever its resourceVersion."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._buried: set[str] = set()
        self._order: deque[tuple[float, str]] = deque()  # (when, uid), oldest first

    def add(self, uid: str) -> None:
        if not uid or uid in self._buried:
            return
        now = self._monotonic()
        while self._order and self._order[0][0] <= now - TOMBSTONE_S:
            self._buried.discard(self._order.popleft()[1])
        self._buried.add(uid)
        self._order.append((now, uid))

    def __contains__(self, uid: object) -> bool:
        return bool(uid) and uid in self._buried


def _slice_gpus(body: Mapping[str, Any]) -> list[SliceGpu]:
    return slices.gpus([body])


def _keyed(
    bodies: Iterable[Mapping[str, Any]],
    key: Callable[[Mapping[str, Any]], str],
    value: Callable[[Mapping[str, Any]], T],
) -> dict[str, tuple[str, T]]:
    return {key(body): (_version(body), value(body)) for body in bodies}


def _merge(
    current: Mapping[str, T], listed: Mapping[str, tuple[str, T]], watched: Mapping[str, str]
) -> dict[str, T]:
    """The listing, except for objects the watch wrote or deleted while it was in flight: those keep the
    watch's state (`current`) unless the listed copy is provably newer. The watch delivers every later
    change in order, so where the listing was in fact the newer one the cache still converges."""
    merged = {
        key: value
        for key, (version, value) in listed.items()
        if key not in watched or newer(version, watched[key])
    }
    for key in watched:
        if key not in merged and key in current:
            merged[key] = current[key]
    return merged


def _redecide_slice(key: str) -> int:
    """The slice of the periodic re-decision a job is in: by a hash of its key that no restart changes."""
    return zlib.crc32(key.encode()) % REDECIDE_SLICES
