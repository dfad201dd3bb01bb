"""What a DLJob may ask for when its owner may not create pods ("DLJob-only tenants"), and how high a
priority any DLJob may take.

Pure. A DLJob makes Horus create a pod with the operator's rights, so by default a DLJob is admitted only
for a user who may create pods in its namespace (the ValidatingAdmissionPolicy `horus-dljob-tenancy`,
manifests/admission.yaml, asks the API server's authorizer). A platform team whose tenants may create
DLJobs but not pods opts in through the ConfigMap `horus-tenancy` in the operator's namespace
(`dljobOnlyTenants: "true"`); the same policy then admits only templates within the allowlist below, at
least as strict as Pod Security "baseline" on every field baseline restricts, and the operator checks the
template again before it places the job (defence in depth: a DLJob stored before the policy was
installed, or with it unbound, still cannot escalate). The ConfigMap's `maxPriority` bounds
`spec.priority` of every DLJob, in either mode. Both sides name the same field paths in their refusals.

What only the policy can check: that the user may read each Secret and ConfigMap the DLJob references
(the template's env, envFrom, volumes and imagePullSecrets, and spec.model's ConfigMap): the operator
never learns who created a DLJob. Privileged containers are refused for everyone (`template.py` and the
CRD). docs/reliability.md, "Threat model", has the whole picture.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator.jobs import template

CONFIG_MAP = "horus-tenancy"  # in the operator's namespace; also the policy binding's parameter
FIELD = "spec.template.spec"
ANNOTATIONS = "spec.template.metadata.annotations"
PRIORITY = "spec.priority"
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
DEFAULT_SCHEDULER = "default-scheduler"  # Horus's nodeSelector is honoured by kube-scheduler
# As the policy's `int()` reads it: a sign and at most 18 digits (an int64 whatever the digits).
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")

# Pod Security Standards "baseline" (k8s.io/pod-security-admission, policy/check_*.go), as the policy in
# manifests/admission.yaml lists them; where baseline allows more, these allow less:
# volume types: baseline forbids a list of host and network types, these allow the types "restricted"
# allows but csi, ephemeral and image (a CSI driver's attributes and secrets, a claim of any
# StorageClass, an image pulled by the node reach past the tenant's rights); sysctls: baseline's set
# before Kubernetes 1.32; capabilities: none added.
VOLUME_TYPES = ("configMap", "downwardAPI", "emptyDir", "persistentVolumeClaim", "projected", "secret")
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
PROFILE_TYPES = ("RuntimeDefault", "Localhost")  # seccompProfile.type and appArmorProfile.type
SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
# The annotations that set AppArmor and seccomp profiles before the fields did (older kubelets read them).
PROFILE_ANNOTATIONS = (
    "container.apparmor.security.beta.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
)
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HOOKS = ("postStart", "preStop")  # under lifecycle
HANDLERS = ("httpGet", "tcpSocket")  # their `host` makes the kubelet connect anywhere from the node
BASELINE = 'beyond Pod Security "baseline"'


@dataclass(frozen=True)
class Rule:
    """A securityContext field "baseline" restricts: its path below the context, which values pass (None
    where the field is absent), and the refusal's reason."""

    field: str
    passes: Callable[[Any], bool]
    reason: str


def _only(values: tuple[str, ...]) -> str:
    return f"{BASELINE}; only {', '.join(v for v in values if v)}"


CONTEXT_RULES = (  # the pod's securityContext and each container's; the policy checks them in this order
    Rule("seLinuxOptions.type", lambda v: v is None or v in SELINUX_TYPES, _only(SELINUX_TYPES)),
    Rule("seLinuxOptions.user", lambda v: not v, f"{BASELINE}; leave it unset"),
    Rule("seLinuxOptions.role", lambda v: not v, f"{BASELINE}; leave it unset"),
    Rule("seccompProfile.type", lambda v: v is None or v in PROFILE_TYPES, _only(PROFILE_TYPES)),
    Rule("appArmorProfile.type", lambda v: v is None or v in PROFILE_TYPES, _only(PROFILE_TYPES)),
    Rule("windowsOptions.hostProcess", lambda v: v is not True, f"{BASELINE}: host processes are refused"),
)
CONTAINER_RULES = (  # each container's and init container's securityContext alone
    Rule("procMount", lambda v: v is None or v == "Default", _only(("Default",))),
    Rule("capabilities.add", lambda v: not v, "added capabilities are refused"),  # stricter than baseline
)


