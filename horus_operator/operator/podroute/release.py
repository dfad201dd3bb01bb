"""A managed pod as the pod route reads it, and the writes that release it (pure).

A managed pod is in one of three states, all read from the pod alone (so a restarted operator knows
each at once): **gated** (the scheduling gate `horus.dev/placement` is on: waiting for Horus),
**placed** (the gate is gone and the pod carries the placement record Horus released it with: it holds
its GPUs like a DLJob's pod until it ends), or **unplaced** (no gate and no record: created while the
webhook was not called, so kube-scheduler places it as any pod; Horus never touches it).

Releasing is two writes. First the pod's condition `horus.dev/Released`, whose message is the digest of
the placement record about to be written (pods/status: the operator's to write, never the pod owner's,
whom RBAC gives the pod and not its status). Then one JSON patch: the placement record and
`horus.dev/visible-devices` (which the containers read through the downward API; under `reserve`, the
CDI device annotation `cdi.k8s.io/horus_gpus` instead),
`kubernetes.io/hostname` added to the node selector (a gated pod's node selection may be tightened,
Kubernetes ≥ 1.30), and the gate removed. Each write is guarded by the resourceVersion the one before
read, so a pod that changed since (another replica released it) is not released again; the patch is
applied whole or not at all, so no crash leaves a pod half released.

Whoever may patch a pod can rewrite its annotations and remove its gate. The admission policy
`horus-pod-records` (manifests/pod-records.yaml) refuses that to everyone but the operator; without it,
or around it, `tampered` says why a pod's record is not Horus's: a record whose digest is not the
released one, a pod bound to another node than its record's, a gate removed from a pod the webhook
gated with no release. Such a pod holds no GPU in Horus's books, and the route stops it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from horus_operator.api import keys, pod_spec
from horus_operator.api.dljob import Binding, InvalidJob
from horus_operator.operator.jobs import pods, template
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.podroute import admission


@dataclass(frozen=True)
class ManagedPod:
    key: str  # its key in the scheduling queue (`pod_spec.request_key`)
    body: Mapping[str, Any]
    view: PodView  # as any Horus pod: node, GPUs and request from the placement record
    gated: bool
    placed: bool  # released by Horus, its record as released: it holds its GPUs
    group: pod_spec.Group | None  # its gang; None alone, or where its group annotations are bad
    tampered: str = ""  # why its placement is not Horus's (`tampered`); "" when it is, or it waits

    @property
    def namespace(self) -> str:
        return self.view.namespace

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def version(self) -> str:
        return str(self.body["metadata"].get("resourceVersion") or "")

    @property
    def waiting(self) -> bool:
        """Gated, not deleted, not ended: the scheduling cycle should place it (a record on a gated pod
        is no one's: the release writes its own over it)."""
        return self.gated and self.view.holds_gpus

    @property
    def created_at(self) -> float:
        created = self.view.created_at
        return created.timestamp() if isinstance(created, datetime) else 0.0


def read(body: Mapping[str, Any]) -> ManagedPod:
    meta = body["metadata"]
    try:
        group = pod_spec.group(body)
    except InvalidJob:  # the verdict on the pod says so (`route.PodRoute.waiting`)
        group = None
    gates = (body.get("spec") or {}).get("schedulingGates") or []
    gated = any(gate.get("name") == keys.SCHEDULING_GATE for gate in gates)
    view = pods.view(body)
    why = "" if gated else tampered(body, view)
    return ManagedPod(
        key=pod_spec.request_key(meta["namespace"], meta["name"]),
        body=body,
        view=view,
        gated=gated,
        placed=not gated and not why and keys.ANNOTATION_NODE in (meta.get("annotations") or {}),
        group=group,
        tampered=why,
    )


def tampered(body: Mapping[str, Any], view: PodView) -> str:
    """Why an ungated managed pod's placement is not the one Horus released, "" when it is (or it is
    unplaced: no record, never gated by the webhook)."""
    annotations = body["metadata"].get("annotations") or {}
    if keys.ANNOTATION_NODE not in annotations:
        if _webhook_gated(body.get("spec") or {}):
            return f"its scheduling gate {keys.SCHEDULING_GATE} was removed by someone other than Horus"
        return ""
    if not _released_as(body, record_digest(annotations)):
        return "its placement record (metadata.annotations['horus.dev/…']) is not the one Horus released"
    if view.bound_node and view.bound_node != view.node:
        return f"it runs on node {view.bound_node}, its placement record says {view.node}"
    return ""


def record_digest(annotations: Mapping[str, str]) -> str:
    """The digest of a pod's placement record (`admission.records`: with a CDI device annotation), as the
    condition `horus.dev/Released` states it."""
    record = {key: annotations[key] for key in admission.records(annotations)}
    return "sha256:" + hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def released_condition(annotations: Mapping[str, str], now: datetime) -> dict[str, str]:
    """The condition set before the release that writes `annotations` (the whole placement record)."""
    return {
        "type": keys.CONDITION_RELEASED,
        "status": "True",
        "reason": "Released",
        "message": record_digest(annotations),
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _released_as(body: Mapping[str, Any], digest: str) -> bool:
    """Whether Horus released the pod with the record of `digest`. A pod released by a Horus before
    the condition existed has only `horus.dev/Placed` True: trusted as that Horus trusted it."""
    conditions = {c.get("type"): c for c in (body.get("status") or {}).get("conditions") or []}
    released = conditions.get(keys.CONDITION_RELEASED)
    if released is not None:
        return released.get("status") == "True" and released.get("message") == digest
    return (conditions.get(keys.CONDITION_PLACED) or {}).get("status") == "True"


def _webhook_gated(spec: Mapping[str, Any]) -> bool:
    """Whether the webhook bound the pod (its containers read the GPU annotation or are told no GPU
    under `reserve`, or it references claims of its own): it was gated at creation, and only Horus's
    release removes that gate."""
    return admission.bound_by(spec) is not Binding.ENV or any(
        admission.reads_gpus(container) for _, container in template.containers(spec)
    )


def release_operations(
    pod: ManagedPod, annotations: Mapping[str, str], hostname: str
) -> list[dict[str, Any]]:
    """The JSON patch that releases `pod` with `annotations` (its placement record, with
    `horus.dev/visible-devices` or the CDI device annotation) to the node whose `kubernetes.io/hostname`
    is `hostname`."""
    spec = pod.body.get("spec") or {}
    gates = spec.get("schedulingGates") or []
    index = next(i for i, gate in enumerate(gates) if gate.get("name") == keys.SCHEDULING_GATE)
    operations: list[dict[str, Any]] = [
        # The API server refuses the patch (409) unless the pod is still the one the decision read; the
        # gate's test refuses it (422) where the pod has changed in a way the patch would misread.
        {"op": "replace", "path": "/metadata/resourceVersion", "value": pod.version},
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": keys.SCHEDULING_GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]
    if (pod.body["metadata"].get("annotations") or {}) == {}:
        operations.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    operations += [
        {"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}
        for key, value in sorted(annotations.items())
    ]
    if spec.get("nodeSelector"):
        path = f"/spec/nodeSelector/{_pointer(keys.LABEL_HOSTNAME)}"
        operations.append({"op": "add", "path": path, "value": hostname})
    else:
        operations.append(
            {"op": "add", "path": "/spec/nodeSelector", "value": {keys.LABEL_HOSTNAME: hostname}}
        )
    return operations


def _pointer(key: str) -> str:
    """A map key as a JSON pointer's token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
