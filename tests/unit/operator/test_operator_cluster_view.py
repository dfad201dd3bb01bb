from __future__ import annotations

from operator_builders import PodBuilder, gpu_node

from horus_operator.operator import cluster_view
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods


def test_gfd_labels_become_gpus_of_their_own_table_row_and_label_memory() -> None:
    node = cluster_view.gpu_node(
        gpu_node("a100-node-0", count=8, product="NVIDIA-A100-SXM4-40GB", memory_mib=40960)
    )
    assert node is not None
    assert [g.index for g in node.gpus] == list(range(8))
    assert {(g.product, g.memory_mib) for g in node.gpus} == {("a100-40gb", 40960)}
    assert {g.product_label for g in node.gpus} == {"NVIDIA-A100-SXM4-40GB"}  # the raw label travels too
    h100 = cluster_view.gpu_node(
        gpu_node("h100-0", count=8, product="NVIDIA-H100-80GB-HBM3", memory_mib=81559)
    )
    assert h100 is not None and {(g.product, g.memory_mib) for g in h100.gpus} == {("h100", 81559)}


def test_nodes_without_gpus_or_with_unknown_gpus_are_left_out() -> None:
    plain = {"metadata": {"name": "cpu-node", "labels": {}}, "status": {}}
    unknown = gpu_node("weird", product="Voodoo-5500")
    assert cluster_view.gpu_node(plain) is None
    assert cluster_view.gpu_node(unknown) is None


def test_not_ready_or_cordoned_nodes_are_not_schedulable() -> None:
    assert cluster_view.gpu_node(gpu_node("n", ready=False)).schedulable is False
    cordoned = gpu_node("n")
    cordoned["spec"]["unschedulable"] = True
    assert cluster_view.gpu_node(cordoned).schedulable is False


def test_not_ready_nodes_are_timed_from_their_ready_conditions_last_transition() -> None:
    down, unknown, untimed = (
        gpu_node("down", ready=False),
        gpu_node("unknown"),
        gpu_node("untimed", ready=False),
    )
    down["status"]["conditions"][0]["lastTransitionTime"] = "2026-12-02T10:00:00Z"
    unknown["status"]["conditions"][0].update(status="Unknown", lastTransitionTime="2026-12-02T10:05:00Z")

    nodes = [gpu_node("up"), down, unknown, untimed]
    since = cluster_view.summarise(cluster_view.view(node) for node in nodes).not_ready_since

    assert {name: moment.isoformat() for name, moment in since.items()} == {
        "down": "2026-12-02T10:00:00+00:00",
        "unknown": "2026-12-02T10:05:00+00:00",
    }


def test_only_pods_still_holding_gpus_count_as_running() -> None:
    views = [
        pods.view(PodBuilder("a").on("gpu-node-0", 1).bound().phase("Running").obj()),
        pods.view(PodBuilder("b").on("gpu-node-0", 2).phase("Pending").obj()),
        pods.view(PodBuilder("c").phase("Succeeded").obj()),
        pods.view(PodBuilder("d").phase("Running").deleting().obj()),
    ]
    snapshot = cluster_view.build_snapshot([cluster_view.view(gpu_node("gpu-node-0"))], views, now=7.0)
    assert sorted((r.request.key, r.gpu_indices) for r in snapshot.running) == [
        ("team-a/a", (1,)),
        ("team-a/b", (2,)),
    ]
    assert snapshot.now == 7.0 and len(snapshot.nodes) == 1


def test_a_node_is_read_again_only_when_what_placement_reads_changes() -> None:
    cache = ClusterCache()
    cache.put_node(gpu_node("n1"))
    first = cache.node_views["n1"]
    cache.nodes_changed = False
    cache.wake.clear()

    beat = gpu_node("n1")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-02T10:10:00Z"
    cache.put_node(beat)
    assert cache.node_views["n1"] is first  # a heartbeat: nothing to place again
    assert not cache.nodes_changed and not cache.wake.is_set()

    cordoned = gpu_node("n1")
    cordoned["spec"]["unschedulable"] = True
    cache.put_node(cordoned)
    assert cache.node_views["n1"].schedulable is False
    assert cache.nodes_changed and cache.wake.is_set()


def test_unchanged_nodes_give_the_previous_snapshots_very_tuple() -> None:
    views = [cluster_view.view(gpu_node("a")), cluster_view.view(gpu_node("b"))]
    first = cluster_view.build_snapshot(views, [], now=1.0)
    again = cluster_view.build_snapshot(views, [], now=2.0, previous=first.nodes)
    assert again.nodes is first.nodes  # the cycle judges feasibility once per tuple of nodes
    other = cluster_view.build_snapshot(views[:1], [], now=3.0, previous=first.nodes)
    assert other.nodes is not first.nodes and len(other.nodes) == 1
