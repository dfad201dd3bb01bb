"""What a policy can read of a `ClusterIndex`, as one comparable value: tests check that a kept index
(the simulator's, the operator's `placement.keeper`) answers as a fresh `ClusterIndex.build` does."""

from __future__ import annotations

from typing import Any

from horus_operator.placement.index import ClusterIndex

MAX_TENANTS = 4  # groups are read below this, so GPUs of up to 3 tenants show


def views(index: ClusterIndex, *, job_order: bool = True) -> dict[str, Any]:
    """Every query's answer, in the order it answers; `job_order` False: the jobs and each GPU's
    tenants as sorted keys (their order is the order the jobs were added, which a caller that keeps
    an index and one that lists its jobs afresh need not share)."""
    tenants = {key: [job.request.key for job in slot.tenants] for key, slot in index.slots.items()}
    return {
        "nodes_with_empty": [
            [(node, [slot.key for slot in empty]) for node, empty in index.nodes_with_empty(at_least)]
            for at_least in range(1, 5)
        ],
        "shared_groups": [
            (group.key, group.token, list(group.slots)) for group in index.shared_groups(below=MAX_TENANTS)
        ],
        "has_shared": [index.has_shared(below) for below in range(1, MAX_TENANTS + 1)],
        "empty_count": index.empty_count(),
        "slots": [(key, slot.gpu, slot.usable) for key, slot in index.slots.items()],
        "node_slots": {node: [slot.key for slot in slots] for node, slots in index.node_slots.items()},
        "tenants": tenants if job_order else {key: sorted(keys) for key, keys in tenants.items()},
        "jobs": list(index.jobs.items()) if job_order else sorted(index.jobs.items()),
    }
