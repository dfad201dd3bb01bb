"""The sentences Horus writes into Events and status messages. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest


def placed_message(assignment: Assignment) -> str:
    gpus = ",".join(str(i) for i in assignment.gpu_indices)
    where = f"placed on {assignment.node} GPU {gpus}"
    company = f" with {', '.join(assignment.colocated_with)}" if assignment.colocated_with else " alone"
    text = f"{where}{company}, predicted slowdown {assignment.predicted_slowdown:.2f}×"
    return f"{text} ({assignment.reason})" if assignment.reason else text


def waiting_message(request: JobRequest, snapshot: ClusterSnapshot, assignments: Sequence[Assignment]) -> str:
    """Why `request` was not placed this time (a best explanation: the policy only says where jobs go)."""
    busy = {(r.node, i) for r in snapshot.running for i in r.gpu_indices}
    busy |= {(a.node, i) for a in assignments for i in a.gpu_indices}
    free_nodes = [
        node.name
        for node in snapshot.nodes
        if node.schedulable and sum(1 for g in node.gpus if g.key not in busy and g.healthy) >= request.gpus
    ]
    amount = f"{request.gpus} GPUs on one node" if request.gpus > 1 else "a GPU"
    if request.max_slowdown <= 1.0:
        return f"waiting: needs {amount} to itself (maxSlowdown 1.0); none is free"
    if not free_nodes:
        return f"waiting: no GPU keeps predicted slowdown under {request.max_slowdown:g}× and none is free"
    return "waiting: queued behind earlier or higher-priority jobs"