@dataclass(frozen=True)
class Tenancy:
    """The platform team's setting (`parse` of the ConfigMap's data)."""

    dljob_only: bool = False  # tenants may create DLJobs without the right to create pods
    priority_classes: frozenset[str] = frozenset()  # the priorityClassNames such templates may name
    service_accounts: frozenset[str] = frozenset({"default"})  # the serviceAccountNames they may name
    max_priority: int | None = None  # spec.priority above it is refused (any DLJob); None: no bound
    # maxPriority is set but is no integer: every DLJob is refused, as the policy refuses them (fail closed)
    max_priority_unreadable: bool = False


def parse(data: Mapping[str, str] | None) -> Tenancy:
    """The ConfigMap's `data` (None when there is none: pods only for those who may create pods)."""
    if not data:
        return Tenancy()
    written = str(data.get("maxPriority", "")).strip()
    readable = INTEGER.fullmatch(written) is not None
    return Tenancy(
        dljob_only=str(data.get("dljobOnlyTenants", "false")).strip().lower() == "true",
        priority_classes=_names(data.get("allowedPriorityClasses", "")),
        service_accounts=_names(data.get("allowedServiceAccounts", "default")),
        max_priority=int(written) if readable else None,
        max_priority_unreadable=bool(written) and not readable,
    )


