"""The `horus` command. Each subcommand lives in `horus_operator/commands/<name>.py` and is imported
only when used, so `horus predict` never pays for kopf and `horus run` never for matplotlib."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command or group
SUBCOMMANDS: dict[str, str] = {
    "cluster": "horus_operator.commands.cluster:cluster",
    "run": "horus_operator.commands.run:run",
    "agent": "horus_operator.commands.agent:agent",
    "features": "horus_operator.commands.features:features",
    "predict": "horus_operator.commands.predict:predict",
    "train": "horus_operator.commands.predict:train",
    "simulate": "horus_operator.commands.simulate:simulate",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="horus-operator")
def main() -> None:
    """Horus: interference-aware GPU scheduling for deep-learning training on Kubernetes."""
