"""Gangs in the scheduling cycle: placed all or none, never half; waiting until all members are queued."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.registry import POLICIES, make_policy
from horus_operator.placement.types import JobRequest
from horus_operator.placement.waitqueue import WaitQueue


def _cycle(policy: str = "exclusive") -> SchedulingCycle:
    return SchedulingCycle(make_policy(policy, predictor=predictor()))


def _gang(name: str, size: int, *, model: str = "good", at: float = 0.0, placed: int = 0) -> list[JobRequest]:
    return [
        dataclasses.replace(
            job(f"{name}-{i}", model, at=at), gang=name, gang_size=size + placed, gang_placed=placed
        )
        for i in range(size)
    ]


def _everyone(request: JobRequest) -> bool:
    return True


def test_a_gang_with_room_for_three_of_four_is_not_placed_and_its_room_goes_to_the_next_job() -> None:
    queue = WaitQueue([*_gang("g", 4), job("after", "good", at=1.0)])
    result = _cycle().run(snapshot(nodes(1, gpus=3)), queue, explain=_everyone)
    assert [a.job for a in result.assignments] == ["after"]
    assert result.explanations["g-0"] == (
        "waiting: gang g is placed all or none, and 3 of the 4 pods it needs fit now"
    )


def test_a_gang_with_room_for_all_is_placed_in_one_cycle() -> None:
    queue = WaitQueue(_gang("g", 4))
    result = _cycle().run(snapshot(nodes(2, gpus=2)), queue)
    assert sorted(a.job for a in result.assignments) == ["g-0", "g-1", "g-2", "g-3"]


def test_a_gang_that_fits_nowhere_says_why() -> None:
    cluster = nodes(1, gpus=1)
    queue = WaitQueue(_gang("g", 2))
    busy = snapshot(cluster, running(job("old", "good"), "n0", 0))
    result = _cycle().run(busy, queue, explain=_everyone)
    assert result.assignments == ()
    assert result.explanations["g-1"].startswith(
        "waiting: gang g is placed all or none, and 0 of the 2 pods it needs fit now; "
    )


def test_a_gang_waits_until_all_its_members_are_queued() -> None:
    queue = WaitQueue(_gang("g", 4)[:3])
    result = _cycle().run(snapshot(nodes(1, gpus=8)), queue, explain=_everyone)
    assert result.assignments == ()
    assert result.explanations["g-2"] == (
        "waiting: 3 of 4 pods of gang g seen; its pods are placed together once all are"
    )


def test_the_rest_of_a_gang_cut_short_is_placed_together() -> None:
    # Two members already hold GPUs (a release cut short): the two left need only each other.
    queue = WaitQueue(_gang("g", 2, placed=2))
    result = _cycle().run(snapshot(nodes(1, gpus=2)), queue)
    assert sorted(a.job for a in result.assignments) == ["g-0", "g-1"]


def test_a_gang_of_one_is_a_plain_job() -> None:
    plain, alone = job("a", "good"), _gang("g", 1)[0]
    cluster = snapshot(nodes(1, gpus=1))
    assert _cycle().run(cluster, WaitQueue([alone])).assignments[0].node == (
        _cycle().run(cluster, WaitQueue([plain])).assignments[0].node
    )


def test_a_borrowed_index_comes_back_unchanged_after_a_gang_is_held_back() -> None:
    cluster = nodes(1, gpus=2)
    index = ClusterIndex(cluster, (running(job("old", "good"), "n0", 0),))
    view = dataclasses.replace(snapshot(cluster), index=index)
    _cycle().run(view, WaitQueue(_gang("g", 2)))
    assert list(index.jobs) == ["old"]


@settings(derandomize=True, max_examples=80, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    gpus=st.integers(min_value=1, max_value=4),
    node_count=st.integers(min_value=1, max_value=3),
    sizes=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4),
    models=st.lists(st.sampled_from(("good", "fair", "poor", "huge")), min_size=4, max_size=4),
    missing=st.integers(min_value=0, max_value=3),
)
def test_a_gang_is_never_placed_in_part(
    policy: str, gpus: int, node_count: int, sizes: list[int], models: list[str], missing: int
) -> None:
    requests = [
        member
        for n, size in enumerate(sizes)
        for member in _gang(f"g{n}", size, model=models[n], at=float(n))
    ]
    requests += [job(f"solo{n}", model, at=float(n)) for n, model in enumerate(models)]
    # The last gang's members not all queued yet: none of it may be placed.
    queued = requests[: len(requests) - 4 - min(missing, sizes[-1] - 1)] + requests[-4:]
    result = _cycle(policy).run(snapshot(nodes(node_count, gpus=gpus)), WaitQueue(queued))
    placed = {a.job for a in result.assignments}
    for n, size in enumerate(sizes):
        members = {f"g{n}-{i}" for i in range(size)}
        queued_members = members & {r.key for r in queued}
        assert not placed & members or (placed >= members and queued_members == members)
