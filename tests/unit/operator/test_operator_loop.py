"""The scheduling loop against a fake of our own API adapter (`operator_builders.FakeKube`), never HTTP."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from operator_builders import FakeKube, PodBuilder, gpu_node

from horus_operator.api import keys
from horus_operator.operator import apierrors
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.dra.claims import Sharing
from horus_operator.operator.jobs import jobspec, pods
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.base import Limits, PredictingPolicy
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.queueorder import Ordering, QueueOrder
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, RunningJob
from horus_operator.prediction.api import JobPrediction, Predictor, UnknownModelError, Workload
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.indexes import views

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


class FirstFreeGpu:
    """A stand-in policy: each job alone on the first free GPU, like an exclusive scheduler."""

    name = "first-free"

    def __init__(self, predictor: Predictor | None = None) -> None:
        self.predictions = CachedPredictions(predictor or FixedPredictor())  # what the cycle reads
        self.limits = Limits()

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        index = snapshot.index or ClusterIndex.build(snapshot)  # the cycle hands in its index
        free = [slot.key for _, slots in index.nodes_with_empty(1) for slot in slots]
        assignments = []
        for request, (node, index) in zip(queue, free, strict=False):
            assignments.append(
                Assignment(job=request.key, node=node, gpu_indices=(index,), predicted_slowdown=1.0)
            )
        return assignments

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        return "waiting: no free GPU"


class FixedPredictor:
    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return JobPrediction(utilization=0.5, memory_mib=4000.0)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return tuple(1.0 for _ in workloads)


def _catalog(name: str) -> str:
    if name == "nosuchnet":
        raise UnknownModelError(f"unknown model {name!r}")
    return name


def _loop(
    kube: FakeKube,
    cache: ClusterCache | None = None,
    *,
    policy: PredictingPolicy | None = None,
    predictor: Predictor | None = None,
    resolver: jobspec.WorkloadResolver | None = None,
    config: LoopConfig | None = None,
    on_resync: Callable[[], Awaitable[None]] | None = None,
) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=cache or ClusterCache(),
        policy=policy or FirstFreeGpu(predictor),
        resolver=resolver
        or jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=config or LoopConfig(),
        clock=lambda: NOW,
        on_resync=on_resync,
    )


def _cluster(jobs: int, gpus: int) -> FakeKube:
    kube = FakeKube()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=gpus)
    for i in range(jobs):
        body = DLJobBuilder.stored(f"job-{i}").obj()
        kube.jobs[job_key(body)] = body
    return kube


async def _settle(loop: SchedulingLoop, cycles: int = 3) -> None:
    await loop.resync()
    for _ in range(cycles):
        await loop.cycle()
        await loop.settle()


def test_jobs_are_placed_in_one_batch_and_written_once() -> None:
    kube = _cluster(jobs=3, gpus=4)
    asyncio.run(_settle(_loop(kube)))
    assert kube.creates == 3
    assert {job["status"]["phase"] for job in kube.jobs.values()} == {"Scheduled"}
    assert sorted(job["status"]["gpuList"] for job in kube.jobs.values()) == ["0", "1", "2"]
    assert [reason for _, reason, _ in kube.events] == ["Placed"] * 3


def test_jobs_beyond_capacity_wait_with_a_reason() -> None:
    kube = _cluster(jobs=3, gpus=2)
    asyncio.run(_settle(_loop(kube)))
    waiting = [job for job in kube.jobs.values() if job["status"]["phase"] == "Queued"]
    assert len(waiting) == 1
    assert waiting[0]["status"]["message"] == "waiting: no free GPU"


def test_a_restarted_operator_creates_no_second_pod() -> None:
    kube = _cluster(jobs=4, gpus=4)
    asyncio.run(_settle(_loop(kube)))
    for job in kube.jobs.values():  # the status writes were lost in the crash; the pods were not
        job.pop("status")
    asyncio.run(_settle(_loop(kube)))
    assert kube.creates == 4
    assert len(kube.pods) == 4
    assert {job["status"]["phase"] for job in kube.jobs.values()} == {"Scheduled"}


def test_an_unknown_model_fails_without_blocking_the_others() -> None:
    kube = _cluster(jobs=2, gpus=4)
    bad = DLJobBuilder.stored("bad").model(architecture="nosuchnet").obj()
    kube.jobs[job_key(bad)] = bad
    asyncio.run(_settle(_loop(kube)))
    assert kube.jobs["team-a/bad"]["status"]["phase"] == "Failed"
    assert "spec.model.architecture='nosuchnet'" in kube.jobs["team-a/bad"]["status"]["message"]
    assert kube.creates == 2


def test_a_pod_the_node_cannot_take_is_re_placed_on_another_node_which_others_still_use() -> None:
    kube = _cluster(jobs=1, gpus=1)
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=1)
    loop = _loop(kube, policy=make_policy("exclusive", predictor=FixedPredictor()))
    asyncio.run(_settle(loop))
    (pod,) = kube.pods.values()
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "gpu-node-0"
    _refuse(pod, FULL_OF_CPU)
    asyncio.run(_settle(loop))
    (moved,) = kube.pods.values()
    assert moved["metadata"]["name"] == "job-0-1"
    assert moved["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "gpu-node-1"
    # Asking for nearly all of a node's CPU is the pod's doing as much as the node's: another job (of the
    # same tenant, even) still goes where this one was refused.
    other = DLJobBuilder.stored("other").obj()
    kube.jobs[job_key(other)] = other
    asyncio.run(_settle(loop))
    assert _on(kube, "other") == "gpu-node-0"


FULL_OF_CPU = (
    "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
)
UNBOUND = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
TAINTED = (
    "0/4 nodes are available: 1 node(s) had untolerated taint(s), "
    "3 node(s) didn't match Pod's node affinity/selector."
)


@pytest.mark.parametrize(("message", "cooled"), [(TAINTED, True), (FULL_OF_CPU, False), ("", False)])
def test_a_node_that_refused_two_namespaces_pods_for_its_own_reasons_is_cooled_for_everyone(
    message: str, cooled: bool
) -> None:
    # Round 4 of issue 44: one tenant holding two namespaces cooled a node with two CPU hogs. What a pod
    # asks (CPU, affinity) or an unknown reason makes only that job pass the node over.
    kube = FakeKube()
    for n in range(4):
        kube.nodes[f"gpu-node-{n}"] = gpu_node(f"gpu-node-{n}", count=1)
    loop = _loop(kube, policy=make_policy("exclusive", predictor=FixedPredictor()))
    for name, namespace, elsewhere in (("a", "team-a", "gpu-node-1"), ("b", "team-b", "gpu-node-2")):
        body = DLJobBuilder.stored(name, namespace=namespace).obj()
        kube.jobs[job_key(body)] = body
        asyncio.run(_settle(loop))
        assert _on(kube, name) == "gpu-node-0"
        pod = next(p for p in kube.pods.values() if p["metadata"]["labels"][keys.LABEL_JOB] == name)
        _refuse(pod, message)
        asyncio.run(_settle(loop))
        assert _on(kube, name) == elsewhere
    late = DLJobBuilder.stored("late", namespace="team-c").obj()
    kube.jobs[job_key(late)] = late
    asyncio.run(_settle(loop))
    assert _on(kube, "late") == ("gpu-node-3" if cooled else "gpu-node-0")


def _refuse(pod: dict[str, Any], message: str) -> None:
    """kube-scheduler has left `pod` unschedulable for an hour, saying `message`."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    pod["status"]["conditions"] = [{**condition, "lastTransitionTime": "2026-12-02T09:00:00Z"}]


