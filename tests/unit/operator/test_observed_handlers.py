"""The GPUNode handler with the operator's own API adapter (`Kube`) and dataset store replaced by
recorders, on a fixed clock: what it writes to DLJob statuses and the dataset as two jobs run alone,
then share a GPU."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import kopf

from horus_operator.agent.gpunode import rfc3339
from horus_operator.operator import keys, observed_handlers, pods
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.observed import Chunk
from horus_operator.operator.observing import ObservedTelemetry, Recorder
from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.testing.builders import DLJobBuilder


class RecordingKube:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.patches.append((name, status))
        job = self.cache.jobs[f"{namespace}/{name}"]  # as the watch event would bring it back
        job.setdefault("status", {}).update(status)

    async def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class RecordingStore:
    def __init__(self) -> None:
        self.rows: list[tuple[tuple[str, ...], str]] = []

    def load(self) -> tuple[Chunk, ...]:
        return ()

    def record(self, row: tuple[str, ...], pair: str) -> bool:
        self.rows.append((row, pair))
        return True


def pod(job: str, model: str, batch: int, precision: str = "fp32") -> dict[str, Any]:
    request = JobRequest(
        key=f"ns/{job}", workload=Workload(model=model, batch_size=batch, precision=precision)
    )
    return {
        "metadata": {
            "namespace": "ns",
            "name": f"{job}-0",
            "labels": {keys.LABEL_JOB: job},
            "annotations": {keys.ANNOTATION_REQUEST: json.dumps(pods.encode_request(request))},
        },
        "status": {"phase": "Running"},
    }


def gpunode(now: float, *jobs_and_rates: tuple[str, float]) -> dict[str, Any]:
    entries = [{"namespace": "ns", "name": f"{j}-0", "uid": f"p-{j}", "job": j, "utilization": 0.5,
                "memoryMiB": 1000, "stepsPerSecond": rate} for j, rate in jobs_and_rates]  # fmt: skip
    return {
        "metadata": {"name": "gpu-node-0"},
        "status": {
            "lastUpdate": rfc3339(now),
            "nvmlAvailable": True,
            "gpus": [{"index": 0, "pods": entries}],
        },
    }


def node() -> dict[str, Any]:
    labels = {
        keys.LABEL_GPU_PRODUCT: "Tesla-V100-SXM2-16GB",
        keys.LABEL_GPU_COUNT: "1",
        keys.LABEL_GPU_MEMORY: "16384",
    }
    return {"metadata": {"name": "gpu-node-0", "labels": labels}}


def _share(
    precision_a: str = "fp32", published_ago: float = 0.0
) -> tuple[ClusterCache, RecordingKube, RecordingStore]:
    """Jobs a (resnet50/64 at `precision_a`) and b (lstm/20) run alone, then share gpu-node-0's GPU; the
    agent publishes `published_ago` seconds before the handler's clock."""
    cache = ClusterCache()
    cache.put_node(node())
    for name, model, batch, precision in (("a", "resnet50", 64, precision_a), ("b", "lstm", 20, "fp32")):
        cache.put_job(DLJobBuilder.stored(name, "ns").obj())
        cache.put_pod(pod(name, model, batch, precision))
    kube = RecordingKube(cache)
    store = RecordingStore()
    leading = asyncio.Event()
    leading.set()
    clock = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    observing = ObservedTelemetry(
        cache=cache,
        kube=kube,  # type: ignore[arg-type]
        recorder=Recorder(store),  # type: ignore[arg-type]
        leading=leading,
        telemetry_ttl_seconds=60.0,
        clock=lambda: clock,
    )
    memo = kopf.Memo(runtime=SimpleNamespace(observing=observing))
    now = clock.timestamp() - published_ago

    async def publish(*jobs_and_rates: tuple[str, float]) -> None:
        event = {"type": "MODIFIED", "object": gpunode(now, *jobs_and_rates)}
        await observed_handlers.gpunode_changed(event=event, memo=memo)

    async def scenario() -> None:
        await publish(("a", 12.0))
        await publish(("b", 5.0))
        await publish(("a", 12.0), ("b", 5.0))  # they now share; the annotations still hold the alone rates
        await publish(("a", 8.0), ("b", 4.0))  # the jobs report their shared rates
        await publish(("a", 8.0), ("b", 4.0))  # unchanged: no write, no second row

    asyncio.run(scenario())
    return cache, kube, store


def test_alone_then_shared_rates_fill_both_statuses_and_record_the_pair_once() -> None:
    cache, kube, store = _share()
    a_observed = cache.jobs["ns/a"]["status"]["observed"]
    assert (a_observed["aloneStepsPerSecond"], a_observed["slowdown"], a_observed["sharingWith"]) == (
        12.0,
        1.5,
        ["ns/b"],
    )
    assert cache.jobs["ns/b"]["status"]["observed"]["slowdown"] == 1.25
    assert len(kube.patches) == 6  # a alone, b alone, then each twice: co-tenant arrives, new rate reported
    assert store.rows == [(("v100", "lstm", "20", "resnet50", "64", "5", "12", "4", "8"), "uid-a+uid-b")]
    assert "gpu-node-0" in cache.gpunodes


def test_a_mixed_precision_job_is_observed_but_its_pair_not_recorded() -> None:
    """The dataset has no precision column: an amp job's rates would be read as fp32 measurements."""
    cache, _kube, store = _share(precision_a="amp")
    assert cache.jobs["ns/a"]["status"]["observed"]["slowdown"] == 1.5
    assert store.rows == []


def test_telemetry_older_than_the_ttl_is_cached_but_writes_nothing() -> None:
    cache, kube, store = _share(published_ago=120.0)  # the TTL is 60 s
    assert (kube.patches, store.rows) == ([], [])
    assert "gpu-node-0" in cache.gpunodes
