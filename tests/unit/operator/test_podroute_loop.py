"""The pod route in the scheduling loop, against the fake API adapter: gated pods are queued beside
DLJobs, released once by one guarded patch, counted on their GPUs after a restart, and told why they
wait (`podroute/route.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from typing import Any

from operator_builders import FakeKube, gpu_node
from test_operator_loop import NOW, FirstFreeGpu, _catalog
from test_podroute_admission import MODEL, apply_json_patch

from horus_operator.agent import resourceslice
from horus_operator.agent.fake import FakeInventory
from horus_operator.api import keys
from horus_operator.operator import apierrors
from horus_operator.operator.binding import reservations
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.dra import claims
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.operator.podroute import admission, release
from horus_operator.operator.podroute.route import PodRoute


class PodKube(FakeKube):
    """FakeKube with the pod route's calls; a patch is refused (409) unless its resourceVersion is the
    stored pod's, as the API server does."""

    def __init__(self, bindings: admission.Bindings | None = None) -> None:
        super().__init__()
        self.bindings = bindings or admission.Bindings()  # what the webhook admitted the pods with
        self.managed: dict[str, dict[str, Any]] = {}
        self.patches = 0
        self.conditions: dict[str, dict[str, Any]] = {}
        self.pod_events: list[tuple[str, str, str]] = []
        self._versions = itertools.count(100)

    def add(self, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        body = {
            "metadata": {
                "name": name,
                "namespace": "team",
                "uid": f"uid-{name}",
                "labels": {keys.LABEL_MANAGED: "true"},
                "annotations": {**MODEL, **(annotations or {})},
                "creationTimestamp": "2026-12-02T09:00:00Z",
            },
            "spec": {"containers": [{"name": "train", "image": "t"}]},
        }
        changes = admission.admit(body, bindings=self.bindings)
        assert changes is not None
        body["spec"].update(changes["spec"])
        body["metadata"]["resourceVersion"] = str(next(self._versions))
        body["status"] = {"phase": "Pending"}
        self.managed[job_key(body)] = body
        return copy.deepcopy(body)

    async def list_managed_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.managed.values()))

    async def json_patch_pod(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any]:
        stored = self.managed[f"{namespace}/{name}"]
        wanted = next(op["value"] for op in operations if op["path"] == "/metadata/resourceVersion")
        if wanted != stored["metadata"]["resourceVersion"]:
            raise apierrors.Conflict(409, "Conflict")
        patched = apply_json_patch(stored, operations)
        patched["metadata"]["resourceVersion"] = str(next(self._versions))
        self.managed[f"{namespace}/{name}"] = patched
        self.patches += 1
        return copy.deepcopy(patched)

    async def set_pod_condition(self, namespace: str, name: str, condition: dict[str, Any]) -> None:
        self.conditions[name] = dict(condition)

    async def guard_pod_condition(
        self, namespace: str, name: str, condition: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        stored = self.managed[f"{namespace}/{name}"]
        if version is not None and version != stored["metadata"]["resourceVersion"]:
            raise apierrors.Conflict(409, "Conflict")
        kept = [c for c in stored["status"].get("conditions", []) if c["type"] != condition["type"]]
        stored["status"]["conditions"] = [*kept, dict(condition)]
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(stored)

    async def delete_pod(
        self, namespace: str, name: str, grace_period_s: int = 0, *, uid: str | None = None
    ) -> None:
        self.managed.pop(f"{namespace}/{name}", None)
        await super().delete_pod(namespace, name, grace_period_s, uid=uid)  # Horus's own: reservations

    async def post_event(
        self, involved: dict[str, Any], *, kind: str, reason: str, message: str, **_: Any
    ) -> None:
        self.pod_events.append((involved["metadata"]["name"], reason, message))


def _loop(
    kube: PodKube, *, dra_served: bool = False, reserve_cdi: bool = False
) -> tuple[SchedulingLoop, PodRoute]:
    """`reserve_cdi`: the operator runs `--reservation-device-mode cdi`."""
    cache = ClusterCache()
    resolver = jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {})
    route = PodRoute(kube=kube, cache=cache, resolver=resolver, clock=lambda: NOW, reserve_cdi=reserve_cdi)  # type: ignore[arg-type]
    mode = reservations.DeviceMode.CDI if reserve_cdi else reservations.DeviceMode.ENV
    loop = SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=cache,
        policy=FirstFreeGpu(),
        resolver=resolver,
        config=LoopConfig(
            dra_served=dra_served, reservation=reservations.ReservationSettings(device_mode=mode)
        ),
        clock=lambda: NOW,
        podroute=route,
    )
    return loop, route


