"""`reserve` binding in the scheduling loop (operator/binding/reserve.py): a reservation pod per GPU slot
asks the device plugin for the GPU; the job's pod is made once the reservation reports its UUID, and
gets that UUID; co-tenants reuse the slot's reservation; one no pod holds goes, and one that never
reports is replaced."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from operator_builders import FakeKube, gpu_node
from test_operator_loop import NOW, FixedPredictor, _catalog, _settle

from horus_operator.api import keys
from horus_operator.api.dljob import Binding
from horus_operator.operator.binding import reservations
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.config import LoopConfig
from horus_operator.operator.jobs import jobspec, pods
from horus_operator.operator.loop import SchedulingLoop
from horus_operator.placement.registry import make_policy
from horus_operator.testing.builders import DLJobBuilder

RESERVATIONS = keys.RESERVATION_NAMESPACE


def _loop(
    kube: FakeKube, clock: list, settings: reservations.ReservationSettings | None = None
) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=make_policy("horus", predictor=FixedPredictor()),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(
            binding=Binding.RESERVE, reservation=settings or reservations.ReservationSettings()
        ),
        clock=lambda: clock[0],
    )


def _started(gpus: int) -> tuple[FakeKube, list, SchedulingLoop]:
    """One DLJob on a node of `gpus` GPUs, decided and placed once: its slot's reservation asked for."""
    kube, clock = FakeKube(), [NOW]
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=gpus)
    job = DLJobBuilder.stored("job").obj()
    kube.jobs[job_key(job)] = job
    loop = _loop(kube, clock)
    asyncio.run(_settle(loop))
    return kube, clock, loop


def _reservations(kube: FakeKube) -> dict[str, dict[str, Any]]:
    return {k: p for k, p in kube.pods.items() if k.startswith(f"{RESERVATIONS}/")}


def _job_pods(kube: FakeKube) -> dict[str, dict[str, Any]]:
    return {k: p for k, p in kube.pods.items() if not k.startswith(f"{RESERVATIONS}/")}


def _report(kube: FakeKube, uuids: dict[str, str]) -> None:
    """What `horus reserve` (or the fake agent) writes on each reservation pod."""
    for name, uuid in uuids.items():
        kube.pods[f"{RESERVATIONS}/{name}"]["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU] = uuid


def _visible(pod: dict[str, Any]) -> str:
    env = pod["spec"]["containers"][0]["env"]
    return next(e["value"] for e in env if e["name"] == "NVIDIA_VISIBLE_DEVICES")


def test_a_job_runs_on_the_gpu_its_slots_reservation_reports_and_a_co_tenant_reuses_it() -> None:
    kube, clock = FakeKube(), [NOW]
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=2)
    first = DLJobBuilder.stored("first").spec(maxSlowdown=3.0).obj()
    kube.jobs[job_key(first)] = first
    loop = _loop(kube, clock)
    asyncio.run(_settle(loop))
    (reservation,) = _reservations(kube).values()
    assert reservation["metadata"]["name"] == "gpu-gpu-node-0-0"
    container = reservation["spec"]["containers"][0]
    assert container["resources"]["limits"][keys.DEVICE_PLUGIN_RESOURCE] == "1"
    assert reservation["spec"]["nodeSelector"] == {keys.LABEL_HOSTNAME: "gpu-node-0"}
    assert _job_pods(kube) == {}  # no pod before the reservation says which GPU the plugin gave it
    assert "has not reported its GPU yet" in kube.jobs["team-a/first"]["status"]["message"]

    _report(kube, {"gpu-gpu-node-0-0": "GPU-plugin-chose-1"})
    asyncio.run(_settle(loop))
    (pod,) = _job_pods(kube).values()
    assert _visible(pod) == "GPU-plugin-chose-1"
    annotations = pod["metadata"]["annotations"]
    assert (annotations[keys.ANNOTATION_BINDING], annotations[keys.ANNOTATION_GPU_UUIDS]) == (
        "reserve",
        "GPU-plugin-chose-1",
    )
    assert pods.CDI_ANNOTATION not in annotations  # the default device mode: the variable alone
    # The job ends: nothing holds the slot any more, and its reservation goes at once.
    pod["status"]["phase"] = "Succeeded"
    asyncio.run(_settle(loop))
    assert _reservations(kube) == {}


