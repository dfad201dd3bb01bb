"""Where a job that states its share of a GPU (`JobRequest.gpu_milli`) goes: no prediction places it,
only the shares stated on each GPU (`PlacementCall.room`) and the fragmentation a fraction leaves for the
stated requests seen so far (`fragmentation.ShareMix`, FGD's expected fragmentation)."""

from __future__ import annotations

import operator

from horus_operator.placement.base import PlacementCall, stated_share_left
from horus_operator.placement.fragmentation import WHOLE_GPU, ShareMix
from horus_operator.placement.index import GpuKey, GpuSlot, Group
from horus_operator.placement.types import JobRequest


def slot_for_share(
    call: PlacementCall, request: JobRequest, held: set[GpuKey], mix: ShareMix, weigh: bool, below: int
) -> GpuSlot | None:
    """The GPU for `request`'s stated fraction: where it adds least to the expected fragmentation (when
    `weigh`), then leaves least free (best fit), then has the fewest empty GPUs beside it: a shared GPU's
    group of fewer than `below` jobs (its GPUs hold equal shares), or a node's empty GPU by how many its
    node has."""
    share = request.gpu_milli
    # (cost, thousandths left, empty GPUs on the node, group position); a group or an empty count
    places: list[tuple[tuple[float, int, int, int], Group | int]] = []
    for position, group in enumerate(call.index.shared_groups(below=below)):
        free = stated_share_left(next(iter(group.slots.values())))
        if free >= share:
            cost = mix.cost_on_shared(free, share) if weigh else 0.0
            places.append(((cost, free - share, 0, position), group))
    for empty in call.index.empty_counts():
        cost = mix.cost_on_empty(empty, share) if weigh else 0.0
        places.append(((cost, WHOLE_GPU - share, empty, -1), empty))
    places.sort(key=operator.itemgetter(0))
    for _, place in places:
        if isinstance(place, Group):
            slot = call.first_with_room(request, place.slots.values(), held)
        else:
            slot = _empty_gpu(call, request, place, held)
        if slot is not None:
            return slot
    return None


def _empty_gpu(call: PlacementCall, request: JobRequest, empty: int, held: set[GpuKey]) -> GpuSlot | None:
    """The first empty GPU with room for `request` on the nodes with exactly `empty` empty GPUs."""
    for _node, slots in call.index.nodes_with_exactly(empty):
        for slot in slots:
            if slot.key not in held and call.room(request, slot) is None:
                return slot
    return None
