"""Who owns which DLJob status fields: the scheduling loop all but `observed`, which the telemetry
handler alone writes. Every write goes through `reports.Reporter`, the one writer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OBSERVED = "observed"  # written by the telemetry handler (telemetry/updates.py), carried over by the loop
OWNED_BY_OTHERS = (OBSERVED,)  # status fields the scheduling loop compares but never sends


def owned_by_others(current: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `current` the loop does not own: it carries them over unchanged."""
    return {name: current[name] for name in OWNED_BY_OTHERS if name in current}


def loop_patch(current: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that takes the loop's fields of `current` to `new`. A merge patch keeps keys it
    does not mention, so the ones `new` drops are cleared; fields others own are never sent, as a cached
    copy may be older than their writer's."""
    dropped = {name: None for name in current if name not in new}
    return {k: v for k, v in {**dropped, **new}.items() if k not in OWNED_BY_OTHERS}
