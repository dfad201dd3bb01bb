"""A kept `ClusterIndex` is a fresh one: after any sequence of changes (jobs starting, ending and moving,
nodes changing state) it answers every query exactly as `ClusterIndex.build` of the resulting
snapshot does, in the same order.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from horus_operator.placement.index import ClusterIndex
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
node_shapes = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from(("v100", "a100")), MOSTLY), min_size=1, max_size=5
)
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
)


def build_nodes(shapes: list[tuple[int, str, bool]]) -> tuple[Node, ...]:
    return tuple(
        Node(
            name=f"n{n}",
            gpus=tuple(Gpu(node=f"n{n}", index=i, product=product, memory_mib=16384) for i in range(count)),
            schedulable=schedulable,
        )
        for n, (count, product, schedulable) in enumerate(shapes)
    )


def running_job(key: str, spec: tuple[str, float, int, list[int]], nodes: tuple[Node, ...]) -> RunningJob:
    model, max_slowdown, node, indices = spec
    request = JobRequest(key=key, workload=Workload(model=model, batch_size=32), max_slowdown=max_slowdown)
    return RunningJob(request=request, node=nodes[node % len(nodes)].name, gpu_indices=tuple(indices))


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

    def apply(self, event: tuple[str, Any]) -> tuple[str, Any]:
        """Applies `event` to the model; what changed, for the index: ("add", job), ("remove", key),
        ("nodes", nodes) or ("none", None)."""
        kind, detail = event
        keys = list(self.running)
        if kind == "start":
            self.started += 1
            job = running_job(f"ns/job-{self.started}", detail, self.nodes)
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
            self.running[key] = running_job(key, spec, self.nodes)
            return ("move", self.running[key])
        which, schedulable, states = detail
        position = which % len(self.nodes)
        node = changed_node(self.nodes[position], schedulable, states)
        self.nodes = (*self.nodes[:position], node, *self.nodes[position + 1 :])
        return ("nodes", self.nodes)

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


def test_nodes_added_removed_or_reshaped_are_not_followed() -> None:
    nodes = build_nodes([(2, "v100", True), (1, "v100", True)])
    index = ClusterIndex(nodes)
    assert not index.follow(nodes[:1])
    assert not index.follow(nodes[::-1])
    assert not index.follow(build_nodes([(2, "v100", True), (2, "v100", True)]))
    assert index.nodes is nodes and index.changes == 0
