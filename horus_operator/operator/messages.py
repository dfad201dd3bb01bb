"""The sentence Horus writes into the Event of a placement. Pure."""

from __future__ import annotations

from horus_operator.placement.types import Assignment


def placed_message(assignment: Assignment) -> str:
    gpus = ",".join(str(i) for i in assignment.gpu_indices)
    where = f"placed on {assignment.node} GPU {gpus}"
    company = f" with {', '.join(assignment.colocated_with)}" if assignment.colocated_with else " alone"
    text = f"{where}{company}, predicted slowdown {assignment.predicted_slowdown:.2f}×"
    return f"{text} ({assignment.reason})" if assignment.reason else text
