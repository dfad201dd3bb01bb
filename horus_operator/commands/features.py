"""`horus features MODEL --batch-size 64 [--json]`: the graph features Horus predicts from.

MODEL is an ONNX file (graph only is enough: weights may be absent) or a catalog model name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import click

from horus_operator.prediction import catalog, graph_profile
from horus_operator.prediction import features as graph_features


@click.command()
@click.argument("model")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), required=True, help="Training batch size.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def features(model: str, batch_size: int, as_json: bool) -> None:
    """Print the graph features of MODEL (an ONNX file or a catalog name) at a batch size."""
    values, origin = _features(model, batch_size)
    if as_json:
        click.echo(json.dumps({"model": origin, "features": values}, indent=2))
        return
    click.echo(f"# {origin}")
    for name, value in graph_features.describe(values):
        click.echo(f"{name:<30} {_format(value):>24}")


def _features(model: str, batch_size: int) -> tuple[Mapping[str, float], str]:
    path = Path(model)
    if path.is_file():
        try:
            return graph_profile.from_onnx(path, batch_size), str(path)
        except ValueError as error:
            raise click.ClickException(str(error)) from error
    try:
        name = catalog.canonical(model)
    except ValueError as error:
        raise click.ClickException(f"{model} is neither an ONNX file nor a catalog model. {error}") from error
    return catalog.lookup(name, batch_size), f"catalog:{name} ({catalog.entry(name)['source']})"


def _format(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3f}"
