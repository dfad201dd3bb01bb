"""FGD's node-level fragmentation (`placement/nodefrag.py`): the arithmetic of the measure, where horus
puts jobs that state CPU, memory or GPU types, and that jobs stating none are placed as before."""

from __future__ import annotations

import random

import pytest

from horus_operator.placement.base import Limits
from horus_operator.placement.horus import HorusPolicy
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.nodefrag import NodeMix, NodeState, NodeStates, least_costly_host
from horus_operator.placement.types import (
    ClusterSnapshot,
    Gpu,
    HostRoom,
    JobRequest,
    Node,
    RunningJob,
)
from horus_operator.prediction.api import Workload
from horus_operator.sim.openb import StatedSharePredictor

LIMITS = Limits(max_jobs_per_gpu=21)


def stated(
    key: str,
    milli: int,
    *,
    gpus: int = 1,
    cpu: int = 0,
    memory: int = 0,
    products: frozenset[str] = frozenset(),
) -> JobRequest:
    return JobRequest(
        key=key,
        workload=Workload("stated", milli),
        gpus=gpus,
        max_slowdown=1.0 if milli >= 1000 else 2.0,
        gpu_milli=milli,
        cpu_milli=cpu,
        host_memory_mib=memory,
        gpu_products=products,
    )


def mix_of(*requests: JobRequest) -> NodeMix:
    mix = NodeMix()
    for request in requests:
        mix.note(request)
    return mix


def gpu_node(name: str, gpus: int, product: str = "v100") -> Node:
    return Node(name, tuple(Gpu(name, index, product, 0) for index in range(gpus)))


def test_a_node_loses_the_gpus_a_kind_cannot_use() -> None:
    mix = mix_of(stated("a", 500, cpu=4000))
    # 1000 and 300 free: the half-GPU kind uses the 1000 and not the 300 (FGD: GPUs short of its share)
    assert mix.measure(NodeState("v100", HostRoom(8000, 0), (1000, 300))) == pytest.approx(300)
    # its CPU gone, the node hosts the kind nowhere: all 1300 are lost
    assert mix.measure(NodeState("v100", HostRoom(2000, 0), (1000, 300))) == pytest.approx(1300)
    # CPU not modelled: every ask fits
    assert mix.measure(NodeState("v100", None, (1000, 300))) == pytest.approx(300)


def test_kinds_weigh_by_how_often_they_came() -> None:
    mix = mix_of(stated("a", 1000, gpus=2), stated("b", 1000), stated("c", 1000), stated("d", 1000))
    # one empty GPU: the pair (1 in 4) cannot use it
    assert mix.measure(NodeState("v100", None, (1000,))) == pytest.approx(250)
    assert mix.measure(NodeState("v100", None, (1000, 1000))) == 0.0


def test_gpu_types_count_for_the_kinds_that_run_there() -> None:
    mix = mix_of(stated("t4-only", 1000, products=frozenset({"t4"})), stated("any", 1000))
    assert mix.measure(NodeState("t4", None, (1000,))) == 0.0
    assert mix.measure(NodeState("v100", None, (1000,))) == pytest.approx(500)  # half the kinds skip it
    anyone = stated("e", 1000)
    # an unconstrained job costs less on the GPU type fewer kinds can use
    on_v100 = mix.cost(NodeState("v100", None, (1000,)), anyone, (1000,))
    on_t4 = mix.cost(NodeState("t4", None, (1000,)), anyone, (1000,))
    assert on_v100 < on_t4


def test_memory_counts_as_cpu_does() -> None:
    mix = mix_of(stated("a", 1000, memory=4096))
    assert mix.measure(NodeState("v100", HostRoom(64000, 2048), (1000,))) == pytest.approx(1000)
    assert mix.measure(NodeState("v100", HostRoom(64000, 4096), (1000,))) == 0.0