def _on(kube: FakeKube, job: str) -> str:
    return next(
        pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        for pod in kube.pods.values()
        if pod["metadata"]["labels"][keys.LABEL_JOB] == job
    )


def test_a_pod_level_refusal_cools_no_node_and_the_second_fails_the_job() -> None:
    """A claim that never binds is refused on every node alike: cooling the node would stall everyone."""
    kube = _cluster(jobs=1, gpus=2)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    _refuse(kube.pods["team-a/job-0-0"], UNBOUND)
    late = DLJobBuilder.stored("late", namespace="team-b").obj()
    kube.jobs[job_key(late)] = late
    asyncio.run(_settle(loop))
    assert _on(kube, "late") == "gpu-node-0"  # the only node, not cooled
    assert sorted(kube.pods) == ["team-a/job-0-1", "team-b/late-0"]
    _refuse(kube.pods["team-a/job-0-1"], UNBOUND)
    asyncio.run(_settle(loop))
    status = kube.jobs["team-a/job-0"]["status"]
    assert (status["phase"], status["message"]) == (
        "Failed",
        "kube-scheduler refused pod job-0-1 on gpu-node-0 for the same reason as pod job-0-0 on gpu-node-0, "
        "which no other node changes: pod has unbound immediate PersistentVolumeClaims",
    )
    assert sorted(kube.pods) == ["team-b/late-0"]  # the refused pod is gone, its GPU free


