from __future__ import annotations

from typing import Any

from horus_operator.agent import gpunode as agent_gpunode
from horus_operator.agent import summary
from horus_operator.agent.readings import GpuReading, Sample
from horus_operator.operator import cluster_view
from horus_operator.operator.binding import reservations
from horus_operator.operator.telemetry import gpunodes
from horus_operator.placement.types import Gpu, Node

NOW = 1_800_000_000.0  # epoch seconds


def node(name: str = "n1", gpus: int = 2) -> Node:
    return Node(
        name=name, gpus=tuple(Gpu(node=name, index=i, product="v100", memory_mib=16384) for i in range(gpus))
    )


def gpunode(
    name: str = "n1", *, age: float = 5.0, nvml: bool = True, gpus: list[dict[str, Any]] | None = None
) -> dict:
    listed = (
        gpus
        if gpus is not None
        else [
            {"index": 0, "uuid": "GPU-a", "healthy": True, "memoryUsedMiB": 4000, "utilization": 0.5},
            {"index": 1, "uuid": "GPU-b", "healthy": True, "memoryUsedMiB": 0, "utilization": 0.0},
        ]
    )
    return {
        "metadata": {"name": name},
        "status": {"lastUpdate": agent_gpunode.rfc3339(NOW - age), "nvmlAvailable": nvml, "gpus": listed},
    }


def parsed(name: str = "n1", **fields: Any) -> gpunodes.NodeTelemetry:
    """As the operator parses a GPUNode it sees for the first time, at NOW."""
    return gpunodes.parse(gpunode(name, **fields), received_at=NOW)


def usable_at(report: gpunodes.NodeTelemetry, now: float) -> bool:
    (merged,) = gpunodes.merge([node()], [report], now=now, ttl=60)
    return all(g.healthy for g in merged.gpus)


def test_fresh_telemetry_gives_uuids_health_and_observed_usage() -> None:
    (merged,) = gpunodes.merge([node()], [parsed()], now=NOW, ttl=60)

    assert [(g.uuid, g.healthy, g.observed_memory_used_mib, g.observed_utilization) for g in merged.gpus] == [
        ("GPU-a", True, 4000.0, 0.5),
        ("GPU-b", True, 0.0, 0.0),
    ]


def test_a_node_without_an_agent_is_left_as_the_labels_describe_it() -> None:
    plain = node("n2")

    assert gpunodes.merge([plain], [parsed("n1")], now=NOW) == (plain,)


def test_a_silent_agent_beyond_the_ttl_makes_its_gpus_unhealthy_but_keeps_their_uuids() -> None:
    (merged,) = gpunodes.merge([node()], [parsed(age=61)], now=NOW, ttl=60)

    assert [(g.uuid, g.healthy, g.observed_utilization) for g in merged.gpus] == [
        ("GPU-a", False, None),
        ("GPU-b", False, None),
    ]


def test_unavailable_nvml_or_a_gpu_reported_unhealthy_or_missing_is_unhealthy() -> None:
    (no_nvml,) = gpunodes.merge([node()], [parsed(nvml=False)], now=NOW)
    (partial,) = gpunodes.merge(
        [node(gpus=3)],
        [
            parsed(
                gpus=[
                    {"index": 0, "uuid": "GPU-a", "healthy": False},
                    {"index": 1, "uuid": "GPU-b", "healthy": True},
                ]
            )
        ],
        now=NOW,
    )

    assert [g.healthy for g in no_nvml.gpus] == [False, False]
    assert [g.healthy for g in partial.gpus] == [False, True, False]


def test_an_unschedulable_gpu_stays_unhealthy_whatever_the_agent_says() -> None:
    sick = Node(name="n1", gpus=(Gpu(node="n1", index=0, product="v100", memory_mib=16384, healthy=False),))

    (merged,) = gpunodes.merge([sick], [parsed()], now=NOW)

    assert merged.gpus[0].healthy is False


def test_what_the_agent_writes_is_what_the_operator_reads() -> None:
    reading = GpuReading(
        index=0,
        uuid="GPU-x",
        product="Tesla V100",
        memory_total_mib=16384,
        memory_used_mib=2500.0,
        utilization=0.25,
        memory_utilization=0.1,
    )
    node_summary = summary.summarize(
        node="n1", backend="fake", samples=[Sample(taken_at=NOW, gpus=(reading,))], pods=[]
    )
    body = {"metadata": {"name": "n1"}, **agent_gpunode.status_body(node_summary, sample_interval=1.0)}

    parsed = gpunodes.parse(body, received_at=NOW)

    assert (parsed.updated_at, parsed.nvml_available) == (NOW, True)
    assert parsed.gpus[0] == gpunodes.GpuTelemetry(
        index=0, uuid="GPU-x", healthy=True, memory_used_mib=2500, utilization=0.25
    )