async def _run(loop: SchedulingLoop, cycles: int = 3) -> None:
    await loop.resync()
    for _ in range(cycles):
        await loop.cycle()
        await loop.settle()


def _cluster(gpus: int) -> PodKube:
    kube = PodKube()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=gpus)
    return kube


def test_a_gated_pod_is_released_once_to_the_gpu_the_cycle_chose() -> None:
    kube = _cluster(gpus=2)
    kube.add("a")
    loop, _ = _loop(kube)
    asyncio.run(_run(loop))
    assert kube.patches == 1
    pod = kube.managed["team/a"]
    annotations = pod["metadata"]["annotations"]
    assert (annotations[keys.ANNOTATION_NODE], annotations[keys.ANNOTATION_GPUS]) == ("gpu-node-0", "0")
    assert annotations[keys.ANNOTATION_VISIBLE_DEVICES] == "0"
    assert pod["spec"]["schedulingGates"] == []
    assert pod["spec"]["nodeSelector"] == {keys.LABEL_HOSTNAME: "gpu-node-0"}
    assert kube.conditions["a"]["status"] == "True" and kube.conditions["a"]["reason"] == "Placed"
    assert [reason for _, reason, _ in kube.pod_events] == ["Placed"]
    assert kube.creates == 0  # the pod is the controller's: Horus creates none


def test_a_restarted_operator_counts_released_pods_on_their_gpus_and_releases_none_again() -> None:
    kube = _cluster(gpus=2)
    kube.add("a")
    asyncio.run(_run(_loop(kube)[0]))
    kube.add("b")
    restarted, _ = _loop(kube)
    asyncio.run(_run(restarted))
    assert kube.patches == 2
    gpus = {
        name: kube.managed[f"team/{name}"]["metadata"]["annotations"][keys.ANNOTATION_GPUS] for name in "ab"
    }
    assert gpus == {"a": "0", "b": "1"}


def test_a_pod_that_changed_since_the_decision_is_not_released_on_the_stale_copy() -> None:
    kube = _cluster(gpus=1)
    kube.add("a")
    loop, route = _loop(kube)

    async def scenario() -> None:
        await loop.resync()
        kube.managed["team/a"]["metadata"]["resourceVersion"] = "999"  # changed; the watch lags
        await loop.cycle()
        assert kube.patches == 0
        route.put(copy.deepcopy(kube.managed["team/a"]))  # the watch delivers it
        await loop.cycle()
        await loop.settle()

    asyncio.run(scenario())
    assert kube.patches == 1


def test_a_pod_waiting_for_a_gpu_is_told_why_and_one_horus_cannot_run_stays_gated() -> None:
    kube = _cluster(gpus=1)
    kube.add("a")
    kube.add("b")
    kube.add("c", {keys.ANNOTATION_MODEL: "nosuchnet"})  # past admission (e.g. gated by hand)
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.patches == 1
    waiting = next(name for name in "ab" if kube.managed[f"team/{name}"]["spec"]["schedulingGates"])
    assert kube.conditions[waiting]["reason"] == "Waiting"
    assert (waiting, "Waiting", "waiting: no free GPU") in kube.pod_events
    assert kube.conditions["c"]["reason"] == "InvalidSpec"
    assert "metadata.annotations['horus.dev/model']='nosuchnet'" in kube.conditions["c"]["message"]
    assert kube.managed["team/c"]["spec"]["schedulingGates"] == [{"name": keys.SCHEDULING_GATE}]