def test_one_tenants_jobs_refused_on_a_node_cool_it_for_nobody() -> None:
    kube = _cluster(jobs=2, gpus=2)
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=2)
    for job in kube.jobs.values():  # both on gpu-node-0, the first node
        job["spec"]["priority"] = 1
    loop = _loop(kube, policy=make_policy("exclusive", predictor=FixedPredictor()))
    asyncio.run(_settle(loop))
    assert {_on(kube, "job-0"), _on(kube, "job-1")} == {"gpu-node-0"}
    odd = "0/2 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, "
    odd += "1 node(s) didn't match Pod's node affinity/selector."
    _refuse(kube.pods["team-a/job-0-0"], odd)
    _refuse(kube.pods["team-a/job-1-0"], odd)
    asyncio.run(_settle(loop))
    assert {_on(kube, "job-0"), _on(kube, "job-1")} == {"gpu-node-1"}  # each passes it over
    late = DLJobBuilder.stored("late").obj()
    kube.jobs[job_key(late)] = late
    asyncio.run(_settle(loop))
    assert _on(kube, "late") == "gpu-node-0"  # two jobs of one namespace: not cooled


class QuotaRefuses(FakeKube):
    """A ResourceQuota admits no pod: the API server answers 403 with a Status that names no field."""

    async def create_pod(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        name = pod["metadata"]["name"]
        message = f'pods "{name}" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, '
        message += "limited: pods=0"
        details = {"name": name, "kind": "pods"}
        status = {"kind": "Status", "status": "Failure", "message": message, "details": details, "code": 403}
        raise apierrors.of_status(403, "Forbidden", json.dumps(status))


def test_a_pod_the_api_server_refuses_without_a_field_fails_its_job_in_one_line() -> None:
    kube = QuotaRefuses()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=1)
    kube.jobs["team-a/job-0"] = DLJobBuilder.stored("job-0").obj()
    asyncio.run(_settle(_loop(kube)))
    status = kube.jobs["team-a/job-0"]["status"]
    assert (status["phase"], status["message"]) == (
        "Failed",
        'spec.template=None: pod refused (Forbidden): pods "job-0-0" is forbidden: exceeded quota: none, '
        "requested: pods=1, used: pods=0, limited: pods=0",
    )


def test_a_job_waits_for_a_claim_it_names_and_is_placed_once_it_exists() -> None:
    kube, cache = _cluster(jobs=0, gpus=1), ClusterCache()
    job = DLJobBuilder.stored("data").obj()
    job["spec"]["template"]["spec"]["volumes"] = [
        {"name": "d", "persistentVolumeClaim": {"claimName": "imagenet"}}
    ]
    kube.jobs[job_key(job)] = job
    loop = _loop(kube, cache)
    asyncio.run(_settle(loop))
    assert kube.creates == 0
    assert kube.jobs["team-a/data"]["status"]["message"] == (
        "waiting: spec.template.spec.volumes[0].persistentVolumeClaim.claimName='imagenet': "
        "no PersistentVolumeClaim imagenet in namespace team-a"
    )
    cache.put_volume_claim({"metadata": {"namespace": "team-a", "name": "imagenet", "resourceVersion": "3"}})

    async def cycle() -> None:
        await loop.cycle()
        await loop.settle()

    asyncio.run(cycle())
    assert kube.creates == 1


