"""A managed pod as the pod route reads it, and the one patch that releases it (pure).

A managed pod is in one of three states, all read from the pod alone (so a restarted operator knows
each at once): **gated** (the scheduling gate `horus.dev/placement` is on: waiting for Horus),
**placed** (the gate is gone and the pod carries Horus's placement record: it holds its GPUs like a
DLJob's pod until it ends), or **unplaced** (no gate and no record: created while the webhook was not
called, so kube-scheduler places it as any pod; Horus never touches it).

Releasing is one JSON patch: the placement record and `horus.dev/visible-devices` (which the
containers read through the downward API), `kubernetes.io/hostname` added to the node selector (a
gated pod's node selection may be tightened, Kubernetes ≥ 1.30), and the gate removed, guarded by the
resourceVersion the decision read. The API server applies all of it or none, so no crash leaves a pod
half released, and a pod that changed since (another replica released it) is not released again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from horus_operator.api import keys, pod_spec
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.jobs import pods
from horus_operator.operator.jobs.pods import PodView


@dataclass(frozen=True)
class ManagedPod:
    key: str  # its key in the scheduling queue (`pod_spec.request_key`)
    body: Mapping[str, Any]
    view: PodView  # as any Horus pod: node, GPUs and request from the placement record
    gated: bool
    placed: bool
    group: pod_spec.Group | None  # its gang; None alone, or where its group annotations are bad

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
        """Gated, not deleted, not ended: the scheduling cycle should place it."""
        return self.gated and not self.placed and self.view.holds_gpus

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
    return ManagedPod(
        key=pod_spec.request_key(meta["namespace"], meta["name"]),
        body=body,
        view=pods.view(body),
        gated=any(gate.get("name") == keys.SCHEDULING_GATE for gate in gates),
        placed=keys.ANNOTATION_NODE in (meta.get("annotations") or {}),
        group=group,
    )


def release_operations(
    pod: ManagedPod, annotations: Mapping[str, str], hostname: str
) -> list[dict[str, Any]]:
    """The JSON patch that releases `pod` with `annotations` (its placement record, with
    `horus.dev/visible-devices`) to the node whose `kubernetes.io/hostname` is `hostname`."""
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
