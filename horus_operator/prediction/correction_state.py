"""The online correction's state as JSON rows (`Correction.to_dict` / `Correction.load`): the keys
of its tables (a GPU type and one or two job signatures), the rows read back and checked, the
format-2 states widened to format 3, and the least-recently-updated bound on each table."""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from horus_operator.api.defaults import DEFAULT_FRAMEWORK
from horus_operator.prediction.api import Workload

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

FORMAT = 3  # of the persisted state (2: the GPU-level scale; x and y per entry; 3: the framework)

Entry = TypeVar("Entry", bound="DataclassInstance")
_Key = TypeVar("_Key")
Signature = tuple[str, int, str, str, str]  # model, batch size, precision, features key, framework
JobKey = tuple[str, Signature]
PairKey = tuple[str, Signature, Signature]
RuntimeKey = tuple[str, str]  # GPU type, runtime (a job's framework)


def signature(workload: Workload) -> Signature:
    return (
        workload.model,
        workload.batch_size,
        workload.precision,
        workload.features_key,
        workload.framework,
    )


def touch(table: OrderedDict[Any, Entry], key: Any, cap: int, new: Callable[[], Entry]) -> Entry:
    """The entry for `key` (`new()` if absent), now the most recently updated; the oldest beyond `cap` go."""
    entry = table.pop(key, None) or new()
    table[key] = entry
    trim(table, cap)
    return entry


def trim(table: OrderedDict[Any, Any], cap: int) -> None:
    while len(table) > cap:
        table.popitem(last=False)


def read_table(
    state: Mapping[str, Any],
    name: str,
    width: int,
    key: Callable[[list[Any], str], _Key],
    make: type[Entry],
) -> OrderedDict[_Key, Entry]:
    """A persisted table: rows of `width`, each a key and then `make`'s fields (a sample count, numbers)."""
    rows = state.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == width for r in rows):
        raise ValueError(f"{name}: expected a list of {width}-element rows")
    fields = len(dataclasses.fields(make))
    return OrderedDict((key(row, name), make(*_numbers(row, name, fields - 1))) for row in rows)


def _signature(values: Sequence[Any], name: str) -> Signature:
    model, batch, precision, features_key, framework = values
    if not (
        isinstance(model, str)
        and isinstance(batch, int)
        and isinstance(precision, str)
        and isinstance(framework, str)
    ):
        raise ValueError(f"{name}: bad job signature {list(values)!r}")
    return (model, batch, precision, str(features_key), framework)


_SIGNATURE_WIDTH = 5


def job_key(row: list[Any], name: str) -> JobKey:
    return (str(row[0]), _signature(row[1 : 1 + _SIGNATURE_WIDTH], name))


def pair_key(row: list[Any], name: str) -> PairKey:
    own, other = row[1 : 1 + _SIGNATURE_WIDTH], row[1 + _SIGNATURE_WIDTH : 1 + 2 * _SIGNATURE_WIDTH]
    return (str(row[0]), _signature(own, name), _signature(other, name))


# The signatures each row of a format-2 table holds after its GPU (4 values each: no framework).
_FORMAT_2_SIGNATURES = {"jobs": 1, "pairs": 2, "alone": 1, "busy": 1, "peaks": 1}


def with_frameworks(state: Mapping[str, Any]) -> dict[str, Any]:
    """A format-2 state as format 3: each signature a PyTorch job's, the only framework a job could
    say it trained with then. Rows that are not lists are left for `table` to refuse."""
    widened: dict[str, Any] = {**state, "format": FORMAT}
    for name, count in _FORMAT_2_SIGNATURES.items():
        rows = state.get(name, [])
        if isinstance(rows, list):
            widened[name] = [_with_framework(row, count) if isinstance(row, list) else row for row in rows]
    return widened


def _with_framework(row: list[Any], signatures: int) -> list[Any]:
    out = row[:1]
    for start in range(1, 1 + 4 * signatures, 4):
        out += [*row[start : start + 4], DEFAULT_FRAMEWORK]
    return out + row[1 + 4 * signatures :]


def gpu_key(row: list[Any], name: str) -> str:
    return str(row[0])


def runtime_key(row: list[Any], name: str) -> RuntimeKey:
    return (str(row[0]), str(row[1]))


def _numbers(row: list[Any], name: str, count: int) -> tuple[Any, ...]:
    """A row's sample count (> 0) and the `count` finite numbers after it, at its end."""
    samples, values = row[-count - 1], row[-count:]
    if not (
        isinstance(samples, int)
        and samples > 0
        and all(isinstance(v, int | float) and math.isfinite(v) for v in values)
    ):
        raise ValueError(f"{name}: bad evidence {row[-count - 1 :]!r} (samples > 0, finite numbers)")
    return (samples, *(float(v) for v in values))
