"""kopf registration for the telemetry loop: GPUNode watch events feed the cluster view (placement sees
UUIDs, health and observed usage) and, on the leader, each DLJob's `status.observed` and the observed
co-location dataset (`updates.py`). Imported by `entry.py`."""

from __future__ import annotations

from typing import Any

import kopf

from horus_operator.api import keys
from horus_operator.operator.telemetry.updates import ObservedTelemetry


@kopf.on.event(keys.GROUP, keys.VERSION, keys.GPUNODE_PLURAL)
async def gpunode_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    observing: ObservedTelemetry = memo.runtime.observing
    await observing.gpunode_changed(str(event["type"]), event["object"])
