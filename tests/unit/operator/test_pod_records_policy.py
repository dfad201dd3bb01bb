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

POLICY = Path(__file__).resolve().parents[3] / "manifests" / "pod-records.yaml"


def test_the_policy_lets_owners_write_exactly_the_annotations_the_operator_takes_from_them() -> None:
    (policy,) = (
        d for d in yaml.safe_load_all(POLICY.read_text()) if d["kind"] == "ValidatingAdmissionPolicy"
    )
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert set(ast.literal_eval(variables["ownerKeys"])) == pod_spec.OWNER_ANNOTATIONS
    assert ast.literal_eval(variables["progress"]) == keys.ANNOTATION_PROGRESS
