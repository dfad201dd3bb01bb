import pytest
from agent_builders import inventory, pod

from horus_operator.agent.fake import FakeBackend, FakeInventory
from horus_operator.agent.readings import PodInfo
from horus_operator.api import keys
from horus_operator.prediction.measured import TruthTable


def test_a_pod_alone_shows_its_predicted_utilization_and_memory_on_its_gpu() -> None:
    sample = FakeBackend(inventory()).sample(
        [pod("a", devices=("1",), utilization=0.4, memory_mib=3000)], now=5.0
    )

    idle, busy = sample.gpus
    assert (idle.utilization, idle.memory_used_mib) == (0.0, 0.0)
    assert (busy.utilization, busy.memory_used_mib) == (0.4, 3000.0)
    assert sample.taken_at == 5.0
    assert [(p.gpu_index, p.pod_uid, p.utilization) for p in sample.processes] == [(1, "uid-a", 0.4)]


def test_gpus_named_unhealthy_read_unhealthy_and_keep_their_pods_readings() -> None:
    failing = FakeInventory(
        node="node-a", count=2, product="Tesla-V100-SXM2-16GB", memory_mib=16384, unhealthy=frozenset({1})
    )

    sample = FakeBackend(failing).sample([pod("a", devices=("1",), utilization=0.4)], now=0.0)

    assert [(g.index, g.healthy, g.utilization) for g in sample.gpus] == [(0, True, 0.0), (1, False, 0.4)]


def test_pods_that_oversubscribe_a_gpu_time_slice_it_in_proportion_to_their_demand() -> None:
    pods = [pod("a", utilization=0.9, memory_mib=4000), pod("b", utilization=0.6, memory_mib=2000)]

    sample = FakeBackend(inventory()).sample(pods, now=0.0)

    assert sample.gpus[0].utilization == 1.0
    assert sample.gpus[0].memory_used_mib == 6000.0
    shares = {p.pod_uid: p.utilization for p in sample.processes}
    assert shares == {"uid-a": 0.9 / 1.5, "uid-b": 0.6 / 1.5}


def test_memory_is_capped_at_the_gpu_size() -> None:
    pods = [pod("a", memory_mib=10000), pod("b", memory_mib=10000)]

    assert FakeBackend(inventory(memory_mib=16384)).sample(pods, now=0.0).gpus[0].memory_used_mib == 16384


def test_gpus_are_found_by_uuid_index_or_all() -> None:
    fake_inventory = inventory(count=3)
    pods = [
        pod("by-uuid", devices=(fake_inventory.uuid(2),), utilization=0.2),
        pod("everywhere", devices=("all",), utilization=0.1),
        pod("unknown-device", devices=("7", "GPU-nope"), utilization=0.3),
    ]

    sample = FakeBackend(fake_inventory).sample(pods, now=0.0)

    assert [round(g.utilization, 6) for g in sample.gpus] == [0.1, 0.1, 0.3]


def test_without_visible_devices_the_operators_gpu_annotation_is_used() -> None:
    base = pod("a", devices=(), utilization=0.3)
    annotated = PodInfo(
        uid=base.uid,
        namespace=base.namespace,
        name=base.name,
        annotations={**base.annotations, "horus.dev/gpus": "0,1"},
    )

    assert [g.utilization for g in FakeBackend(inventory()).sample([annotated], now=0.0).gpus] == [0.3, 0.3]


def test_pods_without_a_prediction_are_left_out() -> None:
    sample = FakeBackend(inventory()).sample([pod("plain", utilization=None)], now=0.0)

    assert sample.gpus[0].utilization == 0.0
    assert sample.processes == ()


def test_inventory_comes_from_gpu_feature_discovery_labels_and_uuids_are_stable() -> None:
    labels = {
        keys.LABEL_GPU_COUNT: "4",
        keys.LABEL_GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB",
        keys.LABEL_GPU_MEMORY: "40960",
    }

    fake_inventory = FakeInventory.from_node_labels("n1", labels)

    assert (fake_inventory.count, fake_inventory.product, fake_inventory.memory_mib) == (
        4,
        "NVIDIA-A100-SXM4-40GB",
        40960,
    )
    assert fake_inventory.uuid(0) == FakeInventory.from_node_labels("n1", labels).uuid(0)
    assert fake_inventory.uuid(0).startswith("GPU-")
    assert (
        len(
            {fake_inventory.uuid(i) for i in range(4)}
            | {FakeInventory.from_node_labels("n2", labels).uuid(0)}
        )
        == 5
    )


