"""What a DLJob-only tenant's template may ask for (operator/jobs/tenancy.py), and the operator's re-check of
it before placing (defence in depth behind the admission policy in manifests/admission.yaml, whose lists
are compared with tenancy.py's here; the policy's behaviour against a real API server is
tests/e2e/test_tenancy.py)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_operator_loop import _cluster, _loop, _settle

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.cache import job_key
from horus_operator.operator.jobs import tenancy
from horus_operator.testing.builders import DLJobBuilder

REPO = Path(__file__).resolve().parents[3]
POLICY = REPO / "manifests" / "admission.yaml"
CHART_POLICY = REPO / "charts" / "horus" / "templates" / "admission.yaml"
CHART_NAMESPACE = '{{ include "horus.operatorNamespace" . }}'
DLJOB_ONLY = tenancy.parse(
    {
        "dljobOnlyTenants": "true",
        "allowedPriorityClasses": "batch-low, batch-high",
        "allowedServiceAccounts": "trainer",
    }
)


def _template(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "train", "image": "pytorch"}], **spec}}


def _container(**fields: Any) -> dict[str, Any]:
    return _template(containers=[{"name": "train", **fields}])


def _context(**fields: Any) -> dict[str, Any]:
    """A template whose pod-level securityContext holds `fields`."""
    return _template(securityContext=fields)


def _volume(**source: Any) -> dict[str, Any]:
    return _template(volumes=[{"name": "v", **source}])


def _secured(**fields: Any) -> dict[str, Any]:
    """A template whose container's securityContext holds `fields`."""
    return _container(securityContext=fields)


def _annotated(key: str, value: str) -> dict[str, Any]:
    return {**_template(), "metadata": {"annotations": {key: value}}}