def test_the_weights_refresh_as_the_requests_seen_grow() -> None:
    mix = mix_of(*(stated(f"s{i}", 1000) for i in range(32)))
    node = NodeState("v100", None, (1000,))
    assert mix.measure(node) == 0.0
    mix.note(stated("wide", 1000, gpus=2))  # 1 in 33: not enough growth to reweigh yet (1/16)
    assert mix.measure(node) == 0.0
    mix.note(stated("wide2", 1000, gpus=2))
    assert mix.measure(node) == pytest.approx(1000 * 2 / 34)
    mix.note(stated("s0", 1000, gpus=2))  # a key seen before counts once
    assert mix.measure(node) == pytest.approx(1000 * 2 / 34)


def schedule(
    policy: HorusPolicy,
    nodes: tuple[Node, ...],
    request: JobRequest,
    index: ClusterIndex,
    hosts: dict[str, HostRoom] | None,
) -> tuple[str, tuple[int, ...]] | None:
    snapshot = ClusterSnapshot(nodes=nodes, index=index, hosts=hosts)
    for assignment in policy.schedule(snapshot, [request]):
        index.add(RunningJob(request, assignment.node, assignment.gpu_indices))
        if hosts is not None:
            host = hosts[assignment.node]
            hosts[assignment.node] = HostRoom(
                host.cpu_milli - request.cpu_milli, host.memory_mib - request.host_memory_mib
            )
        return assignment.node, assignment.gpu_indices
    return None


def test_a_job_does_not_take_the_cpu_a_node_s_other_gpus_need() -> None:
    nodes = (gpu_node("other", 1), gpu_node("short", 2), gpu_node("roomy", 2))
    index = ClusterIndex(nodes)
    hosts = {
        "other": HostRoom(1000, 65536),
        "short": HostRoom(4500, 65536),
        "roomy": HostRoom(16000, 65536),
    }
    policy = HorusPolicy(StatedSharePredictor(), LIMITS)
    assert schedule(policy, nodes, stated("light", 1000, cpu=1000), index, hosts) == ("other", (0,))
    # On "short" the job would leave its other GPU without the CPU the light kind asks
    request = stated("heavy", 1000, cpu=4000)
    assert schedule(policy, nodes, request, index, hosts) == ("roomy", (0,))


def test_gpus_beyond_what_the_cpu_feeds_are_lost() -> None:
    mix = mix_of(stated("a", 1000, cpu=4000))
    # two empty GPUs, CPU for one such job: the other GPU is lost to it already (FGD counts none)
    assert mix.measure(NodeState("v100", HostRoom(4000, 65536), (1000, 1000))) == pytest.approx(1000)
    assert mix.measure(NodeState("v100", HostRoom(8000, 65536), (1000, 1000))) == 0.0
    assert mix.measure(NodeState("v100", HostRoom(2000, 65536), (1000, 1000))) == pytest.approx(2000)
    # a quarter-GPU kind: four fit the GPU, the CPU feeds two, half of what it offers is usable
    quarters = mix_of(stated("q", 250, cpu=1000))
    assert quarters.measure(NodeState("v100", HostRoom(2000, 65536), (1000,))) == pytest.approx(500)
    # memory the same
    memory = mix_of(stated("m", 1000, memory=4096))
    assert memory.measure(NodeState("v100", HostRoom(64000, 4096), (1000, 1000))) == pytest.approx(1000)
    # so a whole job taking one GPU and the CPU feeding it costs nothing there, as on a roomy node
    job = stated("b", 1000, cpu=4000)
    assert mix.cost(NodeState("v100", HostRoom(4000, 65536), (1000, 1000)), job, (1000,)) == 0.0
    assert mix.cost(NodeState("v100", HostRoom(16000, 65536), (1000, 1000)), job, (1000,)) == 0.0


def test_a_rare_gpu_type_is_kept_for_the_jobs_that_need_it() -> None:
    nodes = (gpu_node("t4", 1, "t4"), gpu_node("v100", 1))
    policy = HorusPolicy(StatedSharePredictor(), LIMITS)
    index = ClusterIndex(nodes)
    assert schedule(policy, nodes, stated("t4-only", 500, products=frozenset({"t4"})), index, None) == (
        "t4",
        (0,),
    )
    # best fit would take the t4's half left; the t4 is what the t4-only kind can use
    assert schedule(policy, nodes, stated("any", 500), index, None) == ("v100", (0,))
    # and the stated type is a filter: a t4-only job never lands on the v100
    assert schedule(policy, nodes, stated("t4-2", 600, products=frozenset({"t4"})), index, None) is None


