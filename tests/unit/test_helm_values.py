"""charts/horus/values.schema.json offers exactly the choices `horus run` and `horus agent` accept, so
a value helm admits never crash-loops the operator, and a new choice reaches the chart's users."""

from __future__ import annotations

import json
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