class ListsInFlight(FakeKube):
    """Lists that answer with the state at the moment they were requested, after `meanwhile` (the watch
    delivering events) has run: what a slow list on a busy API server returns."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.meanwhile = meanwhile

    async def list_nodes(self) -> list[dict[str, Any]]:
        listed = await super().list_nodes()  # the job and pod lists were answered before this one
        self.meanwhile()
        return listed


def _at(body: dict[str, Any], version: str) -> dict[str, Any]:
    body["metadata"]["resourceVersion"] = version
    return body


def _resync_racing(kube: ListsInFlight, cache: ClusterCache, watch: Callable[[], None]) -> None:
    """Resync while the watch delivers `watch`'s events to `cache` between the lists and their answer."""
    kube.meanwhile = watch
    asyncio.run(_loop(kube, cache).resync())


def _stored_cluster() -> ListsInFlight:
    kube = ListsInFlight(meanwhile=lambda: None)
    kube.nodes["gpu-node-0"] = _at(gpu_node("gpu-node-0"), "10")
    for name in ("kept", "deleted"):
        kube.jobs[f"team-a/{name}"] = _at(DLJobBuilder.stored(name).obj(), "11")
        kube.pods[f"team-a/{name}-0"] = _at(PodBuilder(name).bound().obj(), "12")
    return kube


def test_a_stale_list_does_not_undo_newer_watch_events() -> None:
    kube, cache = _stored_cluster(), ClusterCache()
    cordoned = _at(gpu_node("gpu-node-0"), "20")
    cordoned["spec"]["unschedulable"] = True
    late_job = _at(DLJobBuilder.stored("late").obj(), "21")

    def watch() -> None:
        cache.put_node(cordoned)
        cache.drop_job(_at(DLJobBuilder.stored("deleted").obj(), "22"))
        cache.drop_pod(_at(PodBuilder("deleted").bound().obj(), "23"))
        cache.put_job(late_job)

    _resync_racing(kube, cache, watch)
    assert cache.nodes["gpu-node-0"]["spec"] == {"unschedulable": True}
    assert set(cache.jobs) == {"team-a/kept", "team-a/late"}  # the deletion is not resurrected
    assert set(cache.pods) == {"team-a/kept"}
    assert {"team-a/kept", "team-a/late"} <= cache.dirty


def test_a_listed_copy_newer_than_a_lagging_watch_event_wins() -> None:
    kube, cache = _stored_cluster(), ClusterCache()
    _resync_racing(kube, cache, lambda: cache.put_node(_at(gpu_node("gpu-node-0", count=1), "3")))
    assert cache.nodes["gpu-node-0"]["metadata"]["resourceVersion"] == "10"


def test_without_comparable_versions_the_watch_event_stands() -> None:
    """resourceVersions are opaque: where they are not integers the watch, which delivers every later
    change in order, is trusted over a list that may predate it."""
    kube, cache = _stored_cluster(), ClusterCache()
    kube.nodes["gpu-node-0"]["metadata"]["resourceVersion"] = "b7"
    _resync_racing(kube, cache, lambda: cache.put_node(_at(gpu_node("gpu-node-0", count=1), "a3")))
    assert cache.nodes["gpu-node-0"]["metadata"]["resourceVersion"] == "a3"


