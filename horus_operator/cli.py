"""The `horus` command. Each subcommand lives in `horus_operator/commands/<name>.py` and is imported
only when used, so `horus predict` never pays for kopf and `horus run` never for matplotlib."""

from __future__ import annotations

import importlib

import click

# name -> ("module:attribute" of a click command or group, one-line help shown by `horus --help`)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("horus_operator.commands.cluster:cluster", "Local control plane with fake GPU nodes."),
    "run": ("horus_operator.commands.run:run", "Run the DLJob operator."),
    "agent": ("horus_operator.commands.agent:agent", "Run the GPU node agent (NVML telemetry)."),
    "reserve": (
        "horus_operator.commands.reserve:reserve",
        "A reservation pod: report its GPU, then hold it.",
    ),
    "features": ("horus_operator.commands.features:features", "Print graph features of an ONNX model."),
    "predict": ("horus_operator.commands.predict:predict", "Predict utilization and co-location slowdown."),
    "train": ("horus_operator.commands.predict:train", "Retrain the prediction models from measurements."),
    "simulate": ("horus_operator.commands.simulate:simulate", "Trace-driven cluster simulation of policies."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SUBCOMMANDS:
            return None
        module_name, attribute = SUBCOMMANDS[cmd_name][0].split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing must not import every subcommand (kopf, xgboost, matplotlib): use the static help.
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUBCOMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="horus-operator")
def main() -> None:
    """Horus: interference-aware GPU scheduling for deep-learning training on Kubernetes."""
