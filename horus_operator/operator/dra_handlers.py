"""kopf registrations for Dynamic Resource Allocation, imported by `entry.py` only where the API server
serves resource.k8s.io/v1: ResourceClaims (Horus's, for binding; everyone's, as GPUs Horus must not
give) and ResourceSlices (the GPU inventory NVIDIA's DRA driver publishes) feed the cache."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import kopf

from horus_operator.operator import keys
from horus_operator.operator.cache import ClusterCache

CacheUpdate = Callable[[ClusterCache, Mapping[str, Any]], None]

# Each watched DRA resource: its plural, the handler id (kopf names a handler by its id in logs), and
# the cache's put and drop for its objects.
WATCHED: tuple[tuple[str, str, CacheUpdate, CacheUpdate], ...] = (
    ("resourceclaims", "claim_changed", ClusterCache.put_claim, ClusterCache.drop_claim),
    ("resourceslices", "slice_changed", ClusterCache.put_slice, ClusterCache.drop_slice),
)


def mirror(put: CacheUpdate, drop: CacheUpdate) -> Callable[..., None]:
    """An `on.event` handler keeping the cache's copy of one kind: drop it once deleted, else put it."""

    def changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        update = drop if event["type"] == "DELETED" else put
        update(memo.runtime.cache, event["object"])

    return changed


for plural, handler_id, put, drop in WATCHED:
    kopf.on.event(keys.DRA_GROUP, keys.DRA_VERSION, plural, id=handler_id)(mirror(put, drop))
