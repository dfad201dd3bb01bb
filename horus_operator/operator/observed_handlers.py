"""kopf registrations for the telemetry loop: GPUNode watch events feed the cluster view (placement
sees UUIDs, health and observed usage) and, on the leader, update each DLJob's `status.observed` and
append observed co-locations to the dataset (see `observed.py`). Imported by `handlers.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from horus_operator.operator import cluster_view, observed, telemetry
from horus_operator.operator.observed_store import ObservationStore
from horus_operator.prediction.gpus import DEFAULT_PRECISION

log = logging.getLogger(__name__)


@kopf.on.event(telemetry.GROUP, telemetry.VERSION, telemetry.PLURAL)
async def gpunode_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    body = event["object"]
    runtime = memo.runtime
    if event["type"] == "DELETED":
        runtime.cache.drop_gpunode(body)
        return
    runtime.cache.put_gpunode(body)
    if not runtime.elector.leading.is_set():
        return
    recorder = memo.get("observations")
    if recorder is None:
        recorder = memo.observations = Recorder(
            ObservationStore(runtime.kube, runtime.config.lease_namespace)
        )
    try:
        await _update_jobs(runtime, recorder, body, datetime.now(UTC))
    except Exception as error:  # telemetry is best effort: never let it disturb the watch
        log.warning("observed status from GPUNode %s not updated: %s", body["metadata"]["name"], error)


class Recorder:
    """Appends co-location rows, remembering which pairs are stored to skip re-reading the ConfigMaps."""

    def __init__(self, store: ObservationStore) -> None:
        self.store = store
        self._recorded: set[str] | None = None

    def record(self, row: tuple[str, ...], pair: str) -> None:
        """Blocking: call from a worker thread."""
        if self._recorded is None:
            self._recorded = {p for chunk in self.store.load() for p in chunk.pairs}
        if pair in self._recorded:
            return
        if self.store.record(row, pair):
            log.info("observed co-location recorded: %s", ",".join(row))
        self._recorded.add(pair)


async def _update_jobs(runtime: Any, recorder: Recorder, gpunode: Mapping[str, Any], now: datetime) -> None:
    if not telemetry.parse(gpunode).fresh(now.timestamp(), runtime.config.telemetry_ttl_seconds):
        return
    gpu_type = _gpu_type(runtime.cache.nodes.get(gpunode["metadata"]["name"]))
    updated: dict[str, Mapping[str, Any]] = {}
    for key, observation in observed.observe_jobs(observed.pods_on_gpus(gpunode)).items():
        job = runtime.cache.jobs.get(key)
        if job is None:
            continue
        previous = (job.get("status") or {}).get("observed") or {}
        new = observed.observed_status(observation, previous, gpu_type=gpu_type, now=now)
        updated[key] = new
        if observed.changed(new, previous):
            meta = job["metadata"]
            stored = await runtime.kube.patch_status(meta["namespace"], meta["name"], {"observed": new})
            if stored is not None:  # the scheduling loop compares against the cache: keep it current
                runtime.cache.jobs[key] = stored
    for key, new in updated.items():
        for cotenant in new.get("sharedRuns") or {}:
            await _record_pair(runtime, recorder, key, new, cotenant, updated)


async def _record_pair(
    runtime: Any,
    recorder: Recorder,
    key: str,
    own: Mapping[str, Any],
    cotenant: str,
    updated: Mapping[str, Mapping[str, Any]],
) -> None:
    other = updated.get(cotenant) or _observed_of(runtime.cache.jobs.get(cotenant))
    side_a = _side(runtime, key, own, cotenant)
    side_b = _side(runtime, cotenant, other, key)
    if side_a is None or side_b is None:
        return
    row = observed.colocation_row(observed.pair_gpu(own, cotenant), side_a, side_b)
    await runtime.kube.call(recorder.record, row, observed.pair_id(side_a, side_b))


def _side(runtime: Any, key: str, own: Mapping[str, Any], cotenant: str) -> observed.PairSide | None:
    job = runtime.cache.jobs.get(key)
    requests = [p.request for p in runtime.cache.pods.get(key, {}).values() if p.request is not None]
    if job is None or not requests or requests[0].workload.features is not None:
        return None  # a job described by its own graph has no model name the CSV could carry
    workload = requests[0].workload
    if workload.precision != DEFAULT_PRECISION:
        return None  # the CSV has no precision column: its rows are read as fp32 measurements
    return observed.pair_side(
        own,
        cotenant,
        uid=job["metadata"].get("uid", key),
        model=workload.model,
        batch_size=workload.batch_size,
    )


def _observed_of(job: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((job or {}).get("status") or {}).get("observed") or {}


def _gpu_type(node: Mapping[str, Any] | None) -> str:
    view = cluster_view.gpu_node(node) if node else None
    return view.gpus[0].product if view and view.gpus else ""