class WatchAheadOfCreate(FakeKube):
    """kube-scheduler and kwok bind and start a pod within milliseconds: the watch delivers it Running
    before the operator reads the answer to its own create, which says Pending."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__()
        self.cache = cache

    async def create_pod(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        stored, created = await super().create_pod(pod)
        stored = _at(stored, "5")
        running = _at(copy.deepcopy(stored), "7")
        running["spec"]["nodeName"] = "gpu-node-0"
        running["status"] = {"phase": "Running", "startTime": "2026-12-02T09:00:01Z"}
        self.pods[job_key(pod)] = running
        self.cache.put_pod(running)
        return stored, created


def test_a_pod_running_before_its_create_returns_makes_its_job_running() -> None:
    cache = ClusterCache()
    kube = WatchAheadOfCreate(cache)
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=1)
    kube.jobs["team-a/job-0"] = DLJobBuilder.stored("job-0").obj()
    asyncio.run(_settle(_loop(kube, cache)))
    assert [p.phase for p in cache.all_pods()] == ["Running"]
    assert kube.jobs["team-a/job-0"]["status"]["phase"] == "Running"


class DeletedBeforeCreateReturns(FakeKube):
    """The first pod is deleted (by its user, or evicted) and the watch says so before the operator reads
    the answer to its own create."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__()
        self.cache = cache
        self.deleted_uids: list[str] = []

    async def create_pod(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        stored, created = await super().create_pod(pod)
        if not self.deleted_uids:
            del self.pods[job_key(pod)]
            self.cache.drop_pod(stored)
            self.deleted_uids.append(stored["metadata"]["uid"])
        return stored, created


def test_a_pod_deleted_before_its_create_returns_does_not_come_back() -> None:
    """With no copy left to compare versions with, the create's answer would put the deleted pod back
    into the cache, holding its GPU in Horus's books until a resync."""
    cache = ClusterCache()
    kube = DeletedBeforeCreateReturns(cache)
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=1)
    kube.jobs["team-a/job-0"] = DLJobBuilder.stored("job-0").obj()
    asyncio.run(_settle(_loop(kube, cache)))
    cached = {pod.uid for pod in cache.all_pods()}
    assert kube.deleted_uids and not cached & set(kube.deleted_uids)
    assert cached == {pod["metadata"]["uid"] for pod in kube.pods.values()}


def test_a_status_write_answer_for_a_deleted_job_does_not_bring_it_back() -> None:
    cache = ClusterCache()
    job = _at(DLJobBuilder.stored("job-0").obj(), "9")
    cache.put_job(job)
    cache.drop_job(_at(copy.deepcopy(job), "10"))
    cache.store_job(_at(copy.deepcopy(job), "9"))
    assert cache.jobs == {}


def test_a_create_answer_for_a_deleted_claim_does_not_bring_it_back() -> None:
    cache = ClusterCache()
    claim = {"metadata": {"namespace": "team-a", "name": "job-0-0-gpu-0", "uid": "claim-1"}}
    cache.drop_claim(_at(copy.deepcopy(claim), "12"))
    cache.put_claim(_at(claim, "11"))
    assert cache.claims == {}


def test_a_status_write_answer_older_than_the_watched_copy_is_not_kept() -> None:
    cache = ClusterCache()
    cache.put_job(_at(DLJobBuilder.stored("job-0").obj(), "9"))
    cache.store_job(_at(DLJobBuilder.stored("job-0").obj(), "8"))
    assert cache.jobs["team-a/job-0"]["metadata"]["resourceVersion"] == "9"


def test_objects_gone_before_the_list_leave_the_cache() -> None:
    kube, cache = _stored_cluster(), ClusterCache()
    cache.put_node(_at(gpu_node("gpu-node-9"), "2"))  # deleted while this replica was not watching
    cache.put_job(_at(DLJobBuilder.stored("gone").obj(), "2"))
    _resync_racing(kube, cache, lambda: None)
    assert set(cache.nodes) == {"gpu-node-0"}
    assert set(cache.jobs) == {"team-a/kept", "team-a/deleted"}


def test_a_pod_no_gpu_node_can_hold_fails_without_cooling_the_nodes() -> None:
    """Placed anyway, its pod would be unschedulable on each node in turn, and each would cool down for
    everyone: one job could stop all placement."""
    kube = _cluster(jobs=1, gpus=2)
    hog = DLJobBuilder.stored("hog").obj()
    hog["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    kube.jobs[job_key(hog)] = hog
    asyncio.run(_settle(_loop(kube)))
    status = kube.jobs["team-a/hog"]["status"]
    assert status["phase"] == "Failed"
    assert status["message"].startswith("spec.template.spec.containers[0].resources.requests.cpu='1000'")
    assert [pod["metadata"]["name"] for pod in kube.pods.values()] == ["job-0-0"]


def test_a_template_that_picks_its_own_node_fails_naming_it() -> None:
    kube = _cluster(jobs=0, gpus=2)
    pinned = DLJobBuilder.stored("pinned").obj()
    pinned["spec"]["template"]["spec"]["nodeName"] = "gpu-node-0"
    kube.jobs[job_key(pinned)] = pinned
    asyncio.run(_settle(_loop(kube)))
    assert kube.jobs["team-a/pinned"]["status"]["message"].startswith(
        "spec.template.spec.nodeName='gpu-node-0'"
    )
    assert kube.creates == 0


def test_a_queued_job_deleted_meanwhile_is_forgotten_not_placed() -> None:
    kube, cache = _cluster(jobs=2, gpus=1), ClusterCache()
    loop = _loop(kube, cache)
    asyncio.run(_settle(loop))
    queued = next(body for body in kube.jobs.values() if body["status"]["phase"] == "Queued")
    cache.drop_job(queued)  # fed as the kopf handlers feed it: a DELETED event, then a new node
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=1)
    cache.put_node(kube.nodes["gpu-node-1"])

    async def cycles() -> None:
        for _ in range(2):
            await loop.cycle()
            await loop.settle()

    asyncio.run(cycles())  # used to fail on the deleted job still waiting for a GPU
    assert kube.creates == 1


