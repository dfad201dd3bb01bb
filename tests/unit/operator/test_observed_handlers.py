"""The GPUNode handler with the operator's own API adapter (`Kube`) and dataset store replaced by
recorders, on a fixed clock: what it writes to DLJob statuses and the dataset as two jobs run alone,
then share a GPU."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import kopf

from horus_operator.agent.gpunode import rfc3339
from horus_operator.api import keys
from horus_operator.api.defaults import SETTLED_S
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods
from horus_operator.operator.reports import Reporter
from horus_operator.operator.telemetry import handlers
from horus_operator.operator.telemetry.learning import Learning
from horus_operator.operator.telemetry.observed import Chunk
from horus_operator.operator.telemetry.updates import ObservedTelemetry, Recorder
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.testing.builders import DLJobBuilder

CREATED = "2026-12-02T09:00:00Z"  # the pods' creation, before everything the agent publishes


class RecordingKube:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.patches.append((name, status))
        job = self.cache.jobs[f"{namespace}/{name}"]  # as the watch event would bring it back
        job.setdefault("status", {}).update(status)

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


class RecordingStore:
    def __init__(self) -> None:
        self.rows: list[tuple[tuple[str, ...], str]] = []

    def load(self) -> tuple[Chunk, ...]:
        return ()

    def record(self, row: tuple[str, ...], pair: str) -> bool:
        self.rows.append((row, pair))
        return True


RESNET, LSTM = Workload("resnet50", 64), Workload("lstm", 20)


def pod(job: str, workload: Workload) -> dict[str, Any]:
    request = JobRequest(key=f"ns/{job}", workload=workload)
    return {
        "metadata": {
            "namespace": "ns",
            "name": f"{job}-0",
            "uid": f"p-{job}",
            "creationTimestamp": CREATED,
            "labels": {keys.LABEL_JOB: job},
            "ownerReferences": [pods.owner_reference(job, f"uid-{job}")],
            "annotations": {keys.ANNOTATION_REQUEST: json.dumps(pods.encode_request(request))},
        },
        "status": {"phase": "Running"},
    }


def gpunode(now: float, *jobs_and_rates: tuple[str, float], healthy: bool = True) -> dict[str, Any]:
    entries = [{"namespace": "ns", "name": f"{j}-0", "uid": f"p-{j}", "job": j, "utilization": 0.5,
                "memoryMiB": 1000, "stepsPerSecond": rate} for j, rate in jobs_and_rates]  # fmt: skip
    return {
        "metadata": {"name": "gpu-node-0"},
        "status": {
            "lastUpdate": rfc3339(now),
            "nvmlAvailable": True,
            "gpus": [{"index": 0, "healthy": healthy, "pods": entries}],
        },
    }


def node() -> dict[str, Any]:
    labels = {
        keys.LABEL_GPU_PRODUCT: "Tesla-V100-SXM2-16GB",
        keys.LABEL_GPU_COUNT: "1",
        keys.LABEL_GPU_MEMORY: "16384",
    }
    return {"metadata": {"name": "gpu-node-0", "labels": labels}}


Publish = Callable[..., Awaitable[None]]


def _telemetry(
    jobs: list[tuple[str, Workload]],
    *,
    published_ago: float = 0.0,
    learning: Learning | None = None,
    healthy: bool = True,
) -> tuple[ClusterCache, RecordingKube, RecordingStore, Publish]:
    """The handler on `jobs` (name, what it trains), all with pods on gpu-node-0; `publish`
    sends one GPUNode event, the agent publishing `published_ago` seconds before the handler's clock."""
    cache = ClusterCache()
    cache.put_node(node())
    for name, workload in jobs:
        cache.put_job(DLJobBuilder.stored(name, "ns").obj())
        cache.put_pod(pod(name, workload))
    kube = RecordingKube(cache)
    store = RecordingStore()
    leading = asyncio.Event()
    leading.set()
    clock = [datetime(2026, 12, 2, 10, 0, tzinfo=UTC)]  # `publish(..., after_s=…)` moves it on
    observing = ObservedTelemetry(
        cache=cache,
        kube=kube,  # type: ignore[arg-type]
        recorder=Recorder(store),  # type: ignore[arg-type]
        reports=Reporter(kube=kube, cache=cache, concurrency=4),  # type: ignore[arg-type]
        leading=leading,
        telemetry_ttl_seconds=60.0,
        clock=lambda: clock[0],
        learning=learning,
    )
    memo = kopf.Memo(runtime=SimpleNamespace(observing=observing))

    async def publish(*jobs_and_rates: tuple[str, float], after_s: float = 0.0) -> None:
        clock[0] += timedelta(seconds=after_s)
        now = clock[0].timestamp() - published_ago
        event = {"type": "MODIFIED", "object": gpunode(now, *jobs_and_rates, healthy=healthy)}
        await handlers.gpunode_changed(event=event, memo=memo)

    return cache, kube, store, publish


