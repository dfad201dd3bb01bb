"""The PersistentVolumeClaims a DLJob's template names, checked before its pod is made.

Pure. kube-scheduler refuses a pod whose claim does not exist on every node alike; placed anyway, the
pod would hold its GPU until the unschedulable grace period ran out. The job waits instead, naming the
field, until the claim exists (the operator watches claims: docs/reliability.md, "Node and agent
faults"). Generic ephemeral volumes are not checked: their claims are made for the pod, after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from horus_operator.api.dljob import InvalidJob, JobSpec

FIELD = "spec.template.spec.volumes"


def missing_claim(job: JobSpec, exists: Callable[[str, str], bool]) -> InvalidJob | None:
    """The first claim the job's template names that `exists(namespace, name)` denies, None when all do."""
    namespace = job.namespace
    for i, volume in enumerate(_volumes(job.template)):
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        name = claim.get("claimName") if isinstance(claim, Mapping) else None
        if isinstance(name, str) and name and not exists(namespace, name):
            field = f"{FIELD}[{i}].persistentVolumeClaim.claimName"
            return InvalidJob(field, name, f"no PersistentVolumeClaim {name} in namespace {namespace}")
    return None


def _volumes(pod_template: Mapping[str, Any]) -> list[Any]:
    """Its `spec.volumes`, [] where a template stored without the schema has none to read."""
    spec = pod_template.get("spec") if isinstance(pod_template, Mapping) else None
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    return volumes if isinstance(volumes, list) else []
