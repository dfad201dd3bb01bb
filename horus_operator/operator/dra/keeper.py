"""DRA binding in the scheduling loop: the ResourceClaims Horus owns, kept as `claims.plan` says.

Two entry points, both level-triggered (what is wanted is recomputed from the cache, which mirrors the
API server; nothing is remembered between calls):
- `prepare` runs after a scheduling cycle, before its pods are created: it creates the claims the new
  placements need, each with the sharing config of every job that will be on its GPU (those already
  there and those placed in this cycle), so a pod never waits for its claim.
- `reconcile` runs at the end of every cycle: it creates wanted claims that are missing (a crash
  between a claim and its pod, a claim deleted while wanted), deletes the claims no pod holding a GPU
  references any more (the last job on the GPU ended), and writes a changed config beside a claim whose
  tenants changed (its spec is immutable: see `claims.plan`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from horus_operator.api import keys
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.dra import claims
from horus_operator.operator.dra.claims import ClaimId, DesiredClaim, Holder
from horus_operator.operator.kube import Kube

log = logging.getLogger(__name__)


class ClaimKeeper:
    def __init__(self, *, kube: Kube, cache: ClusterCache, sharing: str) -> None:
        self._kube, self._cache, self._sharing = kube, cache, sharing

    def wanted(self, new: Iterable[Holder] = ()) -> dict[ClaimId, DesiredClaim]:
        """The claims Horus's live pods (and `new` ones about to be created) need."""
        holders = [h for h in (claims.holder_of(p) for p in self._cache.dra_pods()) if h is not None]
        memory = {gpu.uuid: gpu.memory_mib for gpu in self._cache.slice_gpus()}
        return claims.desired([*holders, *new], memory, self._sharing)

    async def prepare(self, new: Sequence[Holder]) -> None:
        """Create the claims `new` pods will reference, with the config of all their GPUs' tenants."""
        if not new:
            return
        wanted = self.wanted(new)
        needed = {(h.namespace, claims.claim_name(h.node, uuid)) for h in new for uuid in h.uuids}
        await self._create(wanted[i] for i in sorted(needed) if i not in self._cache.claims)

    async def reconcile(self) -> None:
        self._cache.claims_changed = False
        plan = claims.plan(self.wanted(), self._cache.claims)
        for claim in plan.delete:
            log.info("deleting ResourceClaim %s: no pod holding its GPU references it", claim.key)
        await asyncio.gather(
            self._create(plan.create),
            *(self._kube.delete_claim(c.namespace, c.name) for c in plan.delete),
            *(self._annotate(c, desired) for c, desired in plan.annotate),
        )

    async def _create(self, wanted: Iterable[DesiredClaim]) -> None:
        await asyncio.gather(*(self._create_one(c) for c in wanted))

    async def _create_one(self, claim: DesiredClaim) -> None:
        stored = await self._kube.create_claim(claims.claim_body(claim))
        if stored is not None:  # known at once, as a created pod is: its watch event may come later
            self._cache.put_claim(stored)

    async def _annotate(self, claim: claims.ClaimView, desired: str) -> None:
        if desired:
            log.info(
                "ResourceClaim %s: its tenants now call for %s (applies when it is recreated)",
                claim.key,
                desired,
            )
        await self._kube.annotate_claim(
            claim.namespace, claim.name, {keys.ANNOTATION_DESIRED_SHARING: desired or None}
        )
