"""The wait queue against a plain sorted list, with chunks small enough that adds split them and removals
empty them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import job

from horus_operator.placement.queueorder import Ordering, Standing
from horus_operator.placement.types import JobRequest
from horus_operator.placement.waitqueue import WaitQueue, _SortedChunks

# (add or remove, job number, arrival time, remaining seconds): few job numbers, so removals hit jobs
# that wait and adds replace them.
operations = st.lists(
    st.tuples(
        st.booleans(),
        st.integers(0, 40),
        st.sampled_from([0.0, 1.0, 2.0]),
        st.sampled_from([None, 10.0, 20.0]),
    ),
    max_size=200,
)


@given(operations)
@settings(max_examples=200, deadline=None)
def test_the_queue_stays_in_order_through_adds_and_removals(
    steps: list[tuple[bool, int, float, float | None]],
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_SortedChunks, "CHUNK", 2)
        _replay(steps)


def _replay(steps: list[tuple[bool, int, float, float | None]]) -> None:
    queue, expected = WaitQueue(), {}
    for adding, number, at, remaining in steps:
        key = f"j{number}"
        if adding:
            request = dataclasses.replace(job(key, "good", at=at), remaining_s=remaining)
            queue.add(request)
            expected[key] = request
        elif key in expected:
            assert queue.remove(key) is expected.pop(key)
        ordered = sorted(expected.values(), key=lambda request: Ordering().key(request, Standing.WAITING))
        assert list(queue) == ordered
        assert len(queue) == len(ordered)
        assert queue[:3] == ordered[:3]
        if ordered:
            assert queue[-1] is ordered[-1]
        assert queue.longest_remaining_s() == max((r.remaining_s or 0.0 for r in ordered), default=0.0)


def test_a_queue_position_out_of_range_is_an_index_error() -> None:
    queue = WaitQueue([job("a", "good")])
    assert isinstance(queue[0], JobRequest)
    with pytest.raises(IndexError):
        queue[1]
