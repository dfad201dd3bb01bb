"""kopf registrations of the pod route, imported by `entry` only when `horus run --webhook-port` turns
it on (kopf refuses admission handlers without a webhook server).

The mutating webhook (`@kopf.on.mutate`, served by this replica whether it leads or not: admission
needs no lease) refuses a pod Horus cannot run and gates the others (`admission.admit`); the manifests'
MutatingWebhookConfiguration says which pods it is asked about and what the API server does when no
replica answers (docs/reliability.md, "The pod webhook"). The watch feeds the managed pods to the
route's store (`route.PodRoute`), as the DLJob handlers feed the cache.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import kopf

from horus_operator.api import keys
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.podroute import admission
from horus_operator.operator.podroute.route import PodRoute

WEBHOOK_ID = "pod-admission"  # the URL path the API server calls: /pod-admission


@kopf.on.startup()
async def serve_webhook(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = memo.config
    settings.admission.server = kopf.WebhookServer(
        addr=config.webhook_addr,
        port=config.webhook_port,
        host=config.webhook_host,
        certfile=config.webhook_cert,
        pkeyfile=config.webhook_key,
    )
    # The MutatingWebhookConfiguration is the platform team's (manifests-pod-route/): its failurePolicy
    # and selectors are their choice, which kopf's managed configuration would overwrite.
    settings.admission.managed = None


@kopf.on.mutate("", "v1", "pods", operations={"CREATE"}, id=WEBHOOK_ID)
async def admit_pod(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, dryrun: bool, **_: Any) -> None:
    """Gate a pod that asks for Horus, or refuse it naming the field at fault (422)."""
    namespace = body.get("metadata", {}).get("namespace") or ""
    resolver, config = memo.runtime.resolver, memo.config
    bindings = admission.Bindings(
        default=config.binding, dra_served=config.dra_served, reserve_cdi=config.reserve_cdi
    )
    try:
        # The catalog and the predictor's checks: in a thread, off the event loop the watches share.
        changes = await asyncio.to_thread(
            admission.admit,
            body,
            namespace=namespace,
            resolve=resolver.workload,
            bindings=bindings,
            token=secrets.token_hex(4),  # names a DRA-bound pod's claims while it has no name yet
        )
    except InvalidJob as invalid:
        raise kopf.AdmissionError(f"Horus: {invalid}", code=422) from None
    if changes is not None:
        patch.update(changes)


@kopf.on.event("", "v1", "pods", labels={keys.LABEL_MANAGED: "true"}, id="managed_pod_changed")
async def managed_pod_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """A coroutine, on the loop, as `handlers.mirror` explains."""
    route: PodRoute = memo.runtime.podroute
    if event["type"] == "DELETED":
        route.drop(event["object"])
    else:
        route.put(event["object"])
