"""The copy of an API object the cache keeps: every field the operator reads, in less memory.

The cache holds every DLJob for as long as it exists, so its copy is what the operator's memory grows
with. As the API server sends it, a DLJob carries `metadata.managedFields` (which manager set which
field, for server-side apply), which Horus never reads and which is the larger part of a running job of
`bench/scale.py` once decoded: 12 of 22 kB. JSON decoding also gives each object its own copy of every
key, and of every value that repeats across objects or within one (condition types and reasons,
timestamps, node names); interned, each is held once.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

MANAGED_FIELDS = "managedFields"


def kept(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` without `metadata.managedFields`, rebuilt with its strings interned. A new object: the
    caller's (kopf's event body) is left as it was."""
    metadata = {key: value for key, value in body["metadata"].items() if key != MANAGED_FIELDS}
    return interned({**body, "metadata": metadata})


def interned(value: Any) -> Any:
    """`value` (decoded JSON) rebuilt with every string interned."""
    if type(value) is str:  # sys.intern takes exact strings only
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(key): interned(item) for key, item in value.items()}
    if isinstance(value, list):
        return [interned(item) for item in value]
    return value