def test_under_cdi_co_tenants_of_a_slot_are_annotated_with_its_reserved_gpu_and_told_no_variable() -> None:
    kube, clock = FakeKube(), [NOW]
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=1)
    for name in ("first", "second"):
        job = DLJobBuilder.stored(name).spec(maxSlowdown=3.0).obj()
        kube.jobs[job_key(job)] = job
    settings = reservations.ReservationSettings(device_mode=reservations.DeviceMode.CDI)
    loop = _loop(kube, clock, settings)
    asyncio.run(_settle(loop))
    assert list(_reservations(kube)) == [f"{RESERVATIONS}/gpu-gpu-node-0-0"]  # one slot, shared

    _report(kube, {"gpu-gpu-node-0-0": "GPU-plugin-chose-1"})
    asyncio.run(_settle(loop))
    made = _job_pods(kube).values()
    assert len(made) == 2
    for pod in made:
        assert pod["metadata"]["annotations"][pods.CDI_ANNOTATION] == "nvidia.com/gpu=GPU-plugin-chose-1"
        assert _visible(pod) == "void"


def test_a_reservation_no_pod_holds_is_deleted_and_one_that_never_reports_is_replaced() -> None:
    kube, clock, loop = _started(gpus=1)
    first_uid = next(iter(_reservations(kube).values()))["metadata"]["uid"]
    clock[0] = NOW + timedelta(seconds=61)  # silent past the report timeout
    asyncio.run(_settle(loop))
    (again,) = _reservations(kube).values()
    assert again["metadata"]["uid"] != first_uid  # replaced: the placement still wants the slot

    del kube.jobs["team-a/job"]  # the job is gone before it ever ran: nothing holds the slot
    clock[0] += timedelta(seconds=61)
    asyncio.run(_settle(loop))
    assert _reservations(kube) == {}


def _refuse_for_gpus(reservation: dict[str, Any]) -> None:
    """kube-scheduler: the device plugin has no GPU left on the node (others' pods hold them)."""
    message = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    reservation["status"]["conditions"] = [condition]


def test_a_slot_the_device_plugin_has_no_gpu_for_is_passed_over_for_another() -> None:
    kube, clock, loop = _started(gpus=2)
    (first,) = _reservations(kube).values()
    assert first["metadata"]["name"] == "gpu-gpu-node-0-0"
    _refuse_for_gpus(first)  # another scheduler's pod holds the plugin's GPU there
    asyncio.run(_settle(loop))
    assert list(_reservations(kube)) == [f"{RESERVATIONS}/gpu-gpu-node-0-1"]  # the slot counts taken
    clock[0] += timedelta(seconds=61)  # past the report timeout the slot may be free again: tried again
    asyncio.run(_settle(loop))
    assert f"{RESERVATIONS}/gpu-gpu-node-0-0" in _reservations(kube)


def test_a_pod_whose_reservation_is_gone_is_stopped_and_its_job_queues_again() -> None:
    kube, _, loop = _started(gpus=1)
    _report(kube, {"gpu-gpu-node-0-0": "GPU-a"})
    asyncio.run(_settle(loop))
    assert len(_job_pods(kube)) == 1
    del kube.pods[f"{RESERVATIONS}/gpu-gpu-node-0-0"]  # deleted by hand, or evicted and gone
    asyncio.run(_settle(loop))
    assert ("job", "ReservationLost") in [(name, reason) for name, reason, _ in kube.events]
    status = kube.jobs["team-a/job"]["status"]
    assert status["phase"] == "Queued" and "reservation pod gpu-gpu-node-0-0" in status["message"]
    assert list(_reservations(kube)) == [f"{RESERVATIONS}/gpu-gpu-node-0-0"]  # asked for again