def test_a_pod_needing_more_gpus_than_any_node_has_says_so_naming_its_annotation() -> None:
    kube = _cluster(gpus=2)
    kube.add("big", {keys.ANNOTATION_GPU_COUNT: "4"})
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.patches == 0
    assert "metadata.annotations['horus.dev/gpu-count']" in kube.conditions["big"]["message"]


class DyingKube(PodKube):
    """The operator dies in the middle of a cycle's releases: the first patch lands, the rest never
    leave the process."""

    async def json_patch_pod(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any]:
        if self.patches >= 1:
            raise asyncio.CancelledError  # the process is gone
        return await super().json_patch_pod(namespace, name, operations)


def test_an_operator_dying_between_decision_and_release_loses_and_doubles_nothing() -> None:
    dying = DyingKube()
    dying.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=4)
    for name in "abc":
        dying.add(name)
    loop, _ = _loop(dying)
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(_run(loop, cycles=1))
    assert dying.patches == 1  # one pod released, two decided but never released
    survivor = PodKube()  # the next leader, on what the API server holds
    survivor.nodes, survivor.managed = dying.nodes, dying.managed
    asyncio.run(_run(_loop(survivor)[0]))
    assert survivor.patches == 2
    gpus = [pod["metadata"]["annotations"][keys.ANNOTATION_GPUS] for pod in survivor.managed.values()]
    assert sorted(gpus) == ["0", "1", "2"]  # each pod on its own GPU, the first one where it was


GANG = {keys.ANNOTATION_GROUP: "ring", keys.ANNOTATION_GROUP_SIZE: "4"}


def _gang(kube: PodKube, count: int = 4) -> None:
    for member in range(count):
        kube.add(f"ring-{member}", GANG)


def _released(kube: PodKube) -> list[str]:
    return sorted(
        pod["metadata"]["name"] for pod in kube.managed.values() if not pod["spec"]["schedulingGates"]
    )


def test_a_gang_with_room_for_three_of_four_releases_none_until_room_frees() -> None:
    kube = _cluster(gpus=3)
    _gang(kube)
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.patches == 0
    assert kube.conditions["ring-0"]["message"] == (
        "waiting: gang group team/ring is placed all or none, and 3 of the 4 pods it needs fit now"
    )
    kube.nodes["gpu-node-1"] = gpu_node("gpu-node-1", count=1)  # room for the fourth
    asyncio.run(_run(_loop(kube)[0]))
    assert _released(kube) == [f"ring-{member}" for member in range(4)]
    placements = {
        (annotations[keys.ANNOTATION_NODE], annotations[keys.ANNOTATION_GPUS])
        for annotations in (pod["metadata"]["annotations"] for pod in kube.managed.values())
    }
    assert len(placements) == 4


def test_a_gang_waits_for_all_its_pods_to_be_seen() -> None:
    kube = _cluster(gpus=4)
    _gang(kube, count=3)
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.patches == 0
    assert kube.conditions["ring-2"]["message"] == (
        "waiting: 3 of 4 pods of gang group team/ring seen; its pods are placed together once all are"
    )
    kube.add("ring-3", GANG)
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.patches == 4


def test_a_gang_whose_release_was_cut_short_is_completed_and_no_member_released_twice() -> None:
    dying = DyingKube()
    dying.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=4)
    _gang(dying)
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(_run(_loop(dying)[0], cycles=1))
    assert dying.patches == 1  # one member released, three decided but never released
    survivor = PodKube()  # the next leader, on what the API server holds
    survivor.nodes, survivor.managed = dying.nodes, dying.managed
    asyncio.run(_run(_loop(survivor)[0]))
    assert survivor.patches == 3
    gpus = [pod["metadata"]["annotations"][keys.ANNOTATION_GPUS] for pod in survivor.managed.values()]
    assert sorted(gpus) == ["0", "1", "2", "3"]


UUIDS = [FakeInventory("gpu-node-0", 2, "", 0).uuid(i) for i in range(2)]
DRA = {keys.ANNOTATION_BINDING: "dra"}


