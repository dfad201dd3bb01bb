"""The API server applies the CRD's defaults, `dljob.parse` applies `api.defaults`: they must agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from horus_operator.api import defaults, dljob

CRD = Path(__file__).resolve().parents[3] / "crds/dljob.yaml"


def _crd_defaults(node: dict[str, Any], path: str = "") -> dict[str, object]:
    found = {path: node["default"]} if "default" in node else {}
    for name, child in (node.get("properties") or {}).items():
        found |= _crd_defaults(child, f"{path}.{name}" if path else name)
    return found


def test_every_spec_default_of_the_crd_is_the_api_packages_and_no_other() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _crd_defaults(schema["properties"]["spec"]) == dict(defaults.SPEC)


def test_parse_applies_the_defaults_to_an_object_the_api_server_has_not_defaulted() -> None:
    job = dljob.parse(
        {
            "metadata": {"namespace": "ns", "name": "a"},
            "spec": {"model": {"onnx": {"configMap": "g"}}, "migration": {}},
        }
    )

    assert (job.gpus, job.max_slowdown, job.priority, job.backoff_limit, job.precision) == (
        defaults.GPUS,
        defaults.MAX_SLOWDOWN,
        defaults.PRIORITY,
        defaults.BACKOFF_LIMIT,
        defaults.DEFAULT_PRECISION,
    )
    assert job.onnx == dljob.OnnxRef("g", defaults.ONNX_KEY)
    assert (job.migration_allowed, job.grace_period_s) == (False, defaults.GRACE_PERIOD_S)
