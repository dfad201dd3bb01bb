"""Preemption in the operator under `--queue-order las`, against `FakeKube`: the shared cycle's plan is
recorded in the preempted job's status (with its attained GPU-service) before its pod is deleted with its
grace period; its GPU stays held while the pod stops; then the job it was preempted for starts there and
the preempted one waits in the queue behind it. A restart at any step resumes; fifo never preempts, and
an entry the operator could not have written stops nothing. The status fields alone (`preemption.py`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from operator_builders import FakeKube, PodBuilder, gpu_node
from test_operator_loop import NOW, FirstFreeGpu, _catalog, _settle

from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.jobs.pods import view
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves import preemption
from horus_operator.placement.preemption import Preemption, PreemptionSettings
from horus_operator.placement.queueorder import Ordering, QueueOrder
from horus_operator.placement.types import RunningJob
from horus_operator.testing.builders import DLJobBuilder

TWO_HOURS_AGO = "2026-12-02T08:00:00Z"


def _loop(
    kube: FakeKube, order: QueueOrder = QueueOrder.LAS, metrics: OperatorMetrics | None = None
) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=FirstFreeGpu(),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(ordering=Ordering(order), preemption=PreemptionSettings()),
        clock=lambda: NOW,
        metrics=metrics,
    )


def _one_gpu_taken() -> FakeKube:
    """`old` has run on the only GPU for two hours (level 1); `new` has just arrived."""
    kube = FakeKube()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=1)
    for name in ("old", "new"):
        body = DLJobBuilder.stored(name).obj()
        kube.jobs[job_key(body)] = body
    pod = PodBuilder("old").on("gpu-node-0", 0).bound().phase("Running").started(TWO_HOURS_AGO).obj()
    kube.pods[job_key(pod)] = pod
    return kube


def _status(kube: FakeKube, name: str) -> dict[str, Any]:
    return kube.jobs[f"team-a/{name}"].get("status") or {}


def test_a_job_of_more_attained_service_is_preempted_for_a_new_one_and_queues_behind_it() -> None:
    kube = _one_gpu_taken()
    metrics = OperatorMetrics()
    loop = _loop(kube, metrics=metrics)
    asyncio.run(_settle(loop))

    assert metrics.registry.get_sample_value("horus_preemptions_total") == 1.0
    old = _status(kube, "old")
    (entry,) = old["preemptions"]
    assert {k: entry[k] for k in ("for", "attempt", "state")} == {
        "for": "team-a/new",
        "attempt": 0,
        "state": "Preempting",
    }
    assert old["attainedGpuSeconds"] == 7200.0  # one GPU for two hours
    assert kube.graceful == [("old-0", 30)]
    assert sorted(kube.pods) == ["team-a/old-0"], "nothing starts on the GPU while the old pod stops"
    assert old["phase"] == "Queued" and "preempted" in old["message"]
    scheduled = next(c for c in old["conditions"] if c["type"] == "Scheduled")
    assert scheduled["reason"] == "Preempted"

    kube.stop_deleting()
    asyncio.run(_settle(loop))
    assert sorted(kube.pods) == ["team-a/new-0"]
    old = _status(kube, "old")
    assert old["phase"] == "Queued" and old["attainedGpuSeconds"] == 7200.0
    assert old["queue"]["reason"] == "least attained service first: level 1"
    said = [(reason, message) for name, reason, message in kube.events if name == "old"]
    assert said[0][0] == "Preempted" and said[0][1].startswith(
        "preempted: least attained service: team-a/new"
    )


def test_a_restarted_operator_stops_the_pod_of_a_preemption_it_recorded() -> None:
    kube = _one_gpu_taken()
    recorded = {"for": "team-a/new", "reason": "r", "at": "2026-12-02T09:59:00Z", "attempt": 0}
    kube.jobs["team-a/old"]["status"] = {"preemptions": [{**recorded, "state": "Preempting"}]}
    asyncio.run(_settle(_loop(kube), cycles=1))
    assert kube.graceful == [("old-0", 30)]


def test_fifo_never_preempts_and_an_entry_stops_nothing_there() -> None:
    kube = _one_gpu_taken()
    asyncio.run(_settle(_loop(kube, QueueOrder.FIFO)))
    assert kube.graceful == [] and "preemptions" not in _status(kube, "old")
    entry = {"for": "team-a/new", "reason": "r", "at": "2026-12-02T09:59:00Z", "attempt": 0}
    kube.jobs["team-a/old"]["status"] = {"preemptions": [{**entry, "state": "Preempting"}]}
    asyncio.run(_settle(_loop(kube, QueueOrder.FIFO)))
    assert kube.graceful == []


def test_attained_service_is_the_stopped_runs_plus_the_running_pod() -> None:
    """Level-triggered: recomputed from the status and the pod alone, so a restart loses nothing."""
    pod = view(
        PodBuilder("job", attempt=2).on("gpu-node-0", 0, 1).phase("Running").started(TWO_HOURS_AGO).obj()
    )
    status = {"attainedGpuSeconds": 1000.0, "preemptions": [{"attempt": 0}, {"attempt": 1}]}
    service = preemption.service(status, pod, NOW, 45)
    assert service.attained_gpu_s == 1000.0 + 2 * 7200.0  # two GPUs for two hours
    assert service.grace_period_s == 45.0
    assert service.running_since == (NOW - timedelta(hours=2)).timestamp()
    assert service.preemptions == 2
    assert preemption.attained_gpu_s(status) == 1000.0  # while it waits: its stopped runs
    assert preemption.next_attempt(status) == 2
    assert preemption.attained_gpu_s({"attainedGpuSeconds": "a lot"}) == 0.0


def test_a_recorded_preemption_adds_the_run_and_settles_once_a_newer_pod_exists() -> None:
    running = view(PodBuilder("job").phase("Running").started(TWO_HOURS_AGO).obj())
    target = RunningJob(running.request, "gpu-node-0", (0,))  # type: ignore[arg-type]
    chosen = Preemption("team-a/job", "gpu-node-0", (0,), target, "level 1 > level 0")
    fields = preemption.recorded({"attainedGpuSeconds": 10.0}, chosen, running, NOW)
    assert fields["attainedGpuSeconds"] == 10.0 + 7200.0
    assert fields["preemptions"][-1]["state"] == "Preempting"
    assert preemption.in_progress(fields, [running]) == running
    assert preemption.queued_at(fields) == NOW.timestamp()
    newer = view(PodBuilder("job", attempt=1).obj())
    settled = preemption.settled(fields, [running, newer])
    assert settled["preemptions"][-1]["state"] == "Preempted"
    assert preemption.in_progress(settled, [running, newer]) is None