def _dra_cluster() -> PodKube:
    """One node of 2 GPUs, published as a ResourceSlice by a fake agent."""
    kube = PodKube(admission.Bindings(dra_served=True))
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=2)
    labels = kube.nodes["gpu-node-0"]["metadata"]["labels"]
    kube.slices = [resourceslice.fake_slice(FakeInventory.from_node_labels("gpu-node-0", labels), "uid")]
    return kube


def _selected(claim: dict[str, Any]) -> str:
    return claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]


def test_a_dra_bound_pod_is_released_once_its_claim_selects_the_gpu_the_cycle_chose() -> None:
    kube = _dra_cluster()
    kube.add("a", DRA)
    asyncio.run(_run(_loop(kube, dra_served=True)[0]))
    assert kube.patches == 1 and list(kube.claims) == ["team/a-gpu-0"]  # no GPU's shared claim
    claim = kube.claims["team/a-gpu-0"]
    assert _selected(claim) == claims.uuid_selector(UUIDS[0])
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "uid-a"  # deleted with the pod
    assert keys.LABEL_MANAGED_BY not in (claim["metadata"].get("labels") or {})  # not the keeper's
    annotations = kube.managed["team/a"]["metadata"]["annotations"]
    assert annotations[keys.ANNOTATION_BINDING] == "dra" and annotations[keys.ANNOTATION_CLAIMS] == "a-gpu-0"
    assert keys.ANNOTATION_VISIBLE_DEVICES not in annotations
    assert kube.managed["team/a"]["spec"]["schedulingGates"] == []


def test_a_claim_a_restart_left_is_kept_for_the_same_gpu_and_made_again_for_another() -> None:
    for left_for, creates in ((UUIDS[0], 0), (UUIDS[1], 1)):
        kube = _dra_cluster()
        kube.add("a", DRA)
        left = claims.pod_claim_body("team", "a-gpu-0", left_for, "a", "uid-a")
        kube.claims["team/a-gpu-0"] = left
        asyncio.run(_run(_loop(kube, dra_served=True)[0]))
        assert kube.patches == 1 and kube.claim_creates == creates
        assert list(kube.claims) == ["team/a-gpu-0"]
        assert _selected(kube.claims["team/a-gpu-0"]) == claims.uuid_selector(UUIDS[0])


def test_a_claim_of_that_name_that_is_not_the_pods_keeps_it_gated_naming_the_claim() -> None:
    kube = _dra_cluster()
    kube.add("a", DRA)
    kube.claims["team/a-gpu-0"] = claims.pod_claim_body("team", "a-gpu-0", UUIDS[0], "a", "uid-of-another")
    asyncio.run(_run(_loop(kube, dra_served=True)[0]))
    assert kube.patches == 0 and kube.claim_creates == 0
    assert kube.conditions["a"]["reason"] == "InvalidSpec"
    assert "spec.resourceClaims[0].resourceClaimName='a-gpu-0'" in kube.conditions["a"]["message"]


def test_dra_bound_pods_of_the_route_share_a_gpu_with_nobody() -> None:
    kube = _dra_cluster()
    kube.add("a", DRA)
    kube.add("b", DRA)
    _, route = _loop(kube, dra_served=True)
    asyncio.run(route.resync())
    scopes = {route.waiting(f"pod:team/{name}").request.share_scope for name in "ab"}  # type: ignore[union-attr]
    assert len(scopes) == 2 and "" not in scopes


def test_a_record_rewritten_after_release_holds_no_gpu_and_its_pod_is_stopped() -> None:
    kube = _cluster(gpus=1)
    kube.add("a")
    asyncio.run(_run(_loop(kube)[0]))
    released = kube.managed["team/a"]
    assert released["metadata"]["annotations"][keys.ANNOTATION_GPUS] == "0"
    # Its owner (who may patch the pod, not its status) points the record and the devices elsewhere.
    released["metadata"]["annotations"][keys.ANNOTATION_VISIBLE_DEVICES] = "all"
    kube.add("b")
    asyncio.run(_run(_loop(kube)[0]))  # a restarted operator: nothing in memory says who wrote what
    assert "team/a" not in kube.managed
    assert [(name, reason) for name, reason, _ in kube.pod_events if reason == "Tampered"] == [
        ("a", "Tampered")
    ]
    assert kube.managed["team/b"]["metadata"]["annotations"][keys.ANNOTATION_GPUS] == "0"