class CorrectedFirstFreeGpu(FirstFreeGpu):
    """As if the online correction had observed each newcomer's slowdown three times."""

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        placed = super().schedule(snapshot, queue)
        return [dataclasses.replace(a, slowdown_source="observed", slowdown_samples=3) for a in placed]


def test_status_says_whether_a_prediction_came_from_observations_and_resync_restores_the_correction() -> None:
    kube = _cluster(jobs=1, gpus=1)
    restores: list[str] = []

    async def restore() -> None:
        restores.append("restored")

    loop = _loop(kube, policy=CorrectedFirstFreeGpu(), on_resync=restore)
    asyncio.run(_settle(loop))

    predicted = kube.jobs["team-a/job-0"]["status"]["predicted"]
    assert (predicted["slowdownSource"], predicted["slowdownSamples"]) == ("observed", 3)
    assert restores == ["restored"]


def test_every_job_is_re_decided_in_time_also_while_something_always_changes() -> None:
    """A large cluster is never quiet for a whole resync period; the jobs' timers must still run."""

    async def while_nodes_keep_changing() -> set[str]:
        cache = ClusterCache()
        cache.store_job(DLJobBuilder.stored("quiet").obj())
        redecided: set[str] = set()
        for tick in range(1_000):
            cache.put_node(gpu_node(f"node-{tick}"))  # a change before every wait
            await cache.changed(redecide_every=0.05)
            redecided |= cache.take_dirty()
            if tick and "team-a/quiet" in redecided:  # the first wait marks every job at once
                return redecided
            redecided.clear()
            await asyncio.sleep(0.01)
        return redecided

    assert "team-a/quiet" in asyncio.run(while_nodes_keep_changing())


def test_the_periodic_re_decision_marks_every_job_once_a_period_a_slice_at_a_time() -> None:
    """At 10,000 jobs one re-decision of all of them held the event loop for seconds (bench/scale.py)."""
    clock = [0.0]
    cache = ClusterCache(monotonic=lambda: clock[0])
    for i in range(1_000):
        cache.store_job(DLJobBuilder.stored(f"job-{i}").obj())
    cache.take_dirty()

    async def marked_at(times: Sequence[float]) -> list[set[str]]:
        marked = []
        for now in times:
            clock[0] = now
            await cache.changed(redecide_every=10.0)
            marked.append(cache.take_dirty())
        return marked

    first, *slices, again, late = asyncio.run(marked_at([100.0 + s for s in range(12)] + [114.6]))
    assert first == set(cache.jobs), "the first wait marks every job at once"
    assert all(0 < len(marked) < 200 for marked in slices), "then about a tenth of them at a time"
    assert sum(map(len, slices)) == len(cache.jobs) and set().union(*slices) == set(cache.jobs)
    assert again == slices[0], "each job in the same slice every period"
    assert late == slices[1] | slices[2] | slices[3], "a late call marks every slice that fell due"


def _foreign(job: str, namespace: str = "team-a", *gpus: int) -> dict[str, Any]:
    """A pod with Horus's labels and annotations that no DLJob controls (anyone who may create pods)."""
    return (
        PodBuilder(job, namespace=namespace)
        .on("gpu-node-0", *gpus)
        .bound()
        .phase("Running")
        .owned_by(None)
        .obj()
    )


