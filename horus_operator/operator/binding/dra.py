"""`dra`: each GPU a ResourceClaim Horus owns, referenced by every pod placed on it (operator/dra/)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from horus_operator.api.keys import GPU_DRIVER
from horus_operator.operator.binding import Bound
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.dra import claims
from horus_operator.operator.dra.keeper import ClaimKeeper
from horus_operator.operator.kube import Kube
from horus_operator.placement.types import Assignment


class DraBinder:
    def __init__(self, *, kube: Kube, cache: ClusterCache, sharing: str) -> None:
        self._cache = cache
        self._keeper = ClaimKeeper(kube=kube, cache=cache, sharing=sharing)
        self._foreign: dict[str, str] = {}  # GPU UUID -> the claim not Horus's that holds it

    async def prepare(self, placed: Sequence[Bound]) -> None:
        """The claims of the cycle's placements, made before their pods (a pod never waits for one); a
        routed pod makes its own as it is released."""
        holders = [
            claims.holder(
                bound.namespace,
                bound.assignment.node,
                [u or "" for u in bound.uuids],
                bound.request,
                bound.predicted,
            )
            for bound in placed
            if all(bound.uuids) and not bound.routed
        ]
        await self._keeper.prepare(holders)

    def unready(self, assignment: Assignment, uuids: Sequence[str | None]) -> str | None:
        if all(uuids):
            return None
        where = f"{assignment.node} GPU {','.join(map(str, assignment.gpu_indices))}"
        return f"waiting: {where} is in no ResourceSlice of {GPU_DRIVER}"

    def keeps(self, assignment: Assignment) -> bool:
        return False  # nothing is under way for a GPU no slice lists: the next cycle decides again

    def gpu_uuids(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str | None, ...]:
        return tuple(uuids)

    def pod_claims(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return claims.claim_names(assignment.node, uuids)

    def cdi_devices(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return ()  # the driver names the claimed devices to the runtime itself

    async def repair(self, changed: bool) -> None:
        """Claims missing, unused or with tenants changed, once anything they depend on changed."""
        if changed or self._cache.claims_changed:
            await self._keeper.reconcile()

    def refresh(self) -> None:
        self._foreign = claims.foreign_holders(self._cache.claims.values(), self._cache.devices())

    def taken(self) -> Mapping[str, str]:
        return self._foreign

    def taken_slots(self) -> Mapping[tuple[str, int], str]:
        return {}
