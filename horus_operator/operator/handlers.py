"""kopf registrations: watches feed the cache; the scheduling loop and the lease run as background tasks.

Only `on.event` handlers are used: they keep no progress annotations on the objects, so the operator never
writes to a DLJob except its status (re-applying a DLJob's YAML changes nothing).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from horus_operator.operator import keys, runtime


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.scanning.disabled = True  # no cluster-wide CRD listing: the resources are known
    settings.posting.level = logging.WARNING  # Horus posts its own Events
    # One "Handler succeeded" line per watch event would drown the log (and cost CPU in a burst).
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.label_selectors["pods"] = f"{keys.LABEL_MANAGED_BY}={keys.MANAGER}"
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    memo.runtime = runtime.build(memo.config)  # handed over by entry.run
    memo.runtime.start()


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.runtime.stop()


@kopf.on.event(keys.GROUP, keys.VERSION, keys.PLURAL)
def dljob_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    body = event["object"]
    if event["type"] == "DELETED":
        memo.runtime.cache.drop_job(body)
    else:
        memo.runtime.cache.put_job(body)


@kopf.on.event("", "v1", "pods", labels={keys.LABEL_JOB: kopf.PRESENT})
def pod_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    if event["type"] == "DELETED":
        memo.runtime.cache.drop_pod(event["object"])
    else:
        memo.runtime.cache.put_pod(event["object"])


@kopf.on.event("", "v1", "nodes")
def node_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    if event["type"] == "DELETED":
        memo.runtime.cache.drop_node(event["object"])
    else:
        memo.runtime.cache.put_node(event["object"])


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