def _names(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def check_job(job: JobSpec, tenancy: Tenancy) -> None:
    """Raise `InvalidJob` naming the first field of `job` the platform team's setting refuses: its
    priority above `maxPriority`, then its template (`check`)."""
    check_priority(job.priority, tenancy)
    check(job.template, tenancy)


def check_priority(priority: int, tenancy: Tenancy) -> None:
    """A priority above the bound would put the job ahead of every other team's waiting jobs, and under
    the `las` queue order make it one no lower-priority job may preempt."""
    where = f"maxPriority in ConfigMap {CONFIG_MAP}"
    if tenancy.max_priority_unreadable:
        raise InvalidJob(PRIORITY, priority, f"refused: {where} is not an integer; ask the platform team")
    if tenancy.max_priority is not None and priority > tenancy.max_priority:
        raise InvalidJob(PRIORITY, priority, f"refused: above {where} ({tenancy.max_priority})")


def refused_priority(priority: int, tenancy: Tenancy) -> InvalidJob | None:
    """`check_priority`'s refusal, None where the priority is within the bound."""
    try:
        check_priority(priority, tenancy)
    except InvalidJob as invalid:
        return invalid
    return None


def check(pod_template: Mapping[str, Any], tenancy: Tenancy) -> None:
    """Raise `InvalidJob` naming the first template field a DLJob-only tenant may not set."""
    if not tenancy.dljob_only:
        return
    _check_annotations((pod_template.get("metadata") or {}).get("annotations") or {})
    spec = pod_template.get("spec") or {}
    for name in HOST_NAMESPACES:
        if spec.get(name):
            raise InvalidJob(f"{FIELD}.{name}", spec[name], "host namespaces are not for DLJob-only tenants")
    _check_volumes(spec.get("volumes") or [])
    _check_named(spec, "priorityClassName", tenancy.priority_classes)
    for name in ("serviceAccountName", "serviceAccount"):  # the second is the first's deprecated alias
        _check_named(spec, name, tenancy.service_accounts)
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", DEFAULT_SCHEDULER):
        raise InvalidJob(f"{FIELD}.schedulerName", scheduler, "kube-scheduler binds Horus's pods; remove it")
    if spec.get("topologySpreadConstraints"):  # a constraint no node meets holds the job's GPUs hostage
        raise InvalidJob(
            f"{FIELD}.topologySpreadConstraints",
            spec["topologySpreadConstraints"],
            "Horus picks the node (by its GPUs); not for DLJob-only tenants",
        )
    _check_security_contexts(spec)


def _check_annotations(annotations: Mapping[str, Any]) -> None:
    for key in sorted(annotations):
        value = str(annotations[key])
        allowed = value in ("", "runtime/default") or value.startswith("localhost/")
        if key.startswith(PROFILE_ANNOTATIONS) and not allowed:
            raise InvalidJob(f"{ANNOTATIONS}[{key}]", value, f"{BASELINE}; only runtime/default, localhost/*")


def _check_volumes(volumes: list[Mapping[str, Any]]) -> None:
    for i, volume in enumerate(volumes):
        beyond = sorted(set(volume) - {"name", *VOLUME_TYPES})  # one volume has one type; sorted if not
        if beyond:
            raise InvalidJob(
                f"{FIELD}.volumes[{i}].{beyond[0]}",
                volume[beyond[0]],
                f"not a volume type for DLJob-only tenants ({', '.join(VOLUME_TYPES)})",
            )


def _check_named(spec: Mapping[str, Any], name: str, allowed: frozenset[str]) -> None:
    value = spec.get(name)
    if value and value not in allowed:
        listed = ", ".join(sorted(allowed)) or "none"
        raise InvalidJob(f"{FIELD}.{name}", value, f"not among those the platform team allows ({listed})")


def _check_security_contexts(spec: Mapping[str, Any]) -> None:
    """In the order the policy finds them (its `beyondBaseline`): each rule over every securityContext,
    the sysctls, each container rule over every container, host ports, probe and hook hosts."""
    located = list(template.containers(spec))
    contexts = [(f"{FIELD}.securityContext", spec.get("securityContext") or {})]
    contexts += [(f"{where}.securityContext", c.get("securityContext") or {}) for where, c in located]
    _check_rules(CONTEXT_RULES, contexts)
    for i, sysctl in enumerate((spec.get("securityContext") or {}).get("sysctls") or []):
        if sysctl.get("name") not in SYSCTLS:
            where = f"{FIELD}.securityContext.sysctls[{i}].name"
            raise InvalidJob(where, sysctl.get("name"), f"{BASELINE}: not a namespaced safe sysctl")
    _check_rules(CONTAINER_RULES, contexts[1:])
    _check_hosts(located)


def _check_rules(rules: tuple[Rule, ...], contexts: list[tuple[str, Mapping[str, Any]]]) -> None:
    for rule in rules:
        for where, context in contexts:
            value = _at(context, rule.field)
            if not rule.passes(value):
                raise InvalidJob(f"{where}.{rule.field}", value, rule.reason)


def _check_hosts(located: list[tuple[str, Mapping[str, Any]]]) -> None:
    """Host ports, then the hosts of probes and lifecycle hooks."""
    for where, container in located:
        for i, port in enumerate(container.get("ports") or []):
            if port.get("hostPort"):
                raise InvalidJob(f"{where}.ports[{i}].hostPort", port["hostPort"], "host ports are refused")
    handlers = [handler for where, container in located for handler in _handlers(where, container)]
    for kind in HANDLERS:
        for where, handler in handlers:
            host = _at(handler, f"{kind}.host")
            if host:
                raise InvalidJob(f"{where}.{kind}.host", host, f"{BASELINE}: the kubelet probes the pod only")


def _handlers(where: str, container: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each probe and lifecycle hook of a container, with its field path."""
    lifecycle = container.get("lifecycle") or {}
    yield from ((f"{where}.{name}", container[name] or {}) for name in PROBES if name in container)
    yield from ((f"{where}.lifecycle.{name}", lifecycle[name] or {}) for name in HOOKS if name in lifecycle)


def _at(obj: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path, None where any step is absent."""
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value
