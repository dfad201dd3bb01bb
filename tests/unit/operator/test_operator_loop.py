"""The scheduling loop against a fake of our own API adapter (`operator_builders.FakeKube`), never HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from operator_builders import FakeKube, gpu_node

from horus_operator.operator import jobspec
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.prediction.api import JobPrediction, UnknownModelError, Workload
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


class FirstFreeGpu:
    """A stand-in policy: each job alone on the first free GPU, like an exclusive scheduler."""

    name = "first-free"

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


def _loop(kube: FakeKube) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=FirstFreeGpu(),
        predictor=FixedPredictor(),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(),
        clock=lambda: NOW,
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


def test_a_pod_the_node_cannot_take_is_re_placed_on_another_node() -> None:
    kube = _cluster(jobs=1, gpus=1)
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=1)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    (pod,) = kube.pods.values()
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "gpu-node-0"
    pod["status"]["conditions"] = [  # kube-scheduler: the node is full of CPU
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": "2026-12-02T09:00:00Z",
        }
    ]
    asyncio.run(_settle(loop))
    (moved,) = kube.pods.values()
    assert moved["metadata"]["name"] == "job-0-1"
    assert moved["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "gpu-node-1"
