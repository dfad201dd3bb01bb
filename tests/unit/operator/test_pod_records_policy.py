"""The admission policy `horus-pod-records` (manifests/pod-records.yaml) names the same owner-written
annotations as the operator (`pod_spec.OWNER_ANNOTATIONS`): a key the policy let an owner write and the
operator took for its record would be a forgery the policy let through, and the reverse a pod the policy
refused for a key the operator accepts. The policy's behaviour against a real API server is
tests/e2e/test_pod_records.py; the chart renders the same objects (tests/e2e/test_helm_chart.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from horus_operator.api import keys, pod_spec
from horus_operator.operator.jobs import pods

POLICY = Path(__file__).resolve().parents[3] / "manifests" / "pod-records.yaml"


def test_the_policy_lets_owners_write_exactly_the_annotations_the_operator_takes_from_them() -> None:
    (policy,) = (
        d for d in yaml.safe_load_all(POLICY.read_text()) if d["kind"] == "ValidatingAdmissionPolicy"
    )
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert set(ast.literal_eval(variables["ownerKeys"])) == pod_spec.OWNER_ANNOTATIONS
    assert ast.literal_eval(variables["progress"]) == keys.ANNOTATION_PROGRESS


def test_the_policy_guards_the_cdi_device_annotation_the_operator_writes_under_reserve() -> None:
    """A tenant writing it would name GPUs to the container runtime that no reservation holds for it."""
    (policy,) = (
        d for d in yaml.safe_load_all(POLICY.read_text()) if d["kind"] == "ValidatingAdmissionPolicy"
    )
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert ast.literal_eval(variables["cdi"]) == pods.CDI_ANNOTATION
    assert "variables.cdi" in variables["records"] and "variables.cdi" in variables["changedAnnotations"]
    (judged,) = (
        c["expression"] for c in policy["spec"]["matchConditions"] if c["name"] == "carries-horus-keys"
    )
    assert judged.count(f"k == '{pods.CDI_ANNOTATION}'") == 2  # on the pod, and on its old copy
