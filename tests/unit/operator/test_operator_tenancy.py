"""What a DLJob-only tenant's template may ask for (operator/jobs/tenancy.py), and the operator's re-check of
it before placing (defence in depth behind the admission policy in manifests/admission.yaml)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_operator_loop import _cluster, _loop, _settle

from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.cache import job_key
from horus_operator.operator.jobs import tenancy
from horus_operator.testing.builders import DLJobBuilder

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


@pytest.mark.parametrize(
    ("given", "field"),
    [
        (_template(hostNetwork=True), "spec.template.spec.hostNetwork"),
        (_template(hostPID=True), "spec.template.spec.hostPID"),
        (_template(hostIPC=True), "spec.template.spec.hostIPC"),
        (
            _template(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
            "spec.template.spec.volumes[0].hostPath",
        ),
        (_template(priorityClassName="system-node-critical"), "spec.template.spec.priorityClassName"),
        (_template(serviceAccountName="namespace-admin"), "spec.template.spec.serviceAccountName"),
        (_template(serviceAccount="namespace-admin"), "spec.template.spec.serviceAccount"),
        (_template(schedulerName="my-scheduler"), "spec.template.spec.schedulerName"),
        (
            _container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
            "spec.template.spec.containers[0].securityContext.capabilities.add",
        ),
        (
            _container(ports=[{"containerPort": 80, "hostPort": 80}]),
            "spec.template.spec.containers[0].ports[0].hostPort",
        ),
        (
            _template(
                initContainers=[{"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]
            ),
            "spec.template.spec.initContainers[0].securityContext.capabilities.add",
        ),
    ],
)
def test_a_dljob_only_tenant_may_not_ask_for_more_than_the_allowlist(given: dict, field: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        tenancy.check(given, DLJOB_ONLY)
    assert refused.value.field_path == field
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
