"""kopf registrations: watches feed the cache; the scheduling loop and the lease run as background tasks.

Only `on.event` handlers are used: they keep no progress annotations on the objects, so the operator never
writes to a DLJob except its status (re-applying a DLJob's YAML changes nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from horus_operator.api import keys
from horus_operator.operator import runtime
from horus_operator.operator.cache import ClusterCache


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.scanning.disabled = True  # no cluster-wide CRD listing: the resources are known
    settings.posting.level = logging.WARNING  # Horus posts its own Events
    # One "Handler succeeded" line per watch event would drown the log (and cost CPU in a burst).
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if not memo.config.pod_route:
        # Only Horus's own pods; the pod route also watches pods of other controllers (labelled
        # horus.dev/managed), and one watch has one label selector: then every pod, filtered here.
        settings.watching.label_selectors["pods"] = f"{keys.LABEL_MANAGED_BY}={keys.MANAGER}"
    settings.watching.server_timeout = 300
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.networking.request_timeout = 60
    memo.runtime = runtime.build(memo.config)  # handed over by entry.run
    memo.runtime.start()


class NoDiffBase(kopf.DiffBaseStorage):
    """Keeps no last-handled state: `on.event` handlers read no diff. kopf's own storage deep-copies every
    event's body to compute one (6 % of the operator's CPU in `bench/scale.py`'s profile). Only while
    Horus registers no change-detecting handler (`on.create`/`update`/`resume`, daemons, timers): a unit
    test checks that none is."""

    def build(self, *, body: kopf.Body, extra_fields: object = None) -> kopf.BodyEssence:
        return {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.runtime.stop()


CacheUpdate = Callable[[ClusterCache, Mapping[str, Any]], object]


def mirror(put: CacheUpdate, drop: CacheUpdate) -> Callable[..., Awaitable[None]]:
    """An `on.event` handler keeping the cache's copy of one kind: drop it once deleted, else put it.

    A coroutine on purpose: kopf runs a plain function in a thread pool, where a put raced the loop's
    resync (`ClusterCache.replace_all` read the watched versions, the thread then wrote its newer copy,
    the resync cleared it and wrote the listing's older one back: a pod that had finished stayed Running
    in the cache for good) and set the loop's `asyncio.Event` from a foreign thread. On the loop, every
    put and drop happens between the loop's own steps."""

    async def changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        update = drop if event["type"] == "DELETED" else put
        update(memo.runtime.cache, event["object"])

    return changed


kopf.on.event(keys.GROUP, keys.VERSION, keys.PLURAL, id="dljob_changed")(
    mirror(ClusterCache.put_job, ClusterCache.drop_job)
)
kopf.on.event("", "v1", "pods", labels={keys.LABEL_JOB: kopf.PRESENT}, id="pod_changed")(
    mirror(ClusterCache.put_pod, ClusterCache.drop_pod)
)
kopf.on.event("", "v1", "pods", labels={keys.LABEL_RESERVATION_NODE: kopf.PRESENT}, id="reservation_changed")(
    mirror(ClusterCache.put_reservation, ClusterCache.drop_reservation)
)
kopf.on.event("", "v1", "nodes", id="node_changed")(mirror(ClusterCache.put_node, ClusterCache.drop_node))
kopf.on.event("", "v1", "persistentvolumeclaims", id="volume_claim_changed")(
    mirror(ClusterCache.put_volume_claim, ClusterCache.drop_volume_claim)
)


@kopf.on.probe(id="scheduling")
def scheduling_alive(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """Liveness: fails (raises) when a background task died, so the kubelet restarts the pod. A replica
    that does not lead is alive (a standby must not be restarted); the body says why it does not lead."""
    rt = memo.runtime
    dead = [task.get_name() for task in rt.tasks if task.done()]
    if dead:
        raise RuntimeError(f"background task stopped: {', '.join(dead)}")
    return {
        "leading": rt.elector.leading.is_set(),
        "notLeading": rt.elector.not_leading,
        "jobs": len(rt.cache.jobs),
    }
