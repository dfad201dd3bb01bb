"""A DLJob's pod that ran out of GPU memory beside a co-tenant (operator/jobs/oom.py): detected from its
termination message, forgiven once, the job retried alone with its memory raised; told in its status, an
Event and a metric; and the same after an operator restart."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from operator_builders import FakeKube, PodBuilder, gpu_node
from test_operator_loop import _settle

from horus_operator.api import dljob, keys
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.cluster_view import view as node_view
from horus_operator.operator.jobs import jobspec, oom, pods, reconcile
from horus_operator.operator.jobs.pods import Placement
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import Assignment, JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 10, 10, tzinfo=UTC)
NODES = {"gpu-node-0": node_view(gpu_node("gpu-node-0", count=2, memory_mib=16384))}
TORCH = (
    'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n    loss.backward()\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 15.77 GiB of which 1.19 GiB is free. Process 12345 has 14.57 GiB memory in use. Of the allocated "
    "memory 13.90 GiB is allocated by PyTorch, and 305.43 MiB is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("message", "found"),
    [
        (TORCH, "torch.OutOfMemoryError"),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
            "capacity; 14.56 GiB already allocated; 4.75 MiB free; 14.62 GiB reserved in total by PyTorch)",
            "CUDA out of memory",
        ),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate", "torch.cuda.OutOfMemoryError"),
        (
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:\n"
            "OOM when allocating tensor with shape[256,1024,14,14] and type float on "
            "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "OOM when allocating",
        ),
        (
            "(0) RESOURCE_EXHAUSTED:  OOM when allocating tensor with shape[64,3,224,224]",
            "OOM when allocating",
        ),
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
            "allocate 17179869184 bytes.",
            "RESOURCE_EXHAUSTED: Out of memory",
        ),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "CUBLAS_STATUS_ALLOC_FAILED",
        ),
        ("cudaErrorMemoryAllocation: out of memory", "cudaErrorMemoryAllocation"),
        (
            "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 4,000,000,512 bytes",
            "cupy.cuda.memory.OutOfMemoryError",
        ),
        (
            "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
            "CUDA error: out of memory",
        ),
        (
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
            "Cuda failure 'out of memory'",
            "Cuda failure 'out of memory",
        ),
        # not the GPU's memory, or not memory at all
        ("MemoryError", ""),
        ("OSError: [Errno 12] Cannot allocate memory", ""),
        ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.", ""),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", ""),
        ("", ""),
    ],
)
def test_an_out_of_gpu_memory_error_is_found_as_the_framework_printed_it(message: str, found: str) -> None:
    assert oom.signature(message) == found


def test_a_pod_view_says_whether_its_containers_ended_out_of_gpu_memory() -> None:
    assert pods.view(PodBuilder("cnn").bound().failed(TORCH).obj()).out_of_memory == "torch.OutOfMemoryError"
    assert pods.view(PodBuilder("cnn").bound().failed("ValueError: nan loss").obj()).out_of_memory == ""
    host = PodBuilder("cnn").bound().failed().obj()  # the kernel's OOM killer: host memory, exit 137
    host["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=137, reason="OOMKilled")
    assert pods.view(host).out_of_memory == ""


def test_horus_containers_report_their_log_tail_when_they_fail_without_a_message() -> None:
    job = DLJobBuilder.stored("cnn").obj()
    job["spec"]["template"]["spec"]["containers"].append({"name": "own", "terminationMessagePolicy": "File"})
    request = JobRequest("team-a/cnn", Workload("resnet50", 32))
    placement = Placement(dljob.parse(job), request, Assignment("team-a/cnn", "gpu-node-0", (0,)), 0, "h")
    containers = pods.build_pod(placement)["spec"]["containers"]
    assert [c["terminationMessagePolicy"] for c in containers] == ["FallbackToLogsOnError", "File"]


def _view(builder: PodBuilder) -> pods.PodView:
    return pods.view(builder.obj())


def test_the_jobs_beside_a_pod_while_it_ran() -> None:
    ran = PodBuilder("cnn").on("gpu-node-0", 0).bound().started("2026-12-02T10:00:00Z").failed(TORCH)
    pod = _view(ran)

    def other(job: str, gpu: int = 0, *, started: str = "2026-12-02T10:01:00Z") -> PodBuilder:
        return PodBuilder(job).on("gpu-node-0", gpu).bound().started(started).phase("Running")

    assert oom.beside(pod, [pod, _view(other("bert"))], {}) == ("team-a/bert",)
    assert oom.beside(pod, [_view(other("bert", gpu=1))], {}) == ()  # another GPU of its node
    late = other("late", started="2026-12-02T10:06:00Z")  # started after it ended
    early = other("early", started="2026-12-02T09:00:00Z").failed(finished="2026-12-02T09:30:00Z")
    assert oom.beside(pod, [_view(late), _view(early)], {}) == ()
    # seen beside a job by the agent, or placed beside one gone since (its colocated annotation)
    assert oom.beside(pod, [], {"sharingWith": ["team-b/seen"]}) == ("team-b/seen",)
    placed = ran.obj()
    placed["metadata"]["annotations"][keys.ANNOTATION_COLOCATED] = "team-a/gone"
    assert oom.beside(pods.view(placed), [], {}) == ("team-a/gone",)


def _decide(
    job: dict[str, Any], *builders: PodBuilder, others: tuple[PodBuilder, ...] = ()
) -> reconcile.Decision:
    views = [_view(b) for b in builders]
    current = job.get("status") or {}
    ending = oom.ending(views, current, lambda: [_view(b) for b in others], NODES)
    ctx = reconcile.Context(now=NOW, nodes=("gpu-node-0",), oom=ending)
    return reconcile.decide(dljob.parse(job), current, views, ctx)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


CO_TENANT = PodBuilder("bert").bound().started("2026-12-02T09:59:00Z").phase("Running")
OOM_POD = PodBuilder("cnn").bound().started("2026-12-02T10:00:00Z").failed(TORCH)


def test_the_first_oom_beside_a_co_tenant_is_forgiven_and_the_job_retried_alone() -> None:
    job = DLJobBuilder.stored("cnn").spec(backoffLimit=0).obj()
    decision = _decide(job, OOM_POD, others=(CO_TENANT,))
    status = decision.status
    assert (status["phase"], decision.place_attempt) == ("Queued", 1)  # backoffLimit 0: not spent
    assert status[oom.RECOVERIES] == 1
    recovery = status[oom.RECOVERY]
    assert recovery == {
        "pod": "cnn-0",
        "beside": ["team-a/bert"],
        "signature": "torch.OutOfMemoryError",
        "memoryMiB": 6000.0,  # the 4,000 MiB it was placed with × 1.5
        "at": "2026-12-02T10:10:00Z",
    }
    assert _condition(status, "Scheduled")["reason"] == oom.REASON
    raised = _condition(status, oom.CONDITION)
    assert (raised["status"], raised["reason"]) == ("True", oom.REASON)
    assert "cnn-0 ran out of GPU memory (torch.OutOfMemoryError) beside team-a/bert" in raised["message"]
    assert "retried alone with 6000 MiB" in status["message"]
    # stored before the retry's pod exists, told once in an Event
    assert decision.store_first and decision.out_of_memory == raised["message"]


def test_the_memory_the_agent_saw_it_reach_is_raised_to() -> None:
    job = (
        DLJobBuilder.stored("cnn").status(observed={"memoryMiB": 9100, "sharingWith": ["team-a/bert"]}).obj()
    )
    recovery = _decide(job, OOM_POD).status[oom.RECOVERY]
    assert (recovery["memoryMiB"], recovery["reachedMiB"], recovery["beside"]) == (
        9100.0,
        9100,
        ["team-a/bert"],
    )


def test_an_oom_alone_is_the_jobs_own_and_counts_against_backoff_limit() -> None:
    job = DLJobBuilder.stored("cnn").spec(backoffLimit=0).obj()
    decision = _decide(job, OOM_POD)  # nobody beside it
    assert (decision.status["phase"], _condition(decision.status, "Failed")["reason"]) == (
        "Failed",
        "BackoffLimitExceeded",
    )
    assert oom.RECOVERIES not in decision.status and not decision.store_first


def _recovered(backoff_limit: int) -> dict[str, Any]:
    """The job as the API server shows it once its first OOM was recorded (the retry's pod exists)."""
    job = DLJobBuilder.stored("cnn").spec(backoffLimit=backoff_limit).obj()
    job["status"] = _decide(job, OOM_POD, others=(CO_TENANT,)).status
    return job


def test_a_restarted_operator_reads_the_recovery_back_and_forgives_the_same_pod_once() -> None:
    job = _recovered(backoff_limit=0)
    again = _decide(job, OOM_POD, others=(CO_TENANT,))  # before its retry's pod exists
    assert (again.place_attempt, again.store_first, again.out_of_memory) == (1, False, "")
    assert again.status[oom.RECOVERIES] == 1
    running = _decide(job, OOM_POD, PodBuilder("cnn", 1).on("gpu-node-0", 1).bound().phase("Running"))
    assert running.status["phase"] == "Running"
    assert (running.status[oom.RECOVERIES], _condition(running.status, oom.CONDITION)["status"]) == (
        1,
        "True",
    )


def test_a_second_oom_alone_counts_against_backoff_limit() -> None:
    second = PodBuilder("cnn", 1).on("gpu-node-0", 1).bound().failed(TORCH, finished="2026-12-02T10:09:00Z")
    failed = _decide(_recovered(backoff_limit=0), OOM_POD, second)
    assert _condition(failed.status, "Failed")["reason"] == "BackoffLimitExceeded"
    assert "1 failures > backoffLimit 0" in failed.status["message"]
    retried = _decide(_recovered(backoff_limit=1), OOM_POD, second)
    assert (retried.place_attempt, retried.status[oom.RECOVERIES]) == (2, 1)
    assert retried.status["message"].startswith("retry 1/1 after pod cnn-1 failed")


class OrderedKube(FakeKube):
    """Says in which order statuses were written and pods created."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
        self.calls.append(f"status {name}")
        return await super().patch_status(namespace, name, status)

    async def create_pod(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        self.calls.append(f"pod {pod['metadata']['name']}")
        return await super().create_pod(pod)


def _cluster() -> OrderedKube:
    """cnn's pod ran out of memory on gpu-node-0 GPU 0 beside bert's, which still runs there."""
    kube = OrderedKube()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=2)
    for name, model in (("cnn", "resnet50"), ("bert", "bert")):
        body = DLJobBuilder.stored(name).model(architecture=model).spec(backoffLimit=0).obj()
        kube.jobs[job_key(body)] = body
    kube.pods["team-a/cnn-0"] = OOM_POD.obj()
    kube.pods["team-a/bert-0"] = CO_TENANT.obj()
    return kube


def _loop(kube: FakeKube, metrics: OperatorMetrics) -> SchedulingLoop:
    believed = TablePredictor(jobs={"resnet50": (0.5, 4000.0), "bert": (0.5, 4000.0)}, pairs={})
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=make_policy("exclusive", predictor=believed),
        resolver=jobspec.WorkloadResolver(
            lambda n: n, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}
        ),
        config=LoopConfig(),
        clock=lambda: NOW,
        metrics=metrics,
    )


def test_the_loop_stores_the_recovery_first_then_places_the_job_alone_with_its_memory_raised() -> None:
    kube, metrics = _cluster(), OperatorMetrics()
    asyncio.run(_settle(_loop(kube, metrics)))
    assert kube.calls.index("status cnn") < kube.calls.index("pod cnn-1")
    retry = kube.pods["team-a/cnn-1"]["metadata"]["annotations"]
    request = json.loads(retry[keys.ANNOTATION_REQUEST])
    assert (request["maxSlowdown"], request["peakMemoryMiB"]) == (1.0, 6000.0)
    assert json.loads(retry[keys.ANNOTATION_PREDICTED])["memoryMiB"] == 6000.0  # placed with it
    assert (retry[keys.ANNOTATION_NODE], retry[keys.ANNOTATION_GPUS]) == ("gpu-node-0", "1")  # not bert's
    assert "team-a/bert-0" in kube.pods and kube.creates == 1  # the co-tenant is not moved
    status = kube.jobs["team-a/cnn"]["status"]
    assert (status["phase"], status[oom.RECOVERIES]) == ("Scheduled", 1)
    assert [reason for name, reason, _ in kube.events if name == "cnn"] == [oom.REASON, "Placed"]
    assert metrics.registry.get_sample_value("horus_oom_recoveries_total") == 1.0

    restarted = OperatorMetrics()  # a restarted operator: nothing forgiven, placed or told twice
    asyncio.run(_settle(_loop(kube, restarted)))
    assert kube.creates == 1 and kube.jobs["team-a/cnn"]["status"][oom.RECOVERIES] == 1
    assert [reason for name, reason, _ in kube.events if name == "cnn"] == [oom.REASON, "Placed"]
    assert restarted.registry.get_sample_value("horus_oom_recoveries_total") == 0.0