def test_a_pod_wearing_a_reservations_labels_outside_its_namespace_is_no_reservation() -> None:
    # Round 4 of issue 44: the watch takes pods of every namespace; only horus-reservation's count.
    forged = reservations.body(("gpu-node-0", 0), "gpu-node-0", reservations.ReservationSettings())
    forged["metadata"]["namespace"] = "tenant-a"
    forged["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU] = "GPU-chosen-by-a-tenant"
    assert reservations.view(forged) is None
    cache = ClusterCache()
    cache.put_reservation(forged)
    assert cache.reservations == {}


def test_a_reserved_slot_is_seen_through_the_agents_reading_of_the_gpu_its_reservation_holds() -> None:
    kube, _, loop = _started(gpus=2)
    _report(kube, {"gpu-gpu-node-0-0": "GPU-1"})  # the plugin gave slot 0 the agent's GPU 1
    asyncio.run(_settle(loop))
    stamp = (NOW - timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    gpus = [
        {"index": 0, "uuid": "GPU-0", "healthy": True, "memoryUsedMiB": 0, "utilization": 0.0},
        {"index": 1, "uuid": "GPU-1", "healthy": True, "memoryUsedMiB": 9000, "utilization": 0.7},
    ]
    body = {
        "metadata": {"name": "gpu-node-0"},
        "status": {"lastUpdate": stamp, "nvmlAvailable": True, "gpus": gpus},
    }
    loop._cache.put_gpunode(body, received_at=NOW.timestamp())
    (node,) = loop._views.nodes(NOW)
    assert [(g.index, g.uuid, g.observed_memory_used_mib) for g in node.gpus] == [
        (0, "GPU-1", 9000.0),  # the job's slot reads its job's GPU
        (1, "GPU-0", 0.0),  # the other slot reads the GPU the plugin still has free
    ]


# A placement kept on its slots while their reservations report (operator/nominations.py). Plain cycles,
# no resync between them: a resync is an operator's restart, which forgets what is kept.
async def _cycles(loop: SchedulingLoop, cycles: int = 3) -> None:
    for _ in range(cycles):
        await loop.cycle()
        await loop.settle()


def _reserved(kube: FakeKube, loop: SchedulingLoop, uuids: dict[str, str]) -> None:
    """`_report`, seen by the watch."""
    _report(kube, uuids)
    for name in uuids:
        loop._cache.put_reservation(kube.pods[f"{RESERVATIONS}/{name}"])


def _exclusive(kube: FakeKube, name: str, **spec: Any) -> dict[str, Any]:
    job = DLJobBuilder.stored(name).spec(maxSlowdown=1.0, **spec).obj()
    kube.jobs[job_key(job)] = job
    return job


def _placed_once(gpus: int, name: str = "job") -> tuple[FakeKube, list, SchedulingLoop]:
    """An exclusive DLJob on a node of `gpus` GPUs, placed in one cycle: kept on its slot, whose
    reservation has not reported."""
    kube, clock = FakeKube(), [NOW]
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=gpus)
    _exclusive(kube, name)
    loop = _loop(kube, clock)
    asyncio.run(_settle(loop, cycles=1))
    return kube, clock, loop


def _gpus_of(kube: FakeKube) -> dict[str, tuple[str, str]]:
    """Job name -> (its pod's GPU indices, the UUID it is told)."""
    made = _job_pods(kube).values()
    return {
        p["metadata"]["labels"][keys.LABEL_JOB]: (
            p["metadata"]["annotations"][keys.ANNOTATION_GPUS],
            _visible(p),
        )
        for p in made
    }


def test_a_placement_awaiting_its_reservation_keeps_its_slot_from_a_job_that_comes_first() -> None:
    kube, _, loop = _placed_once(gpus=2, name="first")
    assert list(_reservations(kube)) == [f"{RESERVATIONS}/gpu-gpu-node-0-0"]

    # A job ahead of it in the queue: decided afresh, "first" would lose slot 0 to it.
    loop._cache.put_job(_exclusive(kube, "urgent", priority=10))
    asyncio.run(_cycles(loop))
    assert sorted(_reservations(kube)) == [
        f"{RESERVATIONS}/gpu-gpu-node-0-0",
        f"{RESERVATIONS}/gpu-gpu-node-0-1",
    ]
    assert _job_pods(kube) == {}

    _reserved(kube, loop, {"gpu-gpu-node-0-0": "GPU-a", "gpu-gpu-node-0-1": "GPU-b"})
    asyncio.run(_cycles(loop))
    assert _gpus_of(kube) == {"first": ("0", "GPU-a"), "urgent": ("1", "GPU-b")}


def test_a_kept_placement_whose_reservation_is_deleted_is_decided_afresh() -> None:
    kube, _, loop = _placed_once(gpus=1, name="job")
    doomed = kube.pods.pop(f"{RESERVATIONS}/gpu-gpu-node-0-0")  # deleted by hand
    loop._cache.drop_reservation(doomed)
    asyncio.run(_cycles(loop, cycles=1))
    (again,) = _reservations(kube).values()  # the fresh decision asks for its slot again
    assert again["metadata"]["uid"] != doomed["metadata"]["uid"]

    _reserved(kube, loop, {"gpu-gpu-node-0-0": "GPU-a"})
    asyncio.run(_cycles(loop))
    assert _gpus_of(kube) == {"job": ("0", "GPU-a")}


def test_a_kept_placement_whose_reservation_never_reports_is_decided_afresh() -> None:
    kube, clock, loop = _placed_once(gpus=1, name="job")
    silent = _reservations(kube)[f"{RESERVATIONS}/gpu-gpu-node-0-0"]
    clock[0] = NOW + timedelta(seconds=61)  # silent past the report timeout: repaired away
    asyncio.run(_cycles(loop))
    (again,) = _reservations(kube).values()
    assert again["metadata"]["uid"] != silent["metadata"]["uid"]
    assert "has not reported its GPU yet" in kube.jobs["team-a/job"]["status"]["message"]


def test_a_restart_forgets_what_is_kept_and_decides_the_same_slot_on_its_reservation() -> None:
    kube, clock, _ = _placed_once(gpus=2, name="job")
    (before,) = _reservations(kube).values()
    restarted = _loop(kube, clock)  # nothing kept: the job is decided again
    asyncio.run(_settle(restarted, cycles=1))
    (after,) = _reservations(kube).values()
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # the same slot, its reservation kept

    _reserved(kube, restarted, {"gpu-gpu-node-0-0": "GPU-a"})
    asyncio.run(_cycles(restarted))
    assert _gpus_of(kube) == {"job": ("0", "GPU-a")}


def test_a_kept_placement_ends_when_its_job_is_deleted_and_its_gpus_are_free_again() -> None:
    kube, _, loop = _placed_once(gpus=1, name="gone")
    gone = kube.jobs["team-a/gone"]
    del kube.jobs["team-a/gone"]
    loop._cache.drop_job(gone)
    loop._cache.put_job(_exclusive(kube, "next"))
    _reserved(kube, loop, {"gpu-gpu-node-0-0": "GPU-a"})
    asyncio.run(_cycles(loop))
    assert _gpus_of(kube) == {"next": ("0", "GPU-a")}


def test_a_reservation_is_deleted_by_its_uid_so_the_slots_next_one_made_meanwhile_stays() -> None:
    kube, clock, loop = _placed_once(gpus=1, name="job")
    key = f"{RESERVATIONS}/gpu-gpu-node-0-0"
    cached_uid = kube.pods[key]["metadata"]["uid"]
    # The slot's reservation was deleted and made again (a replica killed mid-way, another's cycle):
    # the API server holds a new incarnation that this replica's watch has not shown it yet.
    kube.pods[key]["metadata"]["uid"] = "made-again"
    gone = kube.jobs.pop("team-a/job")  # nothing wants the slot any more, as this replica sees it
    loop._cache.drop_job(gone)
    clock[0] = NOW + timedelta(seconds=61)  # and its reservation never reported: this replica deletes it
    asyncio.run(_cycles(loop, cycles=1))
    assert kube.pods[key]["metadata"]["uid"] == "made-again"  # not the incarnation it decided on
    assert cached_uid not in {r.uid for r in loop._cache.reservations.values()}