def test_a_node_short_of_cpu_is_passed_over() -> None:
    nodes = (gpu_node("n0", 1), gpu_node("n1", 1))
    hosts = {"n0": HostRoom(1000, 65536), "n1": HostRoom(1000, 65536)}
    policy = HorusPolicy(StatedSharePredictor(), LIMITS)
    assert schedule(policy, nodes, stated("big", 500, cpu=2000), ClusterIndex(nodes), hosts) is None


def test_a_cpu_pod_goes_where_it_strands_least() -> None:
    nodes = (gpu_node("gpus-free", 2), gpu_node("gpus-taken", 2))
    index = ClusterIndex(nodes)
    hosts = {"gpus-free": HostRoom(8000, 65536), "gpus-taken": HostRoom(8000, 65536)}
    mix = mix_of(stated("a", 1000, cpu=4000))
    index.add(RunningJob(stated("w", 1000, gpus=2), "gpus-taken", (0, 1)))
    cpu_pod = JobRequest(key="cpu", workload=Workload("stated", 0), gpus=0, cpu_milli=6000)
    groups = NodeStates().grouped(index, hosts.get)
    assert least_costly_host(mix, cpu_pod, groups) == "gpus-taken"
    hosts["gpus-taken"] = HostRoom(2000, 65536)  # no room there: it strands the free GPUs then
    assert least_costly_host(mix, cpu_pod, NodeStates().grouped(index, hosts.get)) == "gpus-free"


def test_node_states_follow_the_index_and_the_host_room() -> None:
    nodes = (gpu_node("n0", 2), gpu_node("n1", 2))
    index = ClusterIndex(nodes)
    states = NodeStates()
    hosts = {"n0": HostRoom(8000, 1024), "n1": HostRoom(8000, 1024)}
    assert list(states.grouped(index, hosts.get)) == [NodeState("v100", HostRoom(8000, 1024), (1000, 1000))]
    index.add(RunningJob(stated("a", 300), "n1", (1,)))
    hosts["n0"] = HostRoom(4000, 1024)
    assert set(states.grouped(index, hosts.get)) == {
        NodeState("v100", HostRoom(4000, 1024), (1000, 1000)),
        NodeState("v100", HostRoom(8000, 1024), (1000, 700)),
    }


def replay_choices(requests: list[JobRequest], hosts: dict[str, HostRoom] | None) -> list[object]:
    nodes = tuple(gpu_node(f"n{i}", gpus, product) for i, (gpus, product) in enumerate(CLUSTER))
    policy, index = HorusPolicy(StatedSharePredictor(), LIMITS), ClusterIndex(nodes)
    return [schedule(policy, nodes, request, index, hosts) for request in requests]


CLUSTER = [(8, "v100"), (2, "t4"), (4, "v100"), (1, "p100"), (8, "v100"), (2, "t4")]


@pytest.mark.parametrize("seed", range(5))
def test_jobs_stating_no_cpu_memory_or_type_are_placed_as_without_host_room(seed: int) -> None:
    """Stated shares alone: the node-level measure stays out of it, whatever the snapshot's hosts."""
    rng = random.Random(seed)
    shares = [50, 230, 470, 500, 810, 1000, 1000, 1000]
    requests = []
    for i in range(40):
        milli = rng.choice(shares)
        gpus = rng.choice([1, 1, 1, 2, 4]) if milli == 1000 else 1
        requests.append(stated(f"j{i}", milli, gpus=gpus))
    hosts = {f"n{i}": HostRoom(1000, 1024) for i in range(len(CLUSTER))}
    assert replay_choices(requests, hosts) == replay_choices(requests, None)
