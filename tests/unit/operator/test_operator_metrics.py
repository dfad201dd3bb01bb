"""The operator's /metrics (`operator/metrics.py`): what the loop, the elector, the API adapter and the
online correction count, each test on a fresh registry of its own."""

from __future__ import annotations

import asyncio
import math
from typing import Any, NoReturn

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from operator_builders import FakeKube, PodBuilder, gpu_node
from prometheus_client import CollectorRegistry, generate_latest
from test_learning import ConfigMaps, _observation
from test_operator_leader import Clock
from test_operator_leader import FakeKube as LeaseKube
from test_operator_loop import NOW, FirstFreeGpu, _catalog

from horus_operator.operator import kube, metrics
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.jobs.pods import view
from horus_operator.operator.leader import LeaderElector, LeaseConfig
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.telemetry.learning import CorrectionStore, Learning
from horus_operator.placement.fake import TablePredictor
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.prediction.timeslicing import time_sliced
from horus_operator.testing.builders import DLJobBuilder


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def _loop_with(kube_: FakeKube, counted: OperatorMetrics) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube_,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=FirstFreeGpu(),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(),
        clock=lambda: NOW,
        metrics=counted,
    )


def test_a_loop_counts_its_placements_cycles_and_the_jobs_left_waiting() -> None:
    fake = FakeKube()
    fake.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=2)
    for i in range(3):
        body = DLJobBuilder.stored(f"job-{i}").obj()
        fake.jobs[job_key(body)] = body
    bad = DLJobBuilder.stored("bad").model(name="nosuchnet", batchSize=32).obj()
    fake.jobs[job_key(bad)] = bad
    counted = OperatorMetrics(refresh_every=0)
    loop = _loop_with(fake, counted)

    async def run() -> None:
        await loop.resync()
        for _ in range(3):
            await loop.cycle()
            await loop.settle()

    asyncio.run(run())
    r = counted.registry
    assert _value(r, "horus_placements_total", binding="env") == 2
    assert _value(r, "horus_refusals_total", reason=metrics.INVALID_SPEC) == 1
    assert _value(r, "horus_cycle_duration_seconds_count") == 3
    assert _value(r, "horus_decision_duration_seconds_count") >= 1
    # One job waits: the policy said no GPU fits ("waiting: no free GPU").
    assert _value(r, "horus_dljobs_pending", reason=metrics.NO_FIT) == 1
    assert _value(r, "horus_dljobs_pending", reason=metrics.QUEUED) == 0
    assert _value(r, "horus_dljobs", phase="Scheduled") == 2
    assert _value(r, "horus_dljobs", phase="Queued") == 1
    assert _value(r, "horus_dljobs", phase="Failed") == 1
    assert _value(r, "horus_dljobs", phase="Running") == 0  # every phase is exported, 0 when none
    gpus = [_value(r, name) for name in ("horus_gpus", "horus_gpus_in_use", "horus_gpus_shared")]
    assert gpus == [2, 2, 0]


def test_the_pending_reason_reads_the_loops_and_the_policies_words() -> None:
    reason = metrics.pending_reason
    assert reason("", moving=False) == metrics.QUEUED  # not looked at yet (beyond the explained head)
    assert reason("waiting: an empty GPU fits; jobs ahead in the queue go first", moving=False) == "queued"
    assert reason("waiting: a GPU fits; earlier jobs in the queue go first", moving=False) == "queued"
    assert reason("waiting: memory (3 GPUs); not usable: GPU unhealthy (1 GPU)", moving=False) == "no_fit"
    assert reason("waiting: n0 GPU 1 is in no ResourceSlice of gpu.nvidia.com", moving=False) == "blocked"
    assert reason("waiting: pod ns/p-0 exists and is not this DLJob's", moving=False) == "blocked"
    assert reason("anything", moving=True) == metrics.MOVING


def test_gpus_in_use_and_shared_count_gpus_not_pods() -> None:
    pods = [
        view(PodBuilder("a").on("n0", 0).obj()),
        view(PodBuilder("b").on("n0", 0).obj()),  # shares n0 GPU 0 with a
        view(PodBuilder("c").on("n0", 1, 2).obj()),  # two GPUs alone
        view(PodBuilder("d").on("n1", 0).phase("Succeeded").obj()),  # holds nothing
        view(PodBuilder("e", attempt=1).on("n1", 1).obj()),
        view(PodBuilder("e", attempt=2).on("n1", 1).obj()),  # the same job twice: not shared
    ]
    seen = metrics.gauges(["queued", "queued", "no_fit"], ["Queued"], pods, gpus=8)
    assert (seen.gpus, seen.gpus_in_use, seen.gpus_shared) == (8, 4, 1)
    assert seen.pending == {"queued": 2, "no_fit": 1}


def test_a_standby_exports_no_cluster_gauges() -> None:
    counted = OperatorMetrics(refresh_every=0)
    counted.leading(True)
    counted.refresh(lambda: metrics.gauges(["queued"], ["Queued"], [], gpus=4))
    assert _value(counted.registry, "horus_dljobs_pending", reason="queued") == 1
    counted.leading(False)
    text = generate_latest(counted.registry).decode()
    assert "horus_dljobs_pending{" not in text and 'horus_dljobs{phase="Queued"}' not in text
    assert _value(counted.registry, "horus_leader") == 0
    assert _value(counted.registry, "horus_gpus") == 0


def test_refreshes_are_paced() -> None:
    counted, reads = OperatorMetrics(refresh_every=3600), []

    def read() -> metrics.Gauges:
        reads.append(1)
        return metrics.gauges([], [], [], gpus=1)

    counted.refresh(read)
    counted.refresh(read)
    assert len(reads) == 1