def _share(
    a: Workload = RESNET,
    published_ago: float = 0.0,
    *,
    learning: Learning | None = None,
    healthy: bool = True,
) -> tuple[ClusterCache, RecordingKube, RecordingStore]:
    """Jobs a (`a`: resnet50/64) and b (lstm/20) run alone, then share gpu-node-0's GPU."""
    jobs = [("a", a), ("b", LSTM)]
    cache, kube, store, publish = _telemetry(
        jobs, published_ago=published_ago, learning=learning, healthy=healthy
    )

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
    cache, _kube, store = _share(dataclasses.replace(RESNET, precision="amp"))
    assert cache.jobs["ns/a"]["status"]["observed"]["slowdown"] == 1.5
    assert store.rows == []


def test_a_tensorflow_job_is_observed_but_its_pair_not_recorded() -> None:
    """The dataset has no framework column: its rows are read as PyTorch jobs' (Gavel's are)."""
    cache, _kube, store = _share(dataclasses.replace(RESNET, framework="tensorflow"))
    assert cache.jobs["ns/a"]["status"]["observed"]["slowdown"] == 1.5
    assert store.rows == []


def test_telemetry_older_than_the_ttl_is_cached_but_writes_nothing() -> None:
    cache, kube, store = _share(published_ago=120.0)  # the TTL is 60 s
    assert (kube.patches, store.rows) == ([], [])
    assert "gpu-node-0" in cache.gpunodes


class SavedCorrection:
    """Stands in for `learning.CorrectionStore`: keeps what was saved."""

    def __init__(self) -> None:
        self.saves: list[tuple[dict[str, Any], bool]] = []

    def load(self) -> dict[str, Any] | None:
        return self.saves[-1][0] if self.saves else None

    def save(self, state: dict[str, Any], *, exists: bool) -> None:
        self.saves.append((state, exists))


def _learning() -> tuple[Learning, SavedCorrection]:
    prior = TablePredictor({}, {("resnet50", "lstm"): (1.2, 1.1)})
    saved = SavedCorrection()
    learning = Learning(CorrectedPredictor(prior), RecordingKube(ClusterCache()), saved, prior_id="m1")  # type: ignore[arg-type]
    return learning, saved


def test_observed_slowdowns_next_to_a_co_tenant_correct_the_next_prediction_and_are_saved() -> None:
    learning, saved = _learning()

    _share(learning=learning)

    a, b = Workload("resnet50", 64), Workload("lstm", 20)
    corrected = learning.predictor.slowdowns("v100", [a, b])
    assert corrected is not None and corrected[0] > 1.2 and corrected[1] > 1.1  # observed 1.5 and 1.25
    assert [basis.samples for basis in learning.predictor.basis("v100", [a, b])] == [1, 1]
    assert len(saved.saves) == 1 and saved.saves[0][1] is False  # both lessons in one save, a create
    assert {tuple(row[:5]) for row in saved.saves[0][0]["pairs"]} == {
        ("v100", "resnet50", 64, "fp32", ""),
        ("v100", "lstm", 20, "fp32", ""),
    }


