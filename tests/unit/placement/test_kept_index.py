"""A kept `ClusterIndex` is a fresh one: after any sequence of changes (jobs starting, ending and moving,
nodes changing state, added and removed) it answers every query exactly as `ClusterIndex.build` of the
resulting snapshot does, in the same order. So are the indexes `IndexKeeper` keeps from changes told by
source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.keeper import IndexKeeper
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, RunningJob
from horus_operator.prediction.api import Workload
from horus_operator.testing.indexes import views

MODELS = ("resnet50", "vgg16", "lstm")
SLOWDOWNS = (1.0, 1.5, 2.0)
MOSTLY = st.sampled_from((True, True, True, False))  # most GPUs usable, so most changes show

gpu_states = st.fixed_dictionaries(
    {
        "healthy": MOSTLY,
        "claimed_by": st.sampled_from(("", "", "", "other/claim")),
        "observed_utilization": st.sampled_from((None, 0.3, 0.95)),
    }
)
node_shape = st.tuples(st.integers(1, 4), st.sampled_from(("v100", "a100")), MOSTLY)
node_shapes = st.lists(node_shape, min_size=1, max_size=5)
job_specs = st.tuples(
    st.sampled_from(MODELS),
    st.sampled_from(SLOWDOWNS),
    st.integers(0, 9),  # node, modulo the node count
    st.lists(st.integers(0, 4), min_size=1, max_size=2, unique=True),  # GPU indices (some not on the node)
)
events = st.one_of(
    st.tuples(st.just("start"), job_specs),
    st.tuples(st.just("end"), st.integers(0, 99)),
    st.tuples(st.just("move"), st.tuples(st.integers(0, 99), job_specs)),
    st.tuples(st.just("node"), st.tuples(st.integers(0, 9), MOSTLY, st.lists(gpu_states, max_size=4))),
    st.tuples(st.just("add node"), node_shape),
    st.tuples(st.just("drop node"), st.integers(0, 9)),
)


def build_nodes(shapes: list[tuple[int, str, bool]]) -> tuple[Node, ...]:
    return tuple(build_node(f"n{n}", *shape) for n, shape in enumerate(shapes))


def build_node(name: str, count: int, product: str, schedulable: bool) -> Node:
    gpus = tuple(Gpu(node=name, index=i, product=product, memory_mib=16384) for i in range(count))
    return Node(name=name, gpus=gpus, schedulable=schedulable)


def running_job(key: str, spec: tuple[str, float, int, list[int]], nodes: Sequence[str]) -> RunningJob:
    model, max_slowdown, node, indices = spec
    request = JobRequest(key=key, workload=Workload(model=model, batch_size=32), max_slowdown=max_slowdown)
    return RunningJob(request=request, node=nodes[node % len(nodes)], gpu_indices=tuple(indices))


def changed_node(node: Node, schedulable: bool, states: list[dict[str, Any]]) -> Node:
    gpus = tuple(
        dataclasses.replace(gpu, **states[i]) if i < len(states) else gpu for i, gpu in enumerate(node.gpus)
    )
    return dataclasses.replace(node, gpus=gpus, schedulable=schedulable)


class Cluster:
    """The model: the nodes and the running jobs in the order they (last) started."""

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self.running: dict[str, RunningJob] = {}
        self.started = 0
        self.added = 0  # nodes added

    def apply(self, event: tuple[str, Any]) -> tuple[str, Any]:
        """Applies `event` to the model; what changed, for the index: ("add", job), ("remove", key),
        ("nodes", nodes) or ("none", None)."""
        kind, detail = event
        keys = list(self.running)
        if kind == "start":
            self.started += 1
            job = running_job(f"ns/job-{self.started}", detail, self.names())
            self.running[job.request.key] = job
            return ("add", job)
        if kind in ("end", "move") and not keys:
            return ("none", None)
        if kind == "end":
            return ("remove", self.running.pop(keys[detail % len(keys)]).request.key)
        if kind == "move":
            which, spec = detail
            key = keys[which % len(keys)]
            del self.running[key]
            self.running[key] = running_job(key, spec, self.names())
            return ("move", self.running[key])
        if kind == "add node":
            self.nodes = (*self.nodes, build_node(self.next_node(), *detail))
            self.added += 1
            return ("nodes", self.nodes)
        if kind == "drop node":
            if len(self.nodes) > 1:
                position = detail % len(self.nodes)
                self.nodes = (*self.nodes[:position], *self.nodes[position + 1 :])
            return ("nodes", self.nodes)
        which, schedulable, states = detail
        position = which % len(self.nodes)
        node = changed_node(self.nodes[position], schedulable, states)
        self.nodes = (*self.nodes[:position], node, *self.nodes[position + 1 :])
        return ("nodes", self.nodes)

    def names(self) -> list[str]:
        """Where a job may run: a listed node, or the next one to be added (a pod bound to a node the
        cluster does not list yet)."""
        return [*(node.name for node in self.nodes), self.next_node()]

    def next_node(self) -> str:
        return f"new-{self.added}"

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(nodes=self.nodes, running=tuple(self.running.values()))


@settings(max_examples=500, deadline=None)
@given(shapes=node_shapes, history=st.lists(events, max_size=40))
# A GPU joins its group ahead of the group's first: the group's order, and the groups', change.
@example(shapes=[(1, "v100", True)] * 2, history=[("start", ("vgg16", 2.0, n, [0])) for n in (1, 0)])
# A group's first GPU leaves: the group now comes after another that was second.
@example(
    shapes=[(3, "v100", True)],
    history=[("start", (model, 2.0, 0, [i])) for i, model in enumerate(("vgg16", "lstm", "vgg16"))]
    + [("end", 0)],
)
def test_a_kept_index_equals_a_fresh_build(shapes: list[tuple[int, str, bool]], history: list) -> None:
    cluster = Cluster(build_nodes(shapes))
    kept = ClusterIndex(cluster.nodes)
    for event in history:
        change, detail = cluster.apply(event)
        if change == "add":
            kept.add(detail)
        elif change == "remove":
            kept.remove(detail)
        elif change == "move":
            kept.remove(detail.request.key)
            kept.add(detail)
        elif change == "nodes":
            assert kept.follow(detail)
        views(kept)  # reads between changes re-sort lazily: they must not disturb what follows
    assert views(kept) == views(ClusterIndex.build(cluster.snapshot()))


def test_nodes_reordered_reshaped_or_new_before_the_indexed_are_not_followed() -> None:
    nodes = build_nodes([(2, "v100", True), (1, "v100", True)])
    index = ClusterIndex(nodes)
    assert not index.follow(nodes[::-1])
    assert not index.follow(build_nodes([(2, "v100", True), (2, "v100", True)]))
    assert not index.follow((build_node("new", 1, "v100", True), *nodes))
    assert not index.follow((*nodes, nodes[0]))  # a name twice
    assert index.nodes is nodes and index.changes == 0


@settings(max_examples=200, deadline=None)
@given(
    shapes=node_shapes,
    history=st.lists(events, max_size=30),
    told=st.lists(st.booleans(), min_size=30, max_size=30),
    reshape=st.booleans(),
)
def test_the_keeper_keeps_the_index_of_what_its_sources_hold(
    shapes: list[tuple[int, str, bool]], history: list, told: list[bool], reshape: bool
) -> None:
    """Sources are jobs (one each, as the operator's DLJobs with one pod); a change is told once, or
    also again later (level-triggered); the odd ones are fleeting, read whole every call."""
    cluster = Cluster(build_nodes(shapes))
    keeper = IndexKeeper()
    untold: set[str] = set()
    index = keeper.index(cluster.nodes, {}, every=dict)
    for event, tell_twice in zip(history, told, strict=False):
        change, detail = cluster.apply(event)
        if change in ("add", "move"):
            untold.add(detail.request.key)
        elif change == "remove":
            untold.add(detail)
        holders = {key: (cluster.running[key],) if key in cluster.running else () for key in untold}
        steady = {key: jobs for key, jobs in holders.items() if not _fleeting(key)}
        fleeting = {key: (job,) for key, job in cluster.running.items() if _fleeting(key)}
        index = keeper.index(
            cluster.nodes,
            steady,
            every=lambda: {k: (j,) for k, j in cluster.running.items() if not _fleeting(k)},
            fleeting=fleeting,
        )
        if not tell_twice:
            untold.clear()
    if reshape:  # the nodes reordered: the keeper builds afresh
        cluster.nodes = cluster.nodes[::-1]
        index = keeper.index(
            cluster.nodes,
            {},
            every=lambda: {k: (j,) for k, j in cluster.running.items() if not _fleeting(k)},
            fleeting={key: (job,) for key, job in cluster.running.items() if _fleeting(key)},
        )
    fresh = ClusterIndex.build(cluster.snapshot())
    assert views(index, job_order=False) == views(fresh, job_order=False)


def _fleeting(key: str) -> bool:
    return int(key.rsplit("-", 1)[1]) % 2 == 1


def test_the_keeper_builds_afresh_while_two_jobs_share_a_key() -> None:
    nodes = build_nodes([(2, "v100", True)])
    first = running_job("ns/a", ("resnet50", 2.0, 0, [0]), ["n0"])
    second = running_job("ns/a", ("vgg16", 2.0, 0, [1]), ["n0"])
    keeper = IndexKeeper()
    twice = {"pod-1": (first,), "pod-2": (second,)}
    index = keeper.index(nodes, {}, every=lambda: twice)
    assert [len(slot.tenants) for slot in index.slots.values()] == [1, 1]
    again = keeper.index(nodes, {}, every=lambda: twice)
    assert again is not index  # not kept: a fresh index of the same state
    once = {"pod-2": (second,)}
    kept = keeper.index(nodes, {}, every=lambda: once)
    assert keeper.index(nodes, {"pod-2": (second,)}, every=lambda: once) is kept
    assert [len(slot.tenants) for slot in kept.slots.values()] == [0, 1]


def test_the_keeper_rebuilds_after_forget_and_after_a_failed_call() -> None:
    nodes = build_nodes([(1, "v100", True)])
    job = running_job("ns/a", ("resnet50", 2.0, 0, [0]), ["n0"])
    keeper = IndexKeeper()
    first = keeper.index(nodes, {}, every=dict)
    keeper.forget()
    rebuilt = keeper.index(nodes, {}, every=lambda: {"ns/a": (job,)})
    assert rebuilt is not first and list(rebuilt.jobs) == ["ns/a"]

    def broken() -> dict:
        raise RuntimeError("cache gone")

    with pytest.raises(RuntimeError):  # a node reshaped: a rebuild, whose listing fails
        keeper.index(build_nodes([(2, "v100", True)]), {}, every=broken)
    assert keeper.index(nodes, {}, every=lambda: {"ns/a": (job,)}) is not rebuilt
