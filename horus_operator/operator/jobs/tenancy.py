"""What a DLJob's pod template may ask for when its owner may not create pods ("DLJob-only tenants").

Pure. A DLJob makes Horus create a pod with the operator's rights, so by default a DLJob is admitted only
for a user who may create pods in its namespace (the ValidatingAdmissionPolicy `horus-dljob-tenancy`,
manifests/admission.yaml, asks the API server's authorizer). A platform team whose tenants may create
DLJobs but not pods opts in through the ConfigMap `horus-tenancy` in the operator's namespace
(`dljobOnlyTenants: "true"`); the same policy then admits only templates within the allowlist below,
and the operator checks the template again before it places the job (defence in depth: a DLJob stored
before the policy was installed, or with it unbound, still cannot escalate). What only the policy can
check: that the user may read each Secret the template references (the operator never learns who
created a DLJob). docs/reliability.md, "Threat model", has the whole picture.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.jobs import template

CONFIG_MAP = "horus-tenancy"  # in the operator's namespace; also the policy binding's parameter
FIELD = "spec.template.spec"
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
DEFAULT_SCHEDULER = "default-scheduler"  # Horus's nodeSelector is honoured by kube-scheduler


@dataclass(frozen=True)
class Tenancy:
    """The platform team's setting (`parse` of the ConfigMap's data)."""

    dljob_only: bool = False  # tenants may create DLJobs without the right to create pods
    priority_classes: frozenset[str] = frozenset()  # the priorityClassNames such templates may name
    service_accounts: frozenset[str] = frozenset({"default"})  # the serviceAccountNames they may name


def parse(data: Mapping[str, str] | None) -> Tenancy:
    """The ConfigMap's `data` (None when there is none: pods only for those who may create pods)."""
    if not data:
        return Tenancy()
    return Tenancy(
        dljob_only=str(data.get("dljobOnlyTenants", "false")).strip().lower() == "true",
        priority_classes=_names(data.get("allowedPriorityClasses", "")),
        service_accounts=_names(data.get("allowedServiceAccounts", "default")),
    )


def _names(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def check(pod_template: Mapping[str, Any], tenancy: Tenancy) -> None:
    """Raise `InvalidJob` naming the first template field a DLJob-only tenant may not set."""
    if not tenancy.dljob_only:
        return
    spec = pod_template.get("spec") or {}
    for name in HOST_NAMESPACES:
        if spec.get(name):
            raise InvalidJob(f"{FIELD}.{name}", spec[name], "host namespaces are not for DLJob-only tenants")
    for i, volume in enumerate(spec.get("volumes") or []):
        if "hostPath" in volume:
            raise InvalidJob(f"{FIELD}.volumes[{i}].hostPath", volume["hostPath"], "host paths are refused")
    _check_named(spec, "priorityClassName", tenancy.priority_classes)
    for name in ("serviceAccountName", "serviceAccount"):  # the second is the first's deprecated alias
        _check_named(spec, name, tenancy.service_accounts)
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", DEFAULT_SCHEDULER):
        raise InvalidJob(f"{FIELD}.schedulerName", scheduler, "kube-scheduler binds Horus's pods; remove it")
    for where, container in template.containers(spec):
        _check_container(where, container)


def _check_named(spec: Mapping[str, Any], name: str, allowed: frozenset[str]) -> None:
    value = spec.get(name)
    if value and value not in allowed:
        listed = ", ".join(sorted(allowed)) or "none"
        raise InvalidJob(f"{FIELD}.{name}", value, f"not among those the platform team allows ({listed})")


def _check_container(where: str, container: Mapping[str, Any]) -> None:
    added = ((container.get("securityContext") or {}).get("capabilities") or {}).get("add")
    if added:
        raise InvalidJob(f"{where}.securityContext.capabilities.add", added, "added capabilities are refused")
    for i, port in enumerate(container.get("ports") or []):
        if port.get("hostPort"):
            raise InvalidJob(f"{where}.ports[{i}].hostPort", port["hostPort"], "host ports are refused")
