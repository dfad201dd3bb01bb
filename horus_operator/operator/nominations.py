"""Placements kept on their GPUs while their pods wait for what their binding makes first (`reserve`:
the slots' reservations reporting their GPUs), as kube-scheduler keeps a preempting pod's nominated node.

A placement whose pod cannot be made yet (`Binder.unready`) while what it waits for is under way
(`Binder.keeps`) is nominated: later cycles hold its GPUs for it in every view and do not decide it
again, and the loop makes its pod (or releases it) once it is ready. A nomination ends with its pod, when
its job is decided otherwise (gone, another attempt, its spec changed), or when its binder no longer keeps
it (a reservation ended, was deleted, or never reported within its timeout): the job is then decided
afresh. Only the leading replica's memory holds nominations: after a restart or a resync none is left,
and each waiting job is decided again, as every waiting job was before nominations existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from horus_operator.api.dljob import JobSpec
from horus_operator.placement.types import Assignment, JobRequest, RunningJob


class Decided(Protocol):
    """A job's latest decision to place it (`placing.Pending`)."""

    attempt: int
    job: JobSpec
    binding: str


@dataclass(frozen=True)
class Nomination:
    assignment: Assignment
    request: JobRequest  # as placed: what holds its GPUs meanwhile and what its pod records
    attempt: int
    job: JobSpec  # as decided: one whose spec or identity changed since is decided afresh
    binding: str

    def stands_for(self, decided: Decided | None) -> bool:
        """Whether the job's latest decision (None: it wants no placement) still wants this one."""
        if decided is None:
            return False
        return (decided.attempt, decided.job, decided.binding) == (self.attempt, self.job, self.binding)

    def holding(self) -> RunningJob:
        return RunningJob(self.request, self.assignment.node, self.assignment.gpu_indices)


class Nominations:
    def __init__(self) -> None:
        self._kept: dict[str, Nomination] = {}  # job key -> its placement awaiting its pod

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def nominate(self, key: str, nomination: Nomination) -> None:
        self._kept[key] = nomination

    def drop(self, key: str) -> None:
        self._kept.pop(key, None)

    def clear(self) -> None:
        self._kept.clear()

    def items(self) -> list[tuple[str, Nomination]]:
        return sorted(self._kept.items())

    def held(self) -> tuple[RunningJob, ...]:
        """The GPUs the nominated placements hold, in job key order."""
        return tuple(nomination.holding() for _, nomination in self.items())
