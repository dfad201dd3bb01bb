"""Gangs: jobs placed all in one cycle or none of them (the pods of one workload that must start
together: a PyTorchJob's master and workers, a JobSet's jobs, pods grouped by hand).

A gang's members are queue entries of their own (`JobRequest.gang`), each placed by the policy like any
job, so a gang needs nothing new of a policy. The scheduling cycle keeps a gang's placements only when
every member the gang still needs was placed in that cycle; otherwise it takes the cycle's placements
back, holds the gang back for the rest of the cycle and asks the policy again without it. So no GPU is
ever held by part of a gang, and the room the gang could not use goes to the jobs behind it. A gang
waits, not offered to the policy, while fewer of its members are queued than it needs (its pods are
still being created).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from horus_operator.placement.types import JobRequest


def needed(request: JobRequest) -> int:
    """Members of `request`'s gang to place together: those not holding GPUs already."""
    return request.gang_size - request.gang_placed


def arrived(request: JobRequest, waiting: int) -> bool:
    """Whether `request` may be offered: it is in no gang, or `waiting` (its gang's members queued)
    covers every member the gang still needs."""
    return not request.gang or waiting >= needed(request)


def short(placed: Iterable[JobRequest]) -> Counter[str]:
    """The gangs among `placed` (one cycle's placements) with fewer members placed than they need:
    gang -> members placed."""
    counts: Counter[str] = Counter()
    need: dict[str, int] = {}
    for request in placed:
        if request.gang:
            counts[request.gang] += 1
            need[request.gang] = needed(request)
    return Counter({gang: count for gang, count in counts.items() if count < need[gang]})


def not_arrived(request: JobRequest, waiting: int) -> str:
    """Why a gang whose pods are not all queued waits."""
    seen = waiting + request.gang_placed
    return (
        f"waiting: {seen} of {request.gang_size} pods of gang {request.gang} seen; "
        "its pods are placed together once all are"
    )


def held_back(request: JobRequest, fitted: int, why: str) -> str:
    """Why a gang the cycle held back waits: room for only `fitted` of its members; `why` the policy's
    reason for one member, said when none fitted (with some room, one member alone would fit)."""
    text = (
        f"waiting: gang {request.gang} is placed all or none, and {fitted} of the "
        f"{needed(request)} pods it needs fit now"
    )
    return text if fitted else f"{text}; {why.removeprefix('waiting: ')}"
