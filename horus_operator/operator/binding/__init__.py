"""One seam for the ways a placement reaches its GPUs (docs/operator.md, "Bindings").

The scheduling loop knows no binding's details. For each kind (`spec.binding`: `env`, `dra`) a `Binder`
says, at four points of a cycle:
- `prepare`: what the cycle's new placements need before their pods exist (DRA: the ResourceClaims
  of their GPUs, with their co-tenants' sharing config);
- `unready`: why a placement's pod cannot be made yet (DRA: a GPU no ResourceSlice lists), and `keeps`
  whether the placement keeps its GPUs meanwhile (`reserve`: while its slots' reservations stand;
  `operator/nominations.py`), else it is decided afresh by the next cycle;
- `gpu_uuids`, `pod_claims`, `cdi_devices`: what the pod gets beside the placement record: the GPUs it
  is told (`reserve`: those the device plugin gave the slots' reservations), its claims (DRA), the CDI
  devices its annotation names (`reserve` with `--reservation-device-mode cdi`);
- `repair`: what a cycle brings in line afterwards, level-triggered (DRA: claims missing, unused or
  with tenants changed);
and `taken`, `taken_slots` the GPUs others hold that the cluster view must count (DRA: claims not
Horus's, by UUID; `reserve`: slots where the device plugin had no GPU left), read again by `refresh` at
the start of each cycle.
`Bindings` holds one binder per kind and answers for a placement by its job's binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from horus_operator.placement.types import Assignment, JobRequest


@dataclass(frozen=True)
class Bound:
    """A placement of this cycle as its binder reads it, before its pod exists."""

    binding: str  # the job's binding (`dljob.Binding`)
    namespace: str
    assignment: Assignment
    uuids: tuple[str | None, ...]  # its GPUs' UUIDs, None where the cluster does not know one
    request: JobRequest  # as placed
    predicted: Mapping[str, float]  # what the pod records (`pods.predicted`)
    routed: bool = False  # a pod of the pod route: it brings its own ResourceClaims (`podroute/route.py`)


class Binder(Protocol):
    async def prepare(self, placed: Sequence[Bound]) -> None: ...

    def unready(self, assignment: Assignment, uuids: Sequence[str | None]) -> str | None: ...

    def keeps(self, assignment: Assignment) -> bool: ...

    def gpu_uuids(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str | None, ...]: ...

    def pod_claims(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]: ...

    def cdi_devices(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]: ...

    async def repair(self, changed: bool) -> None: ...

    def refresh(self) -> None: ...

    def taken(self) -> Mapping[str, str]: ...

    def taken_slots(self) -> Mapping[tuple[str, int], str]: ...


class EnvBinder:
    """`env`: the pod is pinned to its node and told its GPUs in `NVIDIA_VISIBLE_DEVICES`; nothing to make
    before it, nothing to repair after (docs/operator.md: what this binding cannot keep others from)."""

    async def prepare(self, placed: Sequence[Bound]) -> None:
        return None

    def unready(self, assignment: Assignment, uuids: Sequence[str | None]) -> str | None:
        return None

    def keeps(self, assignment: Assignment) -> bool:
        return False

    def gpu_uuids(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str | None, ...]:
        return tuple(uuids)

    def pod_claims(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return ()

    def cdi_devices(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return ()

    async def repair(self, changed: bool) -> None:
        return None

    def refresh(self) -> None:
        return None

    def taken(self) -> Mapping[str, str]:
        return {}

    def taken_slots(self) -> Mapping[tuple[str, int], str]:
        return {}


class Bindings:
    """One binder per binding kind; `env` for any kind not served here."""

    def __init__(self, binders: Mapping[str, Binder]) -> None:
        self._binders = dict(binders)
        self._env = EnvBinder()
        self._taken: dict[str, str] = {}
        self._taken_slots: dict[tuple[str, int], str] = {}

    def of(self, binding: str) -> Binder:
        return self._binders.get(binding, self._env)

    async def prepare(self, placed: Sequence[Bound]) -> None:
        for binding, binder in self._binders.items():
            await binder.prepare([bound for bound in placed if bound.binding == binding])

    async def repair(self, changed: bool) -> None:
        for binder in self._binders.values():
            await binder.repair(changed)

    def refresh(self) -> None:
        """Read again what others hold (`taken`), once a cycle, before any view of the cluster."""
        for binder in self._binders.values():
            binder.refresh()
        self._taken = {uuid: who for binder in self._binders.values() for uuid, who in binder.taken().items()}
        self._taken_slots = {
            s: who for binder in self._binders.values() for s, who in binder.taken_slots().items()
        }

    def taken(self) -> Mapping[str, str]:
        """GPU UUID -> who holds it outside Horus's books, as of the last `refresh`."""
        return self._taken

    def taken_slots(self) -> Mapping[tuple[str, int], str]:
        """(node, GPU index) -> who holds it outside Horus's books, as of the last `refresh`."""
        return self._taken_slots