def test_pods_with_horus_labels_but_no_dljob_owner_hold_no_gpus_and_are_not_adopted() -> None:
    kube = _cluster(jobs=2, gpus=2)
    for name, gpu in (("squatter-a", 0), ("squatter-b", 1)):
        kube.pods[f"other-team/{name}-0"] = _foreign(name, "other-team", gpu)
    kube.pods["team-a/job-0-0"] = _foreign("job-0", "team-a", 0)  # named as job-0's first pod, made first
    asyncio.run(_settle(_loop(kube)))
    assert kube.jobs["team-a/job-1"]["status"]["phase"] == "Scheduled"  # the squatters' GPUs were free
    job_0 = kube.jobs["team-a/job-0"]["status"]
    assert job_0["phase"] == "Queued", "the foreign pod is not job-0's pod"
    assert "team-a/job-0-0 exists and is not this DLJob's" in job_0["message"]


def test_a_pod_name_taken_by_a_foreign_pod_fails_the_job_after_bounded_tries() -> None:
    kube = _cluster(jobs=1, gpus=2)
    kube.pods["team-a/job-0-0"] = _foreign("job-0", "team-a", 0)
    loop = _loop(kube)

    async def redecide_every_job(rounds: int) -> None:
        await loop.resync()
        for _ in range(rounds):
            loop._cache.mark(loop._cache.jobs)  # what each resync period does
            await loop.cycle()
            await loop.settle()

    asyncio.run(redecide_every_job(rounds=5))
    status = kube.jobs["team-a/job-0"]["status"]
    assert status["phase"] == "Failed"
    assert "metadata.name='job-0'" in status["message"] and "team-a/job-0-0" in status["message"]
    assert kube.creates == 0 and kube.pods["team-a/job-0-0"]["metadata"]["ownerReferences"] == []


class SteppedPredictor(FixedPredictor):
    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return JobPrediction(utilization=0.5, memory_mib=4000.0, step_s=0.1)


@pytest.mark.parametrize(
    ("order", "first"), [(QueueOrder.FIFO, "long"), (QueueOrder.SHORTEST_REMAINING, "short")]
)
def test_the_operator_orders_its_queue_by_length_from_total_steps_and_the_predicted_step_time(
    order: QueueOrder, first: str
) -> None:
    kube = _cluster(jobs=0, gpus=1)
    for name, steps in (("long", 100_000), ("short", 100)):  # submitted in the same second
        body = DLJobBuilder.stored(name).spec(totalSteps=steps).obj()
        kube.jobs[job_key(body)] = body
    loop = _loop(kube, predictor=SteppedPredictor(), config=LoopConfig(ordering=Ordering(order)))
    asyncio.run(_settle(loop))
    placed = [name for name, body in kube.jobs.items() if body["status"]["phase"] == "Scheduled"]
    assert placed == [f"team-a/{first}"]


def test_a_jobs_cpu_limit_beyond_one_core_reaches_the_predictor_and_its_pod() -> None:
    kube = _cluster(jobs=0, gpus=1)
    body = DLJobBuilder.stored("rl").obj()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "5"}}
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop(kube)))
    (pod,) = kube.pods.values()
    assert json.loads(pod["metadata"]["annotations"][keys.ANNOTATION_REQUEST])["hostCpus"] == 4.0


def test_waiting_jobs_at_the_head_are_told_their_place_and_why() -> None:
    kube = _cluster(jobs=0, gpus=1)
    for name, steps in (("long", 100_000), ("short", 100), ("unknown", None)):
        body = DLJobBuilder.stored(name).spec(**({"totalSteps": steps} if steps else {})).obj()
        kube.jobs[job_key(body)] = body
    order = Ordering(QueueOrder.SHORTEST_REMAINING)
    asyncio.run(_settle(_loop(kube, predictor=SteppedPredictor(), config=LoopConfig(ordering=order))))
    places = {key: body["status"].get("queue") for key, body in kube.jobs.items()}
    assert places["team-a/short"] is None, "placed: no queue place"
    assert places["team-a/long"] == {
        "position": 1,
        "waiting": 2,
        "order": "shortest-remaining",
        "reason": "least remaining work first: 2.78 GPU-hours",  # 100,000 steps x 0.1 s
    }
    assert places["team-a/unknown"]["position"] == 2
    assert places["team-a/unknown"]["reason"].startswith("length unknown")