# With a truth table: measured pairs, hand-written (v100: a 10 steps/s alone, b 4 steps/s alone;
# together a runs at 4 steps/s (2.5x slower) and b at 2 (2x slower); c is measured alone only).
TRUTH = TruthTable(
    isolated={("v100", "a", 32): 10.0, ("v100", "b", 64): 4.0, ("v100", "c", 8): 1.0},
    pairs={
        (("v100", "a", 32), ("v100", "b", 64)): (2.5, 2.0),
        (("v100", "b", 64), ("v100", "a", 32)): (2.0, 2.5),
    },
)


def test_with_truth_a_measured_pair_reports_measured_rates_and_utilization_over_its_slowdown() -> None:
    pods = [pod("a", utilization=0.8, trains=("a", 32)), pod("b", utilization=0.5, trains=("b", 64))]

    sample = FakeBackend(inventory(), TRUTH).sample(pods, now=0.0)

    runs = {p.pod_uid: (round(p.utilization, 6), p.steps_per_second) for p in sample.processes}
    assert runs == {"uid-a": (0.32, 4.0), "uid-b": (0.25, 2.0)}
    assert sample.gpus[0].utilization == pytest.approx(0.57)


def test_with_truth_a_pod_alone_reports_its_measured_isolated_rate() -> None:
    sample = FakeBackend(inventory(), TRUTH).sample([pod("c", utilization=0.4, trains=("c", 8))], now=0.0)

    assert [(p.utilization, p.steps_per_second) for p in sample.processes] == [(0.4, 1.0)]


def test_with_truth_an_unmeasured_pair_falls_back_to_the_echo_without_inventing_a_rate() -> None:
    pods = [pod("a", utilization=0.9, trains=("a", 32)), pod("c", utilization=0.6, trains=("c", 8))]

    measured = FakeBackend(inventory(), TRUTH).sample(pods, now=0.0)
    echoed = FakeBackend(inventory()).sample(pods, now=0.0)

    assert measured == echoed
    assert all(p.steps_per_second is None for p in measured.processes)


def test_with_truth_pods_without_a_request_or_on_an_unmeasured_gpu_type_are_echoed() -> None:
    no_request = [pod("a", utilization=0.8), pod("b", utilization=0.5, trains=("b", 64))]
    a100 = FakeInventory(node="node-a", count=1, product="NVIDIA-A100-SXM4-40GB", memory_mib=40960)
    on_a100 = [pod("a", utilization=0.8, trains=("a", 32))]

    assert FakeBackend(inventory(), TRUTH).sample(no_request, 0.0) == FakeBackend(inventory()).sample(
        no_request, 0.0
    )
    assert FakeBackend(a100, TRUTH).sample(on_a100, 0.0) == FakeBackend(a100).sample(on_a100, 0.0)


def test_with_truth_a_measured_busy_fraction_alone_replaces_the_predicted_one() -> None:
    """A loader-bound job the operator predicted 90 % busy, measured 10 % busy alone (util_*_alone)."""
    truth = TruthTable(
        isolated=TRUTH.isolated,
        pairs=TRUTH.pairs,
        utilization={("v100", "a", 32): 0.1, ("v100", "c", 8): 0.2},
    )
    alone = FakeBackend(inventory(), truth).sample([pod("c", utilization=0.9, trains=("c", 8))], now=0.0)
    pods = [pod("a", utilization=0.9, trains=("a", 32)), pod("b", utilization=0.5, trains=("b", 64))]
    shared = FakeBackend(inventory(), truth).sample(pods, now=0.0)

    assert [(p.utilization, p.steps_per_second) for p in alone.processes] == [(0.2, 1.0)]
    runs = {p.pod_uid: round(p.utilization, 6) for p in shared.processes}
    assert runs == {"uid-a": 0.04, "uid-b": 0.25}  # a: 0.1 / 2.5; b has no measurement: 0.5 / 2


def test_without_truth_no_rate_is_reported() -> None:
    sample = FakeBackend(inventory()).sample([pod("a", trains=("a", 32))], now=0.0)

    assert [p.steps_per_second for p in sample.processes] == [None]
