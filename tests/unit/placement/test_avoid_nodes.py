"""A job passes over the nodes kube-scheduler refused its pods on (`JobRequest.avoid_nodes`); other
jobs do not (operator/jobs/refusals.py: one job's refusals never cool a node for everyone)."""

from __future__ import annotations

import dataclasses

import pytest
from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.base import AVOIDED
from horus_operator.placement.registry import POLICIES, make_policy


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_job_goes_past_the_node_that_refused_it_and_others_do_not(policy: str) -> None:
    cluster = snapshot(nodes(count=2, gpus=1))
    refused = dataclasses.replace(job("ns/refused", "good"), avoid_nodes=frozenset({"n0"}))
    placed = make_policy(policy, predictor=predictor()).schedule(cluster, [refused])
    assert [(a.job, a.node) for a in placed] == [("ns/refused", "n1")]
    placed = make_policy(policy, predictor=predictor()).schedule(cluster, [job("ns/other", "good")])
    assert [(a.job, a.node) for a in placed] == [("ns/other", "n0")]


@pytest.mark.parametrize("policy", ["horus", "binpack"])  # the policies that share
def test_a_shared_gpu_of_an_avoided_node_does_not_stand_for_its_twins(policy: str) -> None:
    # Both GPUs are twins of one group (same type, same tenant): the first refuses for its node only.
    tenants = [running(job(f"ns/t{n}", "good", max_slowdown=10.0), f"n{n}", 0) for n in range(2)]
    cluster = snapshot(nodes(count=2, gpus=1), *tenants)
    newcomer = dataclasses.replace(job("ns/new", "fair", max_slowdown=10.0), avoid_nodes=frozenset({"n0"}))
    placed = make_policy(policy, predictor=predictor()).schedule(cluster, [newcomer])
    assert [(a.job, a.node) for a in placed] == [("ns/new", "n1")]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_job_that_avoids_every_free_node_waits_and_says_why(policy: str) -> None:
    cluster = snapshot(nodes(count=1, gpus=2))
    refused = dataclasses.replace(job("ns/refused", "good"), avoid_nodes=frozenset({"n0"}))
    chosen = make_policy(policy, predictor=predictor())
    assert chosen.schedule(cluster, [refused]) == []
    assert AVOIDED in chosen.explain_wait(cluster, refused)
    # a like job that avoids nothing is not skipped for its like's refusal
    alike = job("ns/alike", "good")
    assert [a.job for a in chosen.schedule(cluster, [refused, alike])] == ["ns/alike"]
