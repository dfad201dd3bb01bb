"""charts/horus/values.schema.json offers exactly the choices `horus run` and `horus agent` accept, so
a value helm admits never crash-loops the operator, and a new choice reaches the chart's users; the
pod route's defaults are the webhook configuration manifests-pod-route/ ships."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from horus_operator.commands.agent import agent
from horus_operator.commands.run import run
from horus_operator.placement.registry import POLICIES

CHART = Path(__file__).resolve().parents[2] / "charts" / "horus"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def _choices(command: click.Command, name: str) -> set[str]:
    (param,) = [p for p in command.params if p.name == name]
    assert isinstance(param.type, click.Choice), name
    return {str(choice) for choice in param.type.choices}


def _enum(*path: str) -> set[str]:
    node: Any = SCHEMA
    for key in path:
        node = node["properties"][key]
    return set(node["enum"])


@pytest.mark.parametrize(
    ("value", "choices"),
    [
        (("operator", "binding"), lambda: _choices(run, "binding")),
        (("operator", "sharing"), lambda: _choices(run, "sharing")),
        (("operator", "queueOrder"), lambda: _choices(run, "queue_order")),
        (("operator", "policy"), lambda: set(POLICIES)),
        (("agent", "nvmlBackend"), lambda: _choices(agent, "backend")),
    ],
)
def test_the_schema_offers_what_the_commands_accept(value: tuple[str, ...], choices: Any) -> None:
    assert _enum(*value) == choices()


def test_the_default_values_are_the_commands_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    defaults = {p.name: p.default for p in run.params}
    operator = values["operator"]
    assert (operator["binding"], operator["sharing"], operator["queueOrder"], operator["policy"]) == (
        defaults["binding"],
        defaults["sharing"],
        defaults["queue_order"],
        defaults["policy"],
    )
    assert operator["metricsPort"] == defaults["metrics_port"]
    assert values["agent"]["metricsPort"] == {p.name: p.default for p in agent.params}["metrics_port"]


def test_the_schema_refuses_in_operator_env_exactly_the_variables_the_chart_sets() -> None:
    # A duplicate name in the container's env would be the chart's value or the user's, by the API
    # server's merge: the schema names the value that sets it instead (operator.policy, podRoute, ...).
    template = (CHART / "templates" / "operator.yaml").read_text()
    set_by_chart = set(re.findall(r"- name: (HORUS_[A-Z0-9_]+)", template))
    refused = SCHEMA["properties"]["operator"]["properties"]["env"]["propertyNames"]["not"]["enum"]
    assert set(refused) == set_by_chart


def test_the_pod_route_defaults_are_the_shipped_webhook_configuration() -> None:
    pod_route = yaml.safe_load((CHART / "values.yaml").read_text())["podRoute"]
    shipped = yaml.safe_load((CHART.parents[1] / "manifests-pod-route" / "webhook.yaml").read_text())
    by_pod_label, by_namespace = shipped["webhooks"]
    for webhook in (by_pod_label, by_namespace):
        assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == (
            pod_route["failurePolicy"],
            pod_route["timeoutSeconds"],
        )
    # The chart adds the expression leaving out Horus's own namespaces (named by other values).
    opted_in = [
        e
        for e in by_namespace["namespaceSelector"]["matchExpressions"]
        if e["key"] != "kubernetes.io/metadata.name"
    ]
    assert pod_route["namespaceSelector"] == {"matchExpressions": opted_in}
    assert pod_route["enabled"] is False
