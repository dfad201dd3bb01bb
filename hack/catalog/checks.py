"""Checks the generator runs before it writes a catalog: published parameter counts and unique aliases."""

from __future__ import annotations

from typing import Any

from catalog.entries import Entry
from horus_operator.prediction import catalog as runtime_catalog


def published_params(entry: Entry, profile: dict[str, float]) -> None:
    """Where a parameter count is published (torchvision's model tables, Hugging Face's model cards),
    the graph must hold exactly that many; an entry that differs from the published configuration
    (another head) names it as `reference`, whose module `--from-torch` checks instead."""
    if entry.published_params is None or entry.reference:
        return
    params = profile["params"]
    if params != entry.published_params:
        raise SystemExit(
            f"{entry.name}: graph has {params:,.0f} parameters, the published count is "
            f"{entry.published_params:,}; the graph is wrong"
        )


def aliases(models: dict[str, dict[str, Any]]) -> None:
    owners: dict[str, str] = {}
    for name, entry in models.items():
        for alias in [name, *entry["aliases"]]:
            key = runtime_catalog.alias_key(alias)
            if owners.setdefault(key, name) != name:
                raise SystemExit(f"alias {alias!r} of {name} collides with {owners[key]}")