def test_the_kept_index_follows_watch_events_as_a_fresh_snapshot_would() -> None:
    """Between resyncs the loop's index is kept from the cache's changes (pods bound, ended, deleted;
    a node cordoned, added, removed), never rebuilt; it answers as an index built from a fresh
    snapshot does."""
    kube = _cluster(jobs=6, gpus=4)
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=4)
    cache = ClusterCache()
    loop = _loop(kube, cache)

    def kept_is_fresh() -> ClusterIndex:
        kept = loop._views.view(NOW).index
        assert isinstance(kept, ClusterIndex)
        fresh = ClusterIndex.build(loop._placer.snapshot(NOW))
        assert views(kept, job_order=False) == views(fresh, job_order=False)
        return kept

    async def scenario() -> None:
        await _settle(loop, cycles=2)
        kept = kept_is_fresh()
        ended, deleted, *_ = kube.pods.values()
        cache.put_pod({**ended, "status": {**ended["status"], "phase": "Succeeded"}})
        del kube.pods[job_key(deleted)]
        cache.drop_pod(deleted)
        deleted_key = pods.view(deleted).job_key
        cordoned = gpu_node("gpu-node-1")
        cordoned["spec"]["unschedulable"] = True
        cache.put_node(cordoned)
        assert kept_is_fresh() is kept
        await loop.cycle()
        await loop.settle()
        assert kept_is_fresh() is kept
        assert len(kept.jobs) == 5  # the job whose pod was deleted runs again, on the node not cordoned
        assert {job.node for job in kept.jobs.values() if job.request.key == deleted_key} == {"gpu-node-0"}
        cache.put_node(gpu_node("gpu-node-2", count=2))  # a node joins, another leaves
        cache.drop_node(gpu_node("gpu-node-0"))
        assert kept_is_fresh() is kept
        assert [node.name for node in kept.nodes] == ["gpu-node-1", "gpu-node-2"]

    asyncio.run(scenario())


class FailsHalfWay(FirstFreeGpu):
    """Places its first job into the borrowed index, then fails, once: a policy bug mid-call."""

    failed = False

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        if not self.failed and isinstance(snapshot.index, ClusterIndex):
            self.failed = True
            snapshot.index.add(RunningJob(queue[0], "gpu-node-0", (0,)))
            raise RuntimeError("policy failed half-way")
        return super().schedule(snapshot, queue)


def test_a_cycle_that_failed_half_way_leaves_no_tentative_job_in_the_kept_index() -> None:
    kube = _cluster(jobs=2, gpus=4)
    cache = ClusterCache()
    loop = _loop(kube, cache, policy=FailsHalfWay())

    async def scenario() -> None:
        await loop.resync()
        with pytest.raises(RuntimeError, match="half-way"):
            await loop.cycle()
        assert loop._views.view(NOW).index.jobs == {}  # type: ignore[union-attr]
        cache.mark(cache.jobs)  # the periodic re-decision
        await loop.cycle()
        await loop.settle()

    asyncio.run(scenario())
    assert kube.creates == 2


@pytest.mark.parametrize(("sharing", "sliced"), [(Sharing.AUTO, True), (Sharing.MPS, False)])
def test_an_env_bound_pod_says_whether_its_co_tenants_time_slice(sharing: Sharing, sliced: bool) -> None:
    kube = _cluster(jobs=1, gpus=1)
    asyncio.run(_settle(_loop(kube, config=LoopConfig(sharing=sharing))))
    (pod,) = kube.pods.values()
    assert json.loads(pod["metadata"]["annotations"][keys.ANNOTATION_REQUEST])["timeSliced"] is sliced


def test_the_pods_of_a_dljob_deleted_with_orphaning_are_stopped() -> None:
    # Round 4 of issue 44: `kubectl delete dljob --cascade=orphan`, which a DLJob-only tenant may run, left
    # the pod running on its GPU while Horus placed the next job there.
    kube = _cluster(jobs=1, gpus=1)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    assert list(kube.pods) == ["team-a/job-0-0"]
    del kube.jobs["team-a/job-0"]  # gone; the garbage collector only removes the pod's owner reference
    asyncio.run(_settle(loop))
    assert kube.pods == {}
