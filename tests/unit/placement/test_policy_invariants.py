"""Invariants every policy keeps, checked over seeded random clusters and queues."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from placement_builders import GPU_MEMORY_MIB, job, nodes, predictor, running, snapshot

from horus_operator.placement.base import Limits
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.registry import POLICIES, make_policy
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, RunningJob

MODELS = ("good", "fair", "poor", "huge")
MAX_SLOWDOWNS = (1.0, 1.5, 2.0, 3.0)


def random_queue(rng: random.Random, size: int, prefix: str = "j") -> list[JobRequest]:
    return [
        job(
            f"{prefix}{i}",
            rng.choice(MODELS),
            max_slowdown=rng.choice(MAX_SLOWDOWNS),
            gpus=rng.choice((1, 1, 1, 1, 2)),
            at=float(i),
        )
        for i in range(size)
    ]


def apply(state: ClusterSnapshot, assignments: list[Assignment], queue: list[JobRequest]) -> ClusterSnapshot:
    by_key = {request.key: request for request in queue}
    started = tuple(RunningJob(by_key[a.job], a.node, a.gpu_indices) for a in assignments)
    return replace(state, running=state.running + started)


def tenants_by_gpu(state: ClusterSnapshot) -> dict[tuple[str, int], list[JobRequest]]:
    found: dict[tuple[str, int], list[JobRequest]] = {}
    for running_job in state.running:
        for index in running_job.gpu_indices:
            found.setdefault((running_job.node, index), []).append(running_job.request)
    return found


def scenarios(seed: int, policy_name: str) -> list[ClusterSnapshot]:
    """Three rounds of scheduling on a 3-node cluster, some jobs finishing between rounds."""
    rng = random.Random(seed)
    policy = make_policy(policy_name, predictor=predictor())
    state = snapshot(nodes(3, 4))
    states = []
    for round_number in range(3):
        queue = random_queue(rng, 14, prefix=f"r{round_number}-")
        state = apply(state, policy.schedule(state, queue), queue)
        states.append(state)
        state = replace(state, running=tuple(r for r in state.running if rng.random() < 0.6))
    return states


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(8))
def test_memory_never_oversubscribed(policy_name: str, seed: int) -> None:
    table = predictor()
    for state in scenarios(seed, policy_name):
        for gpu, requests in tenants_by_gpu(state).items():
            used = sum(table.job(r.workload, "v100").memory_mib for r in requests)
            assert used + Limits().memory_margin_mib <= GPU_MEMORY_MIB, gpu


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(8))
def test_co_location_limit_and_whole_gpu_requests(policy_name: str, seed: int) -> None:
    for state in scenarios(seed, policy_name):
        for requests in tenants_by_gpu(state).values():
            assert len(requests) <= Limits().max_jobs_per_gpu
            if len(requests) > 1:
                assert all(r.gpus == 1 and r.max_slowdown > 1.0 for r in requests)


@pytest.mark.parametrize("seed", range(8))
def test_horus_keeps_every_predicted_slowdown_under_max_slowdown(seed: int) -> None:
    table = predictor()
    for state in scenarios(seed, "horus"):
        for requests in tenants_by_gpu(state).values():
            slowdowns = table.slowdowns("v100", [r.workload for r in requests])
            assert slowdowns is not None
            for request, slowdown in zip(requests, slowdowns, strict=True):
                assert slowdown <= request.max_slowdown


@pytest.mark.parametrize("seed", range(8))
def test_exclusive_never_shares(seed: int) -> None:
    for state in scenarios(seed, "exclusive"):
        assert all(len(requests) == 1 for requests in tenants_by_gpu(state).values())


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_multi_gpu_jobs_get_gpus_on_one_node(policy_name: str) -> None:
    policy = make_policy(policy_name, predictor=predictor())
    (assignment,) = policy.schedule(snapshot(nodes(2, 2)), [job("big", "good", gpus=2)])
    assert sorted(assignment.gpu_indices) == [0, 1]
    assert policy.schedule(snapshot(nodes(2, 2)), [job("bigger", "good", gpus=3)]) == []


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
@pytest.mark.parametrize("seed", range(4))
def test_same_inputs_same_schedule(policy_name: str, seed: int) -> None:
    assert scenarios(seed, policy_name) == scenarios(seed, policy_name)


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_unhealthy_gpus_and_cordoned_nodes_are_never_candidates(policy_name: str) -> None:
    policy = make_policy(policy_name, predictor=predictor())
    sick = nodes(1, 2, healthy=False)
    cordoned = tuple(replace(node, schedulable=False) for node in nodes(1, 2))
    claimed = nodes(1, 2, claimed_by="team-b/their-own-claim")  # a DRA claim not Horus's holds them
    for node_list in (sick, cordoned, claimed):
        assert policy.schedule(snapshot(node_list), [job("a", "good")]) == []


@pytest.mark.parametrize("policy_name", ["horus", "binpack"])
def test_jobs_share_a_gpu_only_within_their_share_scope(policy_name: str) -> None:
    """DRA-bound co-tenants share one ResourceClaim, which only pods of its namespace can reference."""
    policy = make_policy(policy_name, predictor=predictor())
    tenant = running(replace(job("t", "good"), share_scope="dra/team-a"), "n0", 0)
    state = snapshot(nodes(1, 1), tenant)
    stranger = replace(job("b", "fair"), share_scope="dra/team-b")
    neighbour = replace(job("a", "fair"), share_scope="dra/team-a")

    assert policy.schedule(state, [stranger]) == []
    assert "another namespace" in policy.explain_wait(state, stranger)
    assert [a.gpu_indices for a in policy.schedule(state, [neighbour])] == [(0,)]


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_measured_telemetry_removes_candidates(policy_name: str) -> None:
    policy = make_policy(policy_name, predictor=predictor())
    full_memory = nodes(1, 1, observed_memory_used_mib=15000.0)
    busy = nodes(1, 1, observed_utilization=0.99)
    for node_list in (full_memory, busy):
        assert policy.schedule(snapshot(node_list), [job("a", "good")]) == []


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_a_borrowed_index_comes_back_unchanged(policy_name: str) -> None:
    policy = make_policy(policy_name, predictor=predictor())
    node_list = nodes(2, 2)
    tenant = running(job("t", "fair"), "n0", 0)
    index = ClusterIndex.build(snapshot(node_list, tenant))
    state = ClusterSnapshot(nodes=node_list, running=(tenant,), index=index)
    assert policy.schedule(state, random_queue(random.Random(1), 6))
    assert list(index.jobs) == ["t"]
    assert index.empty_count() == 3
    assert [group.slots for group in index.shared_groups(below=2)] == [{("n0", 0): index.slots[("n0", 0)]}]


def test_unknown_policy_and_tunable_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("fastest", predictor=predictor())
    with pytest.raises(TypeError, match="unknown tunable"):
        make_policy("exclusive", predictor=predictor(), lookahead=3)
    assert make_policy("horus", predictor=predictor(), lookahead=3, max_jobs_per_gpu=3)


def test_predictions_are_memoised_across_calls() -> None:
    table = predictor()
    policy = make_policy("horus", predictor=table)
    queue = random_queue(random.Random(3), 10)
    policy.schedule(snapshot(nodes(2, 2)), queue)
    asked = table.calls
    policy.schedule(snapshot(nodes(2, 2)), queue)
    assert table.calls == asked


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_a_job_predicted_too_big_for_any_gpu_still_runs_alone_on_an_idle_one(policy_name: str) -> None:
    policy = make_policy(policy_name, predictor=predictor())
    idle_and_shared = snapshot(nodes(1, 2), running(job("t", "good"), "n0", 0))
    (assignment,) = policy.schedule(idle_and_shared, [job("g", "giant")])
    assert (assignment.gpu_indices, assignment.colocated_with) == ((1,), ())
