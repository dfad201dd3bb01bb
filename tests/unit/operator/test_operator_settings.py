"""`horus run` builds the operator's settings once, from its flags and their environment variables, and
hands them over: nothing goes through the environment and back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from horus_operator.api.defaults import SETTLED_S
from horus_operator.commands.run import run
from horus_operator.operator import entry
from horus_operator.operator.binding.reservations import DeviceMode
from horus_operator.operator.config import OperatorConfig
from horus_operator.placement.queueorder import QueueOrder, Starvation


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[OperatorConfig]:
    configs: list[OperatorConfig] = []

    def fake_run(config: OperatorConfig, **_: Any) -> None:
        configs.append(config)

    monkeypatch.setattr(entry, "run", fake_run)
    return configs


def test_flags_and_environment_make_one_config(
    handed_over: list[OperatorConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HORUS_POLICY", "binpack")
    monkeypatch.delenv("HORUS_IDENTITY", raising=False)
    result = CliRunner().invoke(
        run, ["--namespace", "team-a", "--resync-seconds", "2", "--lease-namespace", "ops"]
    )
    assert result.exit_code == 0, result.output
    (config,) = handed_over
    assert (config.policy, config.namespace, config.lease_namespace) == ("binpack", "team-a", "ops")
    assert config.resync_seconds == 2.0
    assert config.identity == OperatorConfig().identity  # the host name


def test_the_observed_settle_period_defaults_to_the_minute_and_reads_its_variable(
    handed_over: list[OperatorConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert CliRunner().invoke(run, []).exit_code == 0
    monkeypatch.setenv("HORUS_OBSERVED_SETTLE_SECONDS", "5")
    assert CliRunner().invoke(run, []).exit_code == 0
    assert [config.observed_settle_seconds for config in handed_over] == [SETTLED_S, 5.0]


def test_all_namespaces_overrides_a_namespace(handed_over: list[OperatorConfig]) -> None:
    result = CliRunner().invoke(run, ["--namespace", "team-a", "-A"])
    assert result.exit_code == 0, result.output
    assert handed_over[0].namespace is None


def test_migration_flags_make_the_move_settings(handed_over: list[OperatorConfig]) -> None:
    flags = ["--migration-over-limit-seconds", "20", "--migration-restart-cost-seconds", "5"]
    result = CliRunner().invoke(
        run, [*flags, "--migration-cooldown-seconds", "60", "--migration-max-moves", "1"]
    )
    assert result.exit_code == 0, result.output
    moves = handed_over[0].moves
    assert (moves.over_limit_for_s, moves.restart_cost_s, moves.cooldown_s, moves.max_moves_per_job) == (
        20.0,
        5.0,
        60.0,
        1,
    )


def test_the_queue_order_and_its_starvation_bound_make_the_ordering(
    handed_over: list[OperatorConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HORUS_QUEUE_ORDER", "shortest-remaining")
    result = CliRunner().invoke(run, ["--max-wait-seconds", "600", "--starvation-multiple", "3"])
    assert result.exit_code == 0, result.output
    ordering = handed_over[0].ordering
    assert ordering.order == QueueOrder.SHORTEST_REMAINING
    assert ordering.starvation == Starvation(max_wait_s=600.0, length_multiple=3.0)


def test_the_queue_order_defaults_to_fifo_with_a_day_s_bound(handed_over: list[OperatorConfig]) -> None:
    result = CliRunner().invoke(run, [])
    assert result.exit_code == 0, result.output
    ordering = handed_over[0].ordering
    assert (ordering.order, ordering.starvation) == (QueueOrder.FIFO, Starvation(max_wait_s=86400.0))


def test_the_pod_route_is_on_with_a_webhook_port_and_needs_its_certificate(
    handed_over: list[OperatorConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PORT", "CERT", "KEY", "HOST", "ADDR"):
        monkeypatch.delenv(f"HORUS_WEBHOOK_{name}", raising=False)
    assert CliRunner().invoke(run, []).exit_code == 0
    assert not handed_over[0].pod_route
    refused = CliRunner().invoke(run, ["--webhook-port", "9443"])
    assert refused.exit_code != 0 and "--webhook-cert" in refused.output
    monkeypatch.setenv("HORUS_WEBHOOK_PORT", "9443")
    result = CliRunner().invoke(run, ["--webhook-cert", "c.pem", "--webhook-key", "k.pem"])
    assert result.exit_code == 0, result.output
    config = handed_over[-1]
    assert config.pod_route and (config.webhook_port, config.webhook_cert, config.webhook_key) == (
        9443,
        "c.pem",
        "k.pem",
    )


def test_the_reservation_device_mode_is_env_unless_cdi_is_asked_for(
    handed_over: list[OperatorConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HORUS_RESERVATION_DEVICE_MODE", raising=False)
    assert CliRunner().invoke(run, []).exit_code == 0
    monkeypatch.setenv("HORUS_RESERVATION_DEVICE_MODE", "cdi")
    assert CliRunner().invoke(run, []).exit_code == 0
    assert [c.reservation.device_mode for c in handed_over] == [DeviceMode.ENV, DeviceMode.CDI]


def test_an_unknown_reservation_device_mode_is_refused_naming_the_flag(
    handed_over: list[OperatorConfig],
) -> None:
    result = CliRunner().invoke(run, ["--reservation-device-mode", "annotations"])
    assert result.exit_code == 2 and handed_over == []
    assert "--reservation-device-mode" in result.output and "'annotations' is not one of" in result.output


def test_the_charts_device_mode_offers_the_flags_choices_and_default() -> None:
    chart = Path(__file__).resolve().parents[3] / "charts" / "horus"
    schema = json.loads((chart / "values.schema.json").read_text())["properties"]["reservation"]
    (flag,) = [p for p in run.params if p.name == "reservation_device_mode"]
    assert isinstance(flag.type, click.Choice)
    assert set(schema["properties"]["deviceMode"]["enum"]) == set(flag.type.choices)
    assert yaml.safe_load((chart / "values.yaml").read_text())["reservation"]["deviceMode"] == flag.default
