"""The pod template checks: nothing in a DLJob's template may choose the node or the GPUs, and a pod no
GPU node can hold is named by the template field that asks too much."""

from __future__ import annotations

import json
from typing import Any

import pytest
from operator_builders import gpu_node

from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.jobs import template
from horus_operator.testing.builders import DLJobBuilder


def _template(**container: Any) -> dict[str, Any]:
    body = DLJobBuilder("t").obj()
    body["spec"]["template"]["spec"]["containers"][0].update(container)
    return body["spec"]["template"]


def _with_spec(**spec: Any) -> dict[str, Any]:
    body = _template()
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize(
    ("given", "field"),
    [
        (_with_spec(nodeName="gpu-node-1"), "spec.template.spec.nodeName"),
        (_with_spec(nodeSelector={"kubernetes.io/hostname": "a"}), "spec.template.spec.nodeSelector"),
        (_with_spec(affinity={"nodeAffinity": {}}), "spec.template.spec.affinity"),
        (
            _with_spec(resourceClaims=[{"name": "gpu", "resourceClaimName": "my-own-gpu"}]),
            "spec.template.spec.resourceClaims",
        ),
        (
            _template(env=[{"name": "A", "value": "1"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
            "spec.template.spec.containers[0].env[1].name",
        ),
        (
            _with_spec(
                initContainers=[{"name": "i", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}]
            ),
            "spec.template.spec.initContainers[0].env[0].name",
        ),
        (
            _template(resources={"limits": {"nvidia.com/gpu": 1}}),
            "spec.template.spec.containers[0].resources.limits",
        ),
        (
            _template(securityContext={"privileged": True}),
            "spec.template.spec.containers[0].securityContext.privileged",
        ),
        (
            {"metadata": {"annotations": {"horus.dev/gpu-uuids": "GPU-x"}}, **_template()},
            "spec.template.metadata.annotations",
        ),
        (
            {"metadata": {"labels": {"horus.dev/dljob": "other"}}, **_template()},
            "spec.template.metadata.labels",
        ),
    ],
)
def test_fields_that_would_choose_the_node_or_gpu_are_refused_by_name(
    given: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        template.check(given)
    assert refused.value.field_path == field


def test_an_ordinary_template_passes() -> None:
    template.check(_template(env=[{"name": "EPOCHS", "value": "3"}], securityContext={"privileged": False}))


@pytest.mark.parametrize(
    ("text", "amount"),
    [("500m", 0.5), ("2", 2.0), (3, 3.0), ("4Gi", 4 * 2**30), ("1.5k", 1500.0), ("1e3", 1000.0), (".5", 0.5)],
)
def test_quantities(text: object, amount: float) -> None:
    assert template.quantity(text) == amount


@pytest.mark.parametrize("text", ["abc", "", "1.2.3", "5 Gi", "nan", "inf", "1Zi"])
def test_non_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        template.quantity(text)


def test_a_quantity_beyond_a_float_is_infinite() -> None:
    assert template.quantity("1e999999") == float("inf")


def test_pod_requests_sum_containers_and_take_the_largest_init_container() -> None:
    given = _template(resources={"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}})
    given["spec"]["containers"].append({"name": "side", "resources": {"requests": {"cpu": "3"}}})
    given["spec"]["initContainers"] = [
        {"name": "i", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
    ]
    requests = template.pod_requests(given)
    assert requests["cpu"].amount == 5.0
    assert requests["cpu"].field == "spec.template.spec.containers[1].resources.requests.cpu"
    assert requests["memory"].amount == 8 * 2**30  # the init container's, more than the limit standing in
    assert requests["memory"].field == "spec.template.spec.initContainers[0].resources.requests.memory"


def test_a_pod_larger_than_every_gpu_node_is_named_by_its_largest_request() -> None:
    largest = template.largest_allocatable(map(template.allocatable, [gpu_node("a"), gpu_node("b", count=8)]))
    assert largest["cpu"] == 32.0 and largest["nvidia.com/gpu"] == 8.0
    hog = _template(resources={"requests": {"cpu": "1000"}})
    invalid = template.beyond_every_node(hog, largest)
    assert invalid is not None
    assert str(invalid).startswith("spec.template.spec.containers[0].resources.requests.cpu='1000': ")
    assert "no GPU node has more than 32 allocatable" in str(invalid)
    assert template.beyond_every_node(_template(resources={"requests": {"cpu": "32"}}), largest) is None


def test_a_resource_no_node_offers_is_beyond_every_node_and_no_nodes_judge_nothing() -> None:
    wants = _template(resources={"limits": {"example.com/fpga": "1"}})
    largest = template.largest_allocatable([template.allocatable(gpu_node("a"))])
    assert template.beyond_every_node(wants, largest) is not None
    assert template.beyond_every_node(wants, {}) is None


def test_a_refused_pod_names_the_template_field_and_value() -> None:
    pod = {"spec": {"containers": [{"name": "T_T"}], "restartPolicy": "Sometimes"}}
    status = {
        "kind": "Status",
        "message": 'Pod "x-0" is invalid: ...',
        "details": {
            "causes": [
                {
                    "field": "spec.containers[0].name",
                    "message": 'Invalid value: "T_T": a lowercase RFC 1123 label',
                },
                {"field": "spec.restartPolicy", "message": 'Unsupported value: "Sometimes"'},
            ]
        },
    }
    invalid = template.refused(pod, "Unprocessable Entity", json.dumps(status))
    assert invalid.field_path == "spec.template.spec.containers[0].name"
    assert invalid.value == "T_T"
    assert "also spec.template.spec.restartPolicy: Unsupported value" in invalid.reason


def test_a_refusal_without_causes_keeps_the_api_servers_message() -> None:
    body = json.dumps({"kind": "Status", "message": 'pods "x-0" is forbidden: violates PodSecurity'})
    invalid = template.refused({}, "Forbidden", body)
    assert invalid.field_path == "spec.template"
    assert "violates PodSecurity" in invalid.reason
    assert "not json" in template.refused({}, "Bad Request", "not json").reason


@pytest.mark.parametrize(
    ("reason", "status", "said"),
    [
        (  # a ResourceQuota: details name the pod, no cause names a field
            "Forbidden",
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": 'pods "x-0" is forbidden: exceeded quota: no-pods, requested: pods=1, '
                "used: pods=0, limited: pods=0",
                "reason": "Forbidden",
                "details": {"name": "x-0", "kind": "pods"},
                "code": 403,
            },
            'pod refused (Forbidden): pods "x-0" is forbidden: exceeded quota: no-pods, requested: pods=1, '
            "used: pods=0, limited: pods=0",
        ),
        (  # an admission webhook's denial, over several lines; a cause without a field
            "Bad Request",
            {
                "kind": "Status",
                "message": 'admission webhook "deny.example.com" denied the request:\n  no GPUs on Fridays',
                "details": {"causes": [{"reason": "FieldValueForbidden", "message": "no"}]},
                "code": 400,
            },
            'pod refused (Bad Request): admission webhook "deny.example.com" denied the request: no GPUs on '
            "Fridays",
        ),
        ("Forbidden", {"kind": "Status", "code": 403}, "pod refused (Forbidden): no reason given"),
        ("Forbidden", [1, 2], "pod refused (Forbidden): no reason given"),
    ],
)
def test_a_refusal_naming_no_field_says_what_was_refused_on_one_line_never_as_json(
    reason: str, status: object, said: str
) -> None:
    invalid = template.refused({}, reason, json.dumps(status))
    assert (invalid.field_path, invalid.reason) == ("spec.template", said)
    assert "{" not in str(invalid) and "\n" not in str(invalid)


def test_a_long_refusal_is_cut_short() -> None:
    body = json.dumps({"kind": "Status", "message": "x" * 5000})
    assert len(template.refused({}, "Forbidden", body).reason) < 600


@pytest.mark.parametrize(
    ("resources", "cores"),
    [
        ([{"limits": {"cpu": "5"}, "requests": {"cpu": "2"}}], 4.0),  # the limit is what it can take
        ([{"requests": {"cpu": "2500m"}}, {"requests": {"cpu": "1"}}], 2.5),
        ([{}], 0.0),  # nothing said: no CPU term
        ([{"requests": {"cpu": "500m"}}], 0.0),
    ],
)
def test_host_cpus_are_what_the_containers_may_use_beyond_one_core(resources: list, cores: float) -> None:
    spec = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}
    assert template.host_cpus({"spec": spec}) == pytest.approx(cores)