C0 = "spec.template.spec.containers[0]"
BEYOND = [  # (template, the field its refusal names); one row per field the allowlist restricts
    (_template(hostNetwork=True), "spec.template.spec.hostNetwork"),
    (_template(hostPID=True), "spec.template.spec.hostPID"),
    (_template(hostIPC=True), "spec.template.spec.hostIPC"),
    (_volume(hostPath={"path": "/"}), "spec.template.spec.volumes[0].hostPath"),
    (_template(priorityClassName="system-node-critical"), "spec.template.spec.priorityClassName"),
    (_template(serviceAccountName="namespace-admin"), "spec.template.spec.serviceAccountName"),
    (_template(serviceAccount="namespace-admin"), "spec.template.spec.serviceAccount"),
    (_template(schedulerName="my-scheduler"), "spec.template.spec.schedulerName"),
    (_secured(capabilities={"add": ["SYS_ADMIN"]}), f"{C0}.securityContext.capabilities.add"),
    (_secured(capabilities={"add": ["CHOWN"]}), f"{C0}.securityContext.capabilities.add"),
    (_container(ports=[{"containerPort": 80, "hostPort": 80}]), f"{C0}.ports[0].hostPort"),
    (
        _template(
            initContainers=[{"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]
        ),
        "spec.template.spec.initContainers[0].securityContext.capabilities.add",
    ),
    # Pod Security "baseline", field by field (k8s.io/pod-security-admission, policy/check_*.go).
    (_context(seLinuxOptions={"type": "spc_t"}), "spec.template.spec.securityContext.seLinuxOptions.type"),
    (_secured(seLinuxOptions={"type": "spc_t"}), f"{C0}.securityContext.seLinuxOptions.type"),
    (_context(seLinuxOptions={"user": "system_u"}), "spec.template.spec.securityContext.seLinuxOptions.user"),
    (_secured(seLinuxOptions={"role": "sysadm_r"}), f"{C0}.securityContext.seLinuxOptions.role"),
    (
        _context(seccompProfile={"type": "Unconfined"}),
        "spec.template.spec.securityContext.seccompProfile.type",
    ),
    (_secured(seccompProfile={"type": "Unconfined"}), f"{C0}.securityContext.seccompProfile.type"),
    (
        _context(appArmorProfile={"type": "Unconfined"}),
        "spec.template.spec.securityContext.appArmorProfile.type",
    ),
    (_secured(appArmorProfile={"type": "Unconfined"}), f"{C0}.securityContext.appArmorProfile.type"),
    (
        _annotated("container.apparmor.security.beta.kubernetes.io/train", "unconfined"),
        "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/train]",
    ),
    (
        _annotated("seccomp.security.alpha.kubernetes.io/pod", "unconfined"),
        "spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]",
    ),
    (
        _annotated("container.seccomp.security.alpha.kubernetes.io/train", "unconfined"),
        "spec.template.metadata.annotations[container.seccomp.security.alpha.kubernetes.io/train]",
    ),
    (
        _context(windowsOptions={"hostProcess": True}),
        "spec.template.spec.securityContext.windowsOptions.hostProcess",
    ),
    (_secured(windowsOptions={"hostProcess": True}), f"{C0}.securityContext.windowsOptions.hostProcess"),
    (
        _context(
            sysctls=[
                {"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "kernel.msgmax", "value": "1"},
            ]
        ),
        "spec.template.spec.securityContext.sysctls[1].name",
    ),
    (_secured(procMount="Unmasked"), f"{C0}.securityContext.procMount"),
    (
        _container(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
        f"{C0}.livenessProbe.httpGet.host",
    ),
    (
        _container(readinessProbe={"tcpSocket": {"host": "metadata", "port": 80}}),
        f"{C0}.readinessProbe.tcpSocket.host",
    ),
    (
        _container(lifecycle={"preStop": {"httpGet": {"host": "10.0.0.1", "port": 80}}}),
        f"{C0}.lifecycle.preStop.httpGet.host",
    ),
    (
        _volume(csi={"driver": "cephfs.csi.ceph.com", "nodePublishSecretRef": {"name": "x"}}),
        "spec.template.spec.volumes[0].csi",
    ),
    (_volume(cephfs={"monitors": ["m"], "secretRef": {"name": "x"}}), "spec.template.spec.volumes[0].cephfs"),
    (_volume(ephemeral={"volumeClaimTemplate": {"spec": {}}}), "spec.template.spec.volumes[0].ephemeral"),
    (_volume(nfs={"server": "nfs", "path": "/"}), "spec.template.spec.volumes[0].nfs"),
    (_volume(image={"reference": "registry/secret-data"}), "spec.template.spec.volumes[0].image"),
    (
        _template(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        ),
        "spec.template.spec.topologySpreadConstraints",
    ),
]


@pytest.mark.parametrize(("given", "field"), BEYOND, ids=[field for _, field in BEYOND])
def test_a_dljob_only_tenant_may_not_ask_for_more_than_the_allowlist(given: dict, field: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        tenancy.check(given, DLJOB_ONLY)
    assert refused.value.field_path == field
    assert field in str(refused.value)  # the status message names it
    tenancy.check(given, tenancy.parse(None))  # by default admission asks for the right to create pods


def test_what_the_platform_team_lists_passes() -> None:
    allowed = _template(
        priorityClassName="batch-high",
        serviceAccountName="trainer",
        schedulerName="default-scheduler",
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
        hostNetwork=False,
    )
    tenancy.check(allowed, DLJOB_ONLY)
    assert tenancy.parse({}).service_accounts == frozenset({"default"})
    assert tenancy.parse({"dljobOnlyTenants": "True"}).dljob_only


def test_what_baseline_allows_still_passes() -> None:
    """Each restricted field at each value Pod Security "baseline" allows (and the allowlist keeps)."""
    context = {
        "seLinuxOptions": {"type": "container_t", "level": "s0:c123,c456"},
        "seccompProfile": {"type": "RuntimeDefault"},
        "appArmorProfile": {"type": "Localhost", "localhostProfile": "trainer"},
        "windowsOptions": {"hostProcess": False},
    }
    container = {
        "name": "train",
        "ports": [{"containerPort": 8080, "hostPort": 0}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "lifecycle": {"preStop": {"exec": {"command": ["sync"]}}},
        "securityContext": {**context, "procMount": "Default", "capabilities": {"drop": ["ALL"]}},
    }
    volumes = [{"name": kind, kind: {}} for kind in tenancy.VOLUME_TYPES]
    sysctls = [{"name": name, "value": "1"} for name in tenancy.SYSCTLS]
    pod = _template(
        containers=[container],
        initContainers=[{**container, "name": "init", "securityContext": {"seLinuxOptions": {"type": ""}}}],
        securityContext={**context, "seLinuxOptions": {"type": "container_engine_t"}, "sysctls": sysctls},
        volumes=volumes,
    )
    pod["metadata"] = {
        "annotations": {
            "container.apparmor.security.beta.kubernetes.io/train": "localhost/trainer",
            "container.seccomp.security.alpha.kubernetes.io/train": "runtime/default",
            "team": "unconfined",  # only the profile annotations are read
        }
    }
    tenancy.check(pod, DLJOB_ONLY)


def test_max_priority_bounds_every_dljob() -> None:
    bounded = tenancy.parse({"maxPriority": " 100 "})  # DLJob-only tenants or not: the queue is shared
    job = dljob.parse(DLJobBuilder.stored("eager").spec(priority=1_000_000).obj())
    with pytest.raises(InvalidJob) as refused:
        tenancy.check_job(job, bounded)
    assert (refused.value.field_path, refused.value.value) == ("spec.priority", 1_000_000)
    assert str(refused.value).startswith("spec.priority=1000000: refused: above maxPriority")
    tenancy.check_priority(100, bounded)
    tenancy.check_priority(-5, tenancy.parse({"maxPriority": "-5"}))
    tenancy.check_job(job, tenancy.parse({"dljobOnlyTenants": "true"}))  # no bound when absent
    tenancy.check_job(job, tenancy.parse({"maxPriority": ""}))


@pytest.mark.parametrize("written", ["high", "1e3", "1_000", "99999999999999999999"])
def test_a_max_priority_the_policy_cannot_read_refuses_every_priority(written: str) -> None:
    """As the admission policy: what its int() cannot read refuses the DLJob (fail closed)."""
    unreadable = tenancy.parse({"maxPriority": written})
    with pytest.raises(InvalidJob, match="not an integer"):
        tenancy.check_priority(-1_000_000, unreadable)


def test_the_operator_fails_a_waiting_job_beyond_the_allowlist_naming_the_field() -> None:
    kube = _cluster(jobs=1, gpus=2)
    kube.config_maps["horus-system/horus-tenancy"] = {"dljobOnlyTenants": "true"}
    body = DLJobBuilder.stored("root").obj()
    body["spec"]["template"]["spec"]["hostPID"] = True
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop(kube)))
    status = kube.jobs["team-a/root"]["status"]
    assert status["phase"] == "Failed" and status["message"].startswith("spec.template.spec.hostPID=True")
    assert kube.creates == 1, "only the ordinary job was placed"


def test_a_tightened_setting_leaves_running_jobs_alone() -> None:
    kube = _cluster(jobs=0, gpus=2)
    body = DLJobBuilder.stored("root").obj()
    body["spec"]["template"]["spec"]["hostPID"] = True
    kube.jobs[job_key(body)] = body
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    kube.config_maps["horus-system/horus-tenancy"] = {"dljobOnlyTenants": "true"}
    asyncio.run(_settle(loop))  # a resync reads the setting again
    assert kube.jobs["team-a/root"]["status"]["phase"] == "Scheduled"


def test_the_operator_fails_a_waiting_job_above_max_priority_naming_it() -> None:
    """A DLJob stored before the bound (or with the policy unbound) does not take the next free GPU at a
    priority the platform team refuses."""
    kube = _cluster(jobs=1, gpus=2)
    kube.config_maps["horus-system/horus-tenancy"] = {"maxPriority": "100"}
    body = DLJobBuilder.stored("eager").spec(priority=1_000_000).obj()
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop(kube)))
    status = kube.jobs["team-a/eager"]["status"]
    assert status["phase"] == "Failed" and status["message"].startswith("spec.priority=1000000: refused")
    assert kube.creates == 1, "only the ordinary job was placed"


def _policy(path: Path) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy of an admission.yaml; the chart's with its namespace as the
    manifests' and without its label lines (the only template actions in it)."""
    (document,) = (d for d in path.read_text().split("\n---\n") if "\nkind: ValidatingAdmissionPolicy\n" in d)
    lines = document.replace(CHART_NAMESPACE, "horus-system").splitlines()
    policy: dict[str, Any] = yaml.safe_load("\n".join(line for line in lines if "{{" not in line))
    return policy


def test_the_policy_lists_what_the_operator_lists() -> None:
    spec = _policy(POLICY)["spec"]
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    for name in (
        "VOLUME_TYPES",
        "SELINUX_TYPES",
        "PROFILE_TYPES",
        "SYSCTLS",
        "PROFILE_ANNOTATIONS",
        "PROBES",
        "HOOKS",
    ):
        assert tuple(ast.literal_eval(variables[name])) == getattr(tenancy, name), name
    # maxPriority is an integer to both as the policy's int() reads it
    assert f"matches('^{tenancy.INTEGER.pattern}$')" in str(spec["validations"])


def test_the_chart_holds_the_same_policy() -> None:
    """Its own copy (helm renders only files in the chart); tests/e2e/test_helm_chart.py renders both."""
    assert _policy(CHART_POLICY)["spec"] == _policy(POLICY)["spec"]
