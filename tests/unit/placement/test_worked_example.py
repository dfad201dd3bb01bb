"""One small scenario worked out by hand for each policy (numbers from `builders.predictor`)."""

from __future__ import annotations

import dataclasses

from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.base import GPU_UNHEALTHY, NODE_UNSCHEDULABLE
from horus_operator.placement.registry import make_policy

# One node, two empty V100s; the queue in arrival order.
QUEUE = [
    job("a", "good", max_slowdown=1.0, at=0),  # asks for a whole GPU
    job("b", "good", at=1),
    job("c", "fair", at=2),
    job("d", "poor", at=3),
]


def placements(policy_name: str) -> list[tuple[str, int]]:
    policy = make_policy(policy_name, predictor=predictor())
    return [(a.job, a.gpu_indices[0]) for a in policy.schedule(snapshot(nodes(1, 2)), QUEUE)]


def test_exclusive_starts_the_first_two_jobs_alone() -> None:
    assert placements("exclusive") == [("a", 0), ("b", 1)]


def test_binpack_packs_c_onto_b_blind_to_interference() -> None:
    # a wants its GPU whole; b takes the other; c fits in b's memory (4000+4000+500 <= 16384) and binpack
    # looks at nothing else; d finds both GPUs closed (a's whole, b+c full at 2 jobs).
    assert placements("binpack") == [("a", 0), ("b", 1), ("c", 1)]


def test_horus_starts_loners_alone_and_pairs_the_good_partners() -> None:
    # Step 1, two empty GPUs: pairing prospects are a: 0 (whole GPU), b: max(1.67-1, 1.0-1) = 0.67,
    #   c: max(0.67, 1.58-1) = 0.67, d: max(0, 0.58) = 0.58 -> a (lowest) alone on GPU 0.
    # Step 2, one empty GPU: b 0.67, c 0.67, d 0.58 -> d alone on GPU 1.
    # Step 3, no empty GPU: b joins d -> gain 1.0 - 1 = 0 < min_gain; c joins d -> fair 1.1x, poor
    #   1.5x (both under 2.0/1.08 = 1.85), gain 0.58 -> c shares GPU 1 with d.
    # b waits: GPU 0 is held whole by a, GPU 1 has its two jobs.
    assert placements("horus") == [("a", 0), ("d", 1), ("c", 1)]


def test_horus_assignment_explains_predicted_slowdowns() -> None:
    policy = make_policy("horus", predictor=predictor())
    d = QUEUE[3]
    before = snapshot(nodes(1, 1), running(d, "n0", 0))
    (assignment,) = policy.schedule(before, [QUEUE[2]])
    assert assignment.colocated_with == ("d",)
    assert assignment.predicted_slowdown == 1.1
    assert assignment.cotenant_slowdowns == {"d": 1.5}
    assert "1.10×" in assignment.reason


def test_horus_explains_why_b_waits() -> None:
    policy = make_policy("horus", predictor=predictor())
    a, b, c, d = QUEUE
    after = snapshot(nodes(1, 2), running(a, "n0", 0), running(d, "n0", 1), running(c, "n0", 1))
    reason = policy.explain_wait(after, b)
    assert reason.startswith("waiting: ")
    assert "held whole" in reason and "full" in reason


def test_horus_says_when_no_gpu_keeps_slowdown_under_the_limit() -> None:
    policy = make_policy("horus", predictor=predictor())
    strict = job("s", "poor", max_slowdown=1.5)
    after = snapshot(nodes(1, 1), running(job("g", "good"), "n0", 0))
    assert policy.schedule(after, [strict]) == []
    assert "maxSlowdown" in policy.explain_wait(after, strict)


def test_a_starving_head_holds_a_gpu_back_until_it_drains() -> None:
    # Both GPUs run a "good" job. The head ("poor", maxSlowdown 1.5) cannot join either: good+poor is
    # predicted 2.0x > 1.5/1.08. A "fair" job may join a "good" one (1.2x each).
    policy = make_policy("horus", predictor=predictor())
    busy = snapshot(nodes(1, 2), running(job("g0", "good"), "n0", 0), running(job("g1", "good"), "n0", 1))
    head = job("h", "poor", max_slowdown=1.5, at=0)
    # The next job is only 10 s younger: no starvation, f takes the first shareable GPU.
    (placed,) = policy.schedule(busy, [head, job("f", "fair", at=10)])
    assert (placed.job, placed.gpu_indices) == ("f", (0,))
    # The next job is 20000 s younger (> patience_s = 14400): GPU 0 is held for h, f goes to GPU 1.
    (placed,) = policy.schedule(busy, [head, job("f", "fair", at=20000)])
    assert (placed.job, placed.gpu_indices) == ("f", (1,))


def test_a_starving_wide_head_holds_nothing_back() -> None:
    # A 2-GPU head cannot start (one GPU of the node is busy); the next job is 20000 s younger. Draining
    # a node for wide jobs idled GPUs for days on the Muri traces, so the free GPU goes to the next job.
    policy = make_policy("horus", predictor=predictor())
    busy = snapshot(nodes(1, 2), running(job("g0", "good"), "n0", 0))
    wide = job("w", "good", gpus=2, at=0)
    (placed,) = policy.schedule(busy, [wide, job("f", "fair", at=20000)])
    assert placed.job == "f"


def test_binpack_explains_a_wide_job_waiting_for_a_whole_node() -> None:
    policy = make_policy("binpack", predictor=predictor())
    busy = snapshot(nodes(1, 2), running(job("g0", "good"), "n0", 0))
    reason = policy.explain_wait(busy, job("w", "good", gpus=2))
    assert reason.startswith("waiting: ") and "first come" not in reason and "fits" not in reason


def test_every_policy_says_no_gpu_is_usable_when_all_are_unhealthy() -> None:
    sick = nodes(1, 2, healthy=False)
    for name in ("horus", "exclusive", "binpack"):
        reason = make_policy(name, predictor=predictor()).explain_wait(snapshot(sick), job("j", "good"))
        assert "unhealthy" in reason, (name, reason)


def test_every_policy_names_the_gpus_no_job_may_use_beside_the_full_ones() -> None:
    # n0: two GPUs, each held whole by a job; n1: one GPU reported unhealthy, one fine but taken whole;
    # n2: cordoned (or NotReady), two GPUs.
    (n0,) = nodes(1, 2)
    sick = dataclasses.replace(n0.gpus[0], node="n1", healthy=False)
    n1 = dataclasses.replace(n0, name="n1", gpus=(sick, dataclasses.replace(n0.gpus[1], node="n1")))
    n2 = dataclasses.replace(
        n0, name="n2", gpus=tuple(dataclasses.replace(g, node="n2") for g in n0.gpus), schedulable=False
    )
    whole = [job(f"w{i}", "good", max_slowdown=1.0) for i in range(3)]
    busy = snapshot(
        (n0, n1, n2), running(whole[0], "n0", 0), running(whole[1], "n0", 1), running(whole[2], "n1", 1)
    )
    for name in ("horus", "exclusive", "binpack"):
        reason = make_policy(name, predictor=predictor()).explain_wait(busy, job("j", "good"))
        assert reason.endswith(f"; not usable: {NODE_UNSCHEDULABLE} (2 GPUs), {GPU_UNHEALTHY} (1 GPU)"), (
            name,
            reason,
        )
        assert reason.startswith("waiting: ") and "(3 GPUs)" in reason, (name, reason)