def test_a_gate_removed_by_the_pods_owner_stops_the_pod() -> None:
    kube = _cluster(gpus=1)
    kube.add("a")
    kube.managed["team/a"]["spec"]["schedulingGates"] = []  # removed by hand, nothing released
    asyncio.run(_run(_loop(kube)[0]))
    assert "team/a" not in kube.managed and kube.patches == 0
    assert any("scheduling gate" in message for _, reason, message in kube.pod_events if reason == "Tampered")


def test_a_routed_pods_priority_above_max_priority_keeps_it_gated_naming_its_annotation() -> None:
    kube = _cluster(gpus=1)
    kube.config_maps["horus-system/horus-tenancy"] = {"maxPriority": "100"}
    kube.add("jumper", {keys.ANNOTATION_PRIORITY: "1000000"})
    kube.add("fair", {keys.ANNOTATION_PRIORITY: "100"})
    asyncio.run(_run(_loop(kube)[0]))
    assert kube.managed["team/jumper"]["spec"]["schedulingGates"] == [{"name": keys.SCHEDULING_GATE}]
    assert kube.conditions["jumper"]["reason"] == "InvalidSpec"
    assert "metadata.annotations['horus.dev/priority']='1000000'" in kube.conditions["jumper"]["message"]
    assert "above maxPriority" in kube.conditions["jumper"]["message"]
    assert kube.managed["team/fair"]["spec"]["schedulingGates"] == []  # released


def test_a_released_pod_unschedulable_past_the_grace_period_is_deleted_and_its_gpu_freed() -> None:
    # Round 3 of issue 44: a gated pod may gain a node selector no node matches (Kubernetes allows adding
    # one while gated), or name a claim that never binds; released, it would hold its GPU for ever.
    kube = _cluster(gpus=1)
    kube.add("a")
    asyncio.run(_run(_loop(kube)[0]))
    refused = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": refused}
    stamped = {**condition, "lastTransitionTime": "2026-12-02T09:00:00Z"}
    kube.managed["team/a"]["status"]["conditions"].append(stamped)
    kube.add("b")
    asyncio.run(_run(_loop(kube)[0]))
    assert "team/a" not in kube.managed
    told = [message for name, reason, message in kube.pod_events if (name, reason) == ("a", "Replacing")]
    assert told == [
        "unschedulable on gpu-node-0 for over 30s: node(s) didn't match Pod's node affinity/selector; "
        "deleted, its GPUs freed"
    ]
    asyncio.run(_run(_loop(kube)[0]))  # the deletion seen (here by a resync, on a cluster by the watch)
    assert kube.managed["team/b"]["metadata"]["annotations"][keys.ANNOTATION_GPUS] == "0"


# The pod route under `reserve` (`--reservation-device-mode cdi`): the reservations of the slots chosen,
# then the release with the CDI device annotation of the GPUs they report.
RESERVATIONS = keys.RESERVATION_NAMESPACE


def _reserve_bound(kube: PodKube, name: str) -> None:
    kube.bindings = admission.Bindings(reserve_cdi=True)
    kube.add(name, {keys.ANNOTATION_BINDING: "reserve"})