def test_nothing_is_learned_from_a_gpu_its_agent_reports_unhealthy() -> None:
    learning, saved = _learning()

    _share(learning=learning, healthy=False)

    assert len(learning.predictor.correction) == 0 and saved.saves == []


def test_a_restarted_leader_restores_what_was_learned_and_ignores_a_state_for_other_models() -> None:
    learning, saved = _learning()
    _share(learning=learning)
    successor, _ = _learning()
    successor.store = saved  # type: ignore[assignment]
    other_models, _ = _learning()
    other_models.store, other_models.prior_id = saved, "m2"  # type: ignore[assignment]

    asyncio.run(successor.restore())
    asyncio.run(other_models.restore())

    a, b = Workload("resnet50", 64), Workload("lstm", 20)
    assert successor.predictor.slowdowns("v100", [a, b]) == learning.predictor.slowdowns("v100", [a, b])
    assert other_models.predictor.slowdowns("v100", [a, b]) == (1.2, 1.1)


def test_a_job_never_alone_is_learned_from_the_rate_alone_of_its_kind() -> None:
    learning, _ = _learning()
    jobs = [("a", RESNET), ("c", RESNET), ("b", LSTM)]
    _cache, _kube, _store, publish = _telemetry(jobs, learning=learning)

    async def scenario() -> None:
        await publish(("a", 12.0))  # a resnet50/64 alone: 12 steps/s
        await publish(("c", 8.0), ("b", 4.0))  # c and b start together: neither was ever alone

    asyncio.run(scenario())

    resnet, lstm = Workload("resnet50", 64), Workload("lstm", 20)
    c_next_to_b, b_next_to_c = learning.predictor.basis("v100", [resnet, lstm])
    # c: 12 / 8 learned; b: no lstm/20 seen alone, so not learned (its 1 is the GPU level's: c's sample)
    assert (c_next_to_b.samples, b_next_to_c.samples) == (1, 1)
    assert len(learning.predictor.correction) == 3  # the GPU level, c's job and c's pair entries
    assert learning.predictor.correction.alone_rate("v100", resnet) == 12.0


def test_a_job_alone_for_a_minute_gives_its_signature_an_observed_utilization_once() -> None:
    """The agent's reading once the job has run alone a minute (0.5 here) replaces the graph's estimate
    for jobs of its signature on that GPU type, and placements say so (utilizationSource); a first
    reading, whose window may reach back before the pod ran, does not count."""
    learning, saved = _learning()
    _, _, _, publish = _telemetry([("a", RESNET)], learning=learning)
    resnet, unseen = Workload("resnet50", 64), Workload("resnet50", 128)

    async def scenario() -> None:
        await publish(("a", 12.0))
        assert learning.predictor.correction.utilization("v100", resnet) is None
        await publish(("a", 12.0), after_s=SETTLED_S)
        await publish(("a", 12.0), after_s=10.0)  # the same alone period: noted once

    asyncio.run(scenario())
    assert learning.predictor.correction.utilization("v100", resnet) == 0.5
    assert [row[-2] for row in saved.saves[-1][0]["busy"]] == [1], "one sample, and saved"
    assert learning.predictor.utilization_source(resnet, "v100") == "observed"
    assert learning.predictor.utilization_source(unseen, "v100") == "predicted"
    # the memory it held alone (1,000 MiB in every reading) is its signature's peak, and saved
    # (that it wins over the prediction: tests/unit/prediction/test_observed_peak_memory.py)
    assert learning.predictor.correction.peak_memory("v100", resnet) == 1000
    assert saved.saves[-1][0]["peaks"] == [["v100", "resnet50", 64, "fp32", "", "pytorch", 1, 1000.0]]