def test_the_leader_gauge_follows_the_lease_and_failed_steps_count_as_retries() -> None:
    lease, clock = LeaseKube(), Clock()
    config = LeaseConfig(namespace="horus-system", identity="a")
    first = OperatorMetrics()
    elector = LeaderElector(lease, config, clock=clock, metrics=first)  # type: ignore[arg-type]
    asyncio.run(elector.step())
    assert _value(first.registry, "horus_leader") == 1
    second = OperatorMetrics()
    other = LeaderElector(
        lease,  # type: ignore[arg-type]
        LeaseConfig(namespace="horus-system", identity="b"),
        clock=clock,
        metrics=second,
    )
    asyncio.run(other.step())
    assert _value(second.registry, "horus_leader") == 0
    lease.failure = kube.apierrors.ApiUnavailable("ConnectionRefusedError")
    asyncio.run(elector.step())
    assert _value(first.registry, "horus_leader") == 0
    assert _value(first.registry, "horus_retries_total", step="lease") == 1


def test_api_errors_are_counted_by_status_code_as_the_adapter_meets_them() -> None:
    class Core:
        def create_namespaced_pod(self, *_: Any, **__: Any) -> NoReturn:
            raise ApiException(status=409, reason="AlreadyExists")

        def read_namespaced_pod(self, *_: Any, **__: Any) -> Any:
            return type("Response", (), {"data": b'{"metadata": {"name": "p"}}'})()

        def list_node(self, *_: Any, **__: Any) -> NoReturn:
            raise ApiException(status=503, reason="Unavailable")

    counted = OperatorMetrics()
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    adapter = kube.Kube(client, workers=1, on_error=counted.api_error)
    adapter._core = Core()  # type: ignore[assignment]
    try:
        asyncio.run(adapter.create_pod({"metadata": {"namespace": "ns", "name": "p"}}))  # 409: a success
        with pytest.raises(kube.apierrors.ApiError):
            asyncio.run(adapter.list_nodes())
    finally:
        adapter.close()
    assert _value(counted.registry, "horus_api_errors_total", code="409") == 1
    assert _value(counted.registry, "horus_api_errors_total", code="503") == 1
    counted.api_error(kube.apierrors.ApiUnavailable("MaxRetryError"))
    assert _value(counted.registry, "horus_api_errors_total", code="unavailable") == 1


def test_each_new_sample_is_counted_and_its_log_ratio_observed_once() -> None:
    maps, counted = ConfigMaps(), OperatorMetrics()
    prior = TablePredictor({}, {("a", "b"): (1.2, 1.2)})
    learning = Learning(
        CorrectedPredictor(prior),
        maps,  # type: ignore[arg-type]
        CorrectionStore(maps, "horus-system"),  # type: ignore[arg-type]
        prior_id="m1",
        metrics=counted,
    )
    asyncio.run(learning.learn([_observation("1", 2.0), _observation("1", 2.0), _observation("x", 99.0)]))
    r = counted.registry
    assert _value(r, "horus_correction_samples_total", gpu="v100", result="learned") == 1
    assert _value(r, "horus_correction_samples_total", gpu="v100", result="refused") == 1  # the absurd one
    assert _value(r, "horus_slowdown_log_ratio_count", gpu="v100") == 2  # not the repeat
    # ln(2.0 / 1.2) = 0.51; the absurd 99x is far above any prediction (ln > 1).
    assert math.log(2.0 / 1.2) < 1.0 < math.log(99.0 / 1.2)
    assert _value(r, "horus_slowdown_log_ratio_bucket", gpu="v100", le="0.5") == 0
    assert _value(r, "horus_slowdown_log_ratio_bucket", gpu="v100", le="1.0") == 1
    # No _sum: a histogram with negative buckets has none (OpenMetrics); quantiles read the buckets.
    assert r.get_sample_value("horus_slowdown_log_ratio_sum", {"gpu": "v100"}) is None


def test_the_log_ratio_compares_with_what_placement_read() -> None:
    """Under --sharing timeslicing placement reads the slowdowns lifted onto the GPU's time: two jobs that
    keep it busy, predicted 1.2x by the model, were placed as 2x each, and observed 2x is no error."""
    maps, counted = ConfigMaps(), OperatorMetrics()
    predictor = CorrectedPredictor(
        TablePredictor({"a": (1.0, 1.0), "b": (1.0, 1.0)}, {("a", "b"): (1.2, 1.2)})
    )
    learning = Learning(
        predictor,
        maps,  # type: ignore[arg-type]
        CorrectionStore(maps, "horus-system"),  # type: ignore[arg-type]
        prior_id="m1",
        metrics=counted,
        placement_reads=time_sliced(predictor),
    )
    asyncio.run(learning.learn([_observation("1", 2.0)]))
    buckets = {
        le: _value(counted.registry, "horus_slowdown_log_ratio_bucket", gpu="v100", le=le)
        for le in ("-0.05", "0.05")
    }
    assert buckets == {"-0.05": 0, "0.05": 1}  # ln(2 / 2), where the model alone gives ln(2 / 1.2) = 0.51


def test_every_metric_follows_prometheus_naming() -> None:
    for family in OperatorMetrics().registry.collect():
        assert family.name.startswith("horus_"), family.name
        if family.type == "histogram":
            assert family.name.endswith(("_seconds", "_ratio")), family.name
        assert not family.name.endswith("_total"), family.name  # the client adds it to counters
