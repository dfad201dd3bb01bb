"""The pod annotations Horus writes, decoded once for every reader: the operator rebuilding its view
after a restart, the fake agent echoing predictions, the chaos checks.

A decoder never raises on a hand-edited value where a reader can carry on without it: it returns what
a missing annotation would give (the pod still holds its GPUs either way).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api import keys


def join(values: Iterable[object]) -> str:
    """A list annotation's value ("0,1", "ns/a,ns/b")."""
    return ",".join(str(value) for value in values)


def split(text: str) -> tuple[str, ...]:
    """A list annotation's entries, blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def gpu_indices(annotations: Mapping[str, str]) -> tuple[int, ...]:
    """The GPU indices on its node that Horus gave the pod (`horus.dev/gpus`)."""
    return tuple(int(part) for part in split(annotations.get(keys.ANNOTATION_GPUS, "")))


def json_object(annotations: Mapping[str, str], key: str) -> dict[str, Any]:
    """A JSON-object annotation; {} when absent or not a JSON object."""
    try:
        value = json.loads(annotations.get(key) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Demand:
    """What the operator predicted a pod takes of each GPU it holds (`horus.dev/predicted`)."""

    utilization: float  # busy fraction, 0..1
    memory_mib: float


def predicted_demand(annotations: Mapping[str, str]) -> Demand | None:
    predicted = json_object(annotations, keys.ANNOTATION_PREDICTED)
    try:
        return Demand(
            utilization=max(0.0, float(predicted["utilization"])),
            memory_mib=max(0.0, float(predicted["memoryMiB"])),
        )
    except (KeyError, ValueError, TypeError):
        return None


def requested_config(annotations: Mapping[str, str]) -> tuple[str, int] | None:
    """(model, batch size) the pod trains, from the job request the operator wrote (`horus.dev/request`)."""
    request = json_object(annotations, keys.ANNOTATION_REQUEST)
    try:
        return str(request["model"]), int(request["batchSize"])
    except (KeyError, ValueError, TypeError):
        return None