def test_the_operator_snapshot_carries_the_agents_telemetry() -> None:
    labels = {
        "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.memory": "16384",
    }
    node_body = {
        "metadata": {"name": "n1", "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }

    snapshot = cluster_view.build_snapshot(
        [cluster_view.view(node_body)], [], now=NOW, gpunodes=[parsed(age=120)], telemetry_ttl=60
    )

    assert [(g.uuid, g.healthy) for g in snapshot.nodes[0].gpus] == [("GPU-a", False), ("GPU-b", False)]


def test_a_merge_is_reused_until_the_telemetry_changes_or_goes_stale() -> None:
    report = parsed(age=0)

    first = gpunodes.merge([node()], [report], now=NOW)
    again = gpunodes.merge([node()], [report], now=NOW + 1)  # equal labelled node, rebuilt each cycle
    stale = gpunodes.merge([node()], [report], now=NOW + 61, ttl=60)

    assert again[0] is first[0]
    assert [g.healthy for g in stale[0].gpus] == [False, False]


# Clock skew: the agent stamps `lastUpdate` with its own clock; the operator judges by receipt.
SKEW = 300.0  # five minutes


def test_an_agent_minutes_ahead_is_trusted_one_ttl_after_it_falls_silent_not_five_minutes_more() -> None:
    ahead = parsed(age=-SKEW)  # published just now, stamped five minutes in the future

    assert usable_at(ahead, NOW + 60)
    assert not usable_at(ahead, NOW + 61)


def test_an_agent_minutes_behind_is_fresh_from_its_next_publish_on() -> None:
    first = parsed(age=SKEW)  # the operator starts: the agent's stamp is all it knows of the publish
    second = gpunodes.parse(gpunode(age=SKEW - 10), received_at=NOW + 10, previous=first)

    assert not usable_at(first, NOW)
    assert usable_at(second, NOW + 10)
    assert usable_at(second, NOW + 70) and not usable_at(second, NOW + 71)


def test_the_same_publish_seen_again_keeps_the_time_it_was_first_heard() -> None:
    heard = parsed(age=0)
    relisted = gpunodes.parse(gpunode(age=0), received_at=NOW + 50, previous=heard)  # a watch re-list

    assert relisted.heard_at == heard.heard_at == NOW
    assert not usable_at(relisted, NOW + 61)


def test_a_long_silent_agent_is_stale_at_once_when_the_operator_starts() -> None:
    assert not usable_at(parsed(age=600), NOW)


def test_a_gpunode_never_published_is_never_fresh() -> None:
    never = gpunodes.parse({"metadata": {"name": "n1"}, "status": {}}, received_at=NOW)

    assert never.heard_at is None and not never.fresh(NOW, ttl=60)


def _telemetry(*gpus: tuple[int, str, bool]) -> dict[int, gpunodes.GpuTelemetry]:
    """The agent's GPUs by its index: (index, UUID, healthy)."""
    return {
        index: gpunodes.GpuTelemetry(index, uuid, healthy, memory_used_mib=float(index), utilization=None)
        for index, uuid, healthy in gpus
    }


def _uuids(read: dict[int, gpunodes.GpuTelemetry]) -> dict[int, str | None]:
    return {slot: gpu.uuid for slot, gpu in sorted(read.items())}


def test_under_reserve_a_slot_reads_the_gpu_its_reservation_reported_and_no_gpu_is_read_twice() -> None:
    # The device plugin gave slot 0's reservation the agent's GPU 2: slot 0 reads it, and slot 2, whose
    # same-numbered GPU that reservation holds, reads the GPU nobody holds or reads (GPU 0).
    agent = _telemetry((0, "GPU-a", True), (1, "GPU-b", True), (2, "GPU-c", True))
    read = gpunodes.slot_readings(agent, {0: "GPU-c"})
    assert _uuids(read) == {0: "GPU-c", 1: "GPU-b", 2: "GPU-a"}
    # Two reservations swapping GPUs: each slot reads its own.
    assert _uuids(gpunodes.slot_readings(agent, {0: "GPU-b", 1: "GPU-a"})) == {
        0: "GPU-b",
        1: "GPU-a",
        2: "GPU-c",
    }


def test_a_reservation_the_agent_does_not_list_and_a_gpu_off_the_bus_keep_todays_rules() -> None:
    agent = _telemetry((0, "GPU-a", True), (1, "GPU-b", True))  # the labels promise 3: GPU 2 fell off
    assert _uuids(gpunodes.slot_readings(agent, {1: "GPU-unknown"})) == {0: "GPU-a", 1: "GPU-b"}
    # Slot 0 reserved on GPU 1: slot 1 reads the free GPU 0; slot 2 has no GPU to read (absent).
    assert _uuids(gpunodes.slot_readings(agent, {0: "GPU-b"})) == {0: "GPU-b", 1: "GPU-a"}


def test_merged_slots_carry_the_uuid_health_and_usage_of_the_gpu_their_reservation_holds() -> None:
    report = parsed(
        gpus=[
            {"index": 0, "uuid": "GPU-a", "healthy": False, "memoryUsedMiB": 0, "utilization": 0.0},
            {"index": 1, "uuid": "GPU-b", "healthy": True, "memoryUsedMiB": 9000, "utilization": 0.8},
        ]
    )
    (merged,) = gpunodes.merge([node()], [report], now=NOW, reserved={"n1": {0: "GPU-b"}})
    slot0, slot1 = merged.gpus
    assert (slot0.uuid, slot0.healthy, slot0.observed_memory_used_mib, slot0.observed_utilization) == (
        "GPU-b",
        True,
        9000.0,
        0.8,
    )
    assert (slot1.uuid, slot1.healthy) == ("GPU-a", False)  # the GPU the plugin would give next is bad
    (unreserved,) = gpunodes.merge([node()], [report], now=NOW, reserved={"other-node": {0: "GPU-b"}})
    assert [g.uuid for g in unreserved.gpus] == ["GPU-a", "GPU-b"]  # no reservation here: by index


def test_the_reported_reservations_are_those_holding_their_gpu() -> None:
    def view(name: str, index: int, uuid: str, phase: str = "Running") -> reservations.ReservationView:
        return reservations.ReservationView(name, "n1", index, uuid, phase, deleting=False, created_at=None)

    existing = [view("r0", 0, "GPU-b"), view("r1", 1, ""), view("r2", 2, "GPU-a", phase="Failed")]
    assert reservations.reported(existing) == {"n1": {0: "GPU-b"}}
