"""kopf registrations for Dynamic Resource Allocation, imported by `entry.py` only where the API server
serves resource.k8s.io/v1: ResourceClaims (Horus's, for binding; everyone's, as GPUs Horus must not
give) and ResourceSlices (the GPU inventory NVIDIA's DRA driver publishes) feed the cache."""

from __future__ import annotations

from typing import Any

import kopf

from horus_operator.operator import keys


@kopf.on.event(keys.DRA_GROUP, keys.DRA_VERSION, "resourceclaims")
def claim_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    if event["type"] == "DELETED":
        memo.runtime.cache.drop_claim(event["object"])
    else:
        memo.runtime.cache.put_claim(event["object"])


@kopf.on.event(keys.DRA_GROUP, keys.DRA_VERSION, "resourceslices")
def slice_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    if event["type"] == "DELETED":
        memo.runtime.cache.drop_slice(event["object"])
    else:
        memo.runtime.cache.put_slice(event["object"])
