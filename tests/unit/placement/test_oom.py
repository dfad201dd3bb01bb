"""placement/oom.py: the one rule for a job that ran out of GPU memory beside a co-tenant."""

from __future__ import annotations

import pytest

from horus_operator.placement import oom
from horus_operator.placement.index import wants_whole_gpus
from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload


@pytest.mark.parametrize(
    ("predicted", "reached", "before", "capacity", "raised"),
    [
        (4000.0, None, None, 16384, 6000.0),  # the prediction × MEMORY_FACTOR
        (4000.0, 7000.0, None, 16384, 7000.0),  # what the agent saw it reach, where more
        (4000.0, 5000.0, None, 16384, 6000.0),  # a reading below the factor's raise: the raise
        (12000.0, None, None, 16384, 16384.0),  # no more than its GPU holds: it fits one like it again
        (12000.0, None, None, None, 18000.0),  # its GPU unknown: uncapped
        (4000.0, None, 9000.0, 16384, 9000.0),  # never below a raise recorded before
        (4000.0, None, None, 3000, 4000.0),  # never below what it was placed with
        (4000.4, None, None, 16384, 6001.0),  # whole MiB, rounded up
    ],
)
def test_the_raised_memory(
    predicted: float, reached: float | None, before: float | None, capacity: int | None, raised: float
) -> None:
    got = oom.raised_memory_mib(predicted, reached_mib=reached, before_mib=before, capacity_mib=capacity)
    assert got == raised


def test_the_retry_wants_gpus_of_its_own_with_its_memory_raised() -> None:
    request = JobRequest("team-a/cnn", Workload("resnet50", 32), max_slowdown=2.0, priority=1)
    retried = oom.retried_alone(request, 6000.0)
    assert wants_whole_gpus(retried) and retried.max_slowdown == 1.0
    assert retried.workload.peak_memory_mib == 6000.0
    assert (retried.key, retried.priority, retried.workload.model) == ("team-a/cnn", 1, "resnet50")
    # a peak already known above the raise stays: never less than before
    assert oom.retried_alone(oom.retried_alone(request, 9000.0), 6000.0).workload.peak_memory_mib == 9000.0
