"""What the webhook does to a pod at creation (pure): nothing to a pod that does not ask for Horus; for
one that does, either refuse it (`InvalidJob`, naming the annotation or the spec field) or hold it at
the scheduling gate with its containers reading their GPUs from the pod's own annotation.

The checks are the DLJob's: the annotations through `api/pod_spec.py` (the DLJob spec's parser, its
bounds and, for a model that needs no ConfigMap, the operator's `WorkloadResolver`), the pod spec
through `jobs/template.py` (what would choose the node or the GPUs instead of Horus).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from horus_operator.api import keys, pod_spec
from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator.jobs import template
from horus_operator.operator.jobs.pods import VISIBLE_DEVICES

# Containers read their GPUs from the annotation Horus writes at release: the kubelet resolves the
# downward API when it starts the container, after the gate is gone and the annotation written.
DEVICES_FIELD = f"metadata.annotations['{keys.ANNOTATION_VISIBLE_DEVICES}']"
VISIBLE_DEVICES_ENV: Mapping[str, Any] = {
    "name": VISIBLE_DEVICES,
    "valueFrom": {"fieldRef": {"fieldPath": DEVICES_FIELD}},
}


def admit(
    pod: Mapping[str, Any], *, namespace: str = "", resolve: Callable[[JobSpec], object] | None = None
) -> dict[str, Any] | None:
    """The changes to make to `pod` as a merge patch, None for a pod Horus leaves alone. `resolve`: the
    operator's workload resolver, asked for models that need no ConfigMap (those are read when the pod
    is placed, and a failure told then). Raises `InvalidJob` for a pod Horus cannot run."""
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if not pod_spec.wants_horus(labels, annotations):
        return None
    spec: Mapping[str, Any] = pod.get("spec") or {}
    check(pod, namespace=namespace, resolve=resolve)
    gates = [dict(g) for g in spec.get("schedulingGates") or []]
    if not any(gate.get("name") == keys.SCHEDULING_GATE for gate in gates):
        gates.append({"name": keys.SCHEDULING_GATE})
    changed: dict[str, Any] = {"schedulingGates": gates}
    for kind in template.CONTAINER_LISTS:
        if spec.get(kind):
            changed[kind] = [_reading_gpus(container) for container in spec[kind]]
    return {"metadata": {"labels": {keys.LABEL_MANAGED: "true"}}, "spec": changed}


def check(
    pod: Mapping[str, Any], *, namespace: str = "", resolve: Callable[[JobSpec], object] | None = None
) -> JobSpec:
    """The pod's `JobSpec`, or `InvalidJob` naming what Horus cannot run."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    records = pod_spec.placement_records(annotations)
    if records:
        raise InvalidJob(
            pod_spec.annotation_field(records[0]),
            annotations[records[0]],
            "Horus's record of a placement: written by Horus, never by the pod's owner",
        )
    check_spec(pod.get("spec") or {})
    job = pod_spec.parse(pod, namespace=namespace)
    pod_spec.group(pod, namespace=namespace)  # a gang's annotations, checked here as the spec's are
    if resolve is not None and not job.resolved_off_loop:
        try:
            resolve(job)
        except InvalidJob as invalid:
            raise pod_spec.renamed(invalid, annotations) from None
    return job


def check_spec(spec: Mapping[str, Any]) -> None:
    """The DLJob's template rules (`template.check`), named by the pod's own fields (`spec.nodeName`,
    `spec.containers[0].resources.limits`)."""
    try:
        template.check({"spec": _without_ours(spec)})
    except InvalidJob as invalid:
        field = invalid.field_path.replace(template.FIELD, "spec", 1)
        raise InvalidJob(field, invalid.value, invalid.reason) from None


def _without_ours(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec less the variable the webhook itself adds (a pod admitted twice is admitted alike)."""
    copied = copy.deepcopy(dict(spec))
    for kind in template.CONTAINER_LISTS:
        for container in copied.get(kind) or []:
            if container.get("env"):
                container["env"] = [e for e in container["env"] if not _ours(e)]
    return copied


def _ours(env: Mapping[str, Any]) -> bool:
    """The variable as the webhook wrote it (the API server adds the fieldRef's apiVersion)."""
    field = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    return env.get("name") == VISIBLE_DEVICES and field == DEVICES_FIELD


def _reading_gpus(container: Mapping[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(dict(container))
    env = [e for e in changed.get("env") or [] if e.get("name") != VISIBLE_DEVICES]
    changed["env"] = [*env, copy.deepcopy(VISIBLE_DEVICES_ENV)]
    return changed
