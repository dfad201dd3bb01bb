"""Policies by name. Callers say `make_policy("horus", predictor=...)`; nothing dispatches on names.

Tunables are keyword arguments: the fields of `base.Limits` for every policy, plus the fields of
`horus.HorusTunables` for `horus`. An unknown tunable is an error, not silently ignored.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from horus_operator.placement.base import Limits, PredictingPolicy
from horus_operator.placement.binpack import BinpackPolicy
from horus_operator.placement.exclusive import ExclusivePolicy
from horus_operator.placement.horus import HorusPolicy, HorusTunables
from horus_operator.prediction.api import Predictor

PolicyFactory = Callable[..., PredictingPolicy]


def _split(tunables: dict[str, Any], *kinds: type) -> list[Any]:
    """Builds one instance of each dataclass in `kinds` from the tunables naming its fields."""
    remaining = dict(tunables)
    built = []
    for kind in kinds:
        names = {f.name for f in fields(kind)}
        built.append(kind(**{name: remaining.pop(name) for name in list(remaining) if name in names}))
    if remaining:
        raise TypeError(f"unknown tunable(s): {', '.join(sorted(remaining))}")
    return built


def _horus(predictor: Predictor, rng: random.Random | None, **tunables: Any) -> PredictingPolicy:
    limits, horus = _split(tunables, Limits, HorusTunables)
    return HorusPolicy(predictor, limits, horus)


def _exclusive(predictor: Predictor, rng: random.Random | None, **tunables: Any) -> PredictingPolicy:
    (limits,) = _split(tunables, Limits)
    return ExclusivePolicy(predictor, limits)


def _binpack(predictor: Predictor, rng: random.Random | None, **tunables: Any) -> PredictingPolicy:
    (limits,) = _split(tunables, Limits)
    return BinpackPolicy(predictor, limits)


POLICIES: dict[str, PolicyFactory] = {
    "horus": _horus,
    "exclusive": _exclusive,
    "binpack": _binpack,
}


def make_policy(
    name: str, *, predictor: Predictor, rng: random.Random | None = None, **tunables: Any
) -> PredictingPolicy:
    """A fresh policy. `rng` is for policies that randomise (none of the built-in three do)."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    return factory(predictor, rng, **tunables)