def _report(kube: PodKube, uuids: dict[str, str]) -> None:
    for name, uuid in uuids.items():
        kube.pods[f"{RESERVATIONS}/{name}"]["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU] = uuid


def test_a_reserve_bound_pod_waits_for_its_reservation_and_is_released_with_its_cdi_device() -> None:
    kube = _cluster(gpus=2)
    _reserve_bound(kube, "a")
    loop, route = _loop(kube, reserve_cdi=True)
    asyncio.run(_run(loop))
    assert list(kube.pods) == [f"{RESERVATIONS}/gpu-gpu-node-0-0"]
    assert kube.patches == 0  # gated until the reservation says which GPU the device plugin gave it
    assert "reservation pod gpu-gpu-node-0-0" in kube.conditions["a"]["message"]

    _report(kube, {"gpu-gpu-node-0-0": "GPU-plugin-chose-1"})
    asyncio.run(_run(loop))
    assert kube.patches == 1
    pod = kube.managed["team/a"]
    annotations = pod["metadata"]["annotations"]
    assert annotations["cdi.k8s.io/horus_gpus"] == "nvidia.com/gpu=GPU-plugin-chose-1"
    assert annotations[keys.ANNOTATION_BINDING] == "reserve"
    assert annotations[keys.ANNOTATION_GPU_UUIDS] == "GPU-plugin-chose-1"
    assert keys.ANNOTATION_VISIBLE_DEVICES not in annotations  # its containers read no annotation
    assert pod["spec"]["containers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert pod["spec"]["nodeSelector"] == {keys.LABEL_HOSTNAME: "gpu-node-0"}
    assert route.pods["pod:team/a"].placed  # its record, the CDI annotation with it, as released
    assert list(kube.pods) == [f"{RESERVATIONS}/gpu-gpu-node-0-0"]  # held by the released pod

    forged = copy.deepcopy(pod)
    forged["metadata"]["annotations"]["cdi.k8s.io/horus_gpus"] = "nvidia.com/gpu=GPU-of-a-neighbour"
    assert "not the one Horus released" in release.read(forged).tampered


def test_a_released_reserve_bound_pod_whose_reservation_is_gone_is_stopped_saying_why() -> None:
    kube = _cluster(gpus=1)
    _reserve_bound(kube, "a")
    loop, _ = _loop(kube, reserve_cdi=True)
    asyncio.run(_run(loop))
    _report(kube, {"gpu-gpu-node-0-0": "GPU-a"})
    asyncio.run(_run(loop))
    assert kube.patches == 1
    del kube.pods[f"{RESERVATIONS}/gpu-gpu-node-0-0"]  # deleted by hand
    asyncio.run(_run(loop))
    assert "team/a" not in kube.managed  # its controller makes it again, gated
    assert ("a", "ReservationLost") in [(name, reason) for name, reason, _ in kube.pod_events]


def test_a_reserve_bound_pod_under_an_operator_no_longer_in_cdi_mode_stays_gated_saying_why() -> None:
    kube = _cluster(gpus=1)
    _reserve_bound(kube, "a")
    loop, _ = _loop(kube)  # restarted with --reservation-device-mode env
    asyncio.run(_run(loop))
    assert kube.patches == 0 and kube.pods == {}
    assert kube.conditions["a"]["reason"] == "InvalidSpec"
    assert "--reservation-device-mode cdi" in kube.conditions["a"]["message"]


def test_a_reserve_bound_pods_placement_is_kept_over_plain_cycles_until_its_reservation_reports() -> None:
    """No resync between the cycles (an operator's restart, which queues every gated pod again): the pod
    waits on its nomination alone, as it does on a live cluster (the e2e of issue 47 that found it)."""
    kube = _cluster(gpus=2)
    _reserve_bound(kube, "a")
    loop, route = _loop(kube, reserve_cdi=True)

    async def scenario() -> None:
        await _run(loop)
        _report(kube, {"gpu-gpu-node-0-0": "GPU-plugin-chose-1"})
        loop._cache.put_reservation(kube.pods[f"{RESERVATIONS}/gpu-gpu-node-0-0"])  # seen by the watch
        for _ in range(3):
            await loop.cycle()
            await loop.settle()

    asyncio.run(scenario())
    assert kube.patches == 1
    assert route.pods["pod:team/a"].placed
    annotations = kube.managed["team/a"]["metadata"]["annotations"]
    assert annotations["cdi.k8s.io/horus_gpus"] == "nvidia.com/gpu=GPU-plugin-chose-1"
