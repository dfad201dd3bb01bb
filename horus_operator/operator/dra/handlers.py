"""kopf registrations for Dynamic Resource Allocation, imported by `entry.py` only where the API server
serves resource.k8s.io/v1: ResourceClaims (Horus's, for binding; everyone's, as GPUs Horus must not
give) and ResourceSlices (the GPU inventory NVIDIA's DRA driver publishes) feed the cache."""

from __future__ import annotations

import kopf

from horus_operator.api import keys
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.handlers import CacheUpdate, mirror

# Each watched DRA resource: its plural, the handler id (kopf names a handler by its id in logs), and
# the cache's put and drop for its objects.
WATCHED: tuple[tuple[str, str, CacheUpdate, CacheUpdate], ...] = (
    ("resourceclaims", "claim_changed", ClusterCache.put_claim, ClusterCache.drop_claim),
    ("resourceslices", "slice_changed", ClusterCache.put_slice, ClusterCache.drop_slice),
)


for plural, handler_id, put, drop in WATCHED:
    kopf.on.event(keys.DRA_GROUP, keys.DRA_VERSION, plural, id=handler_id)(mirror(put, drop))
