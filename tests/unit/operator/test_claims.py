"""DRA binding decisions (`operator/dra/claims.py`): the claim of a GPU, its sharing config, the plan that
brings the API server's claims in line, and the ClaimsAllocated condition. Pure."""

from __future__ import annotations

import math

import pytest
from operator_builders import PodBuilder

from horus_operator.api import dljob, keys
from horus_operator.operator.dra import claims
from horus_operator.operator.dra.claims import ClaimView, DesiredClaim, Device, Tenant
from horus_operator.operator.jobs import jobspec, pods
from horus_operator.placement.types import Assignment, JobRequest
from horus_operator.prediction import memory_spread
from horus_operator.prediction.api import Workload
from horus_operator.testing.builders import DLJobBuilder

GPU_MIB = 16384


def tenant(job: str, utilization: float, memory_mib: float, *, whole: bool = False) -> Tenant:
    return Tenant(job=job, utilization=utilization, memory_mib=memory_mib, whole=whole)


def test_claim_names_are_deterministic_dns_names_per_node_and_gpu() -> None:
    name = claims.claim_name("gpu-node-0", "GPU-29903e2e-0510-5cd5-ab96-7ce39d4d27a3")
    assert name == "horus-gpu-node-0-gpu-29903e2e-0510-5cd5-ab96-7ce39d4d27a3"
    long = claims.claim_name("n" * 250, "GPU-x")
    assert len(long) == 253 and long != claims.claim_name("n" * 251, "GPU-x")


def test_mps_limits_come_from_the_tenants_shares() -> None:
    config = claims.sharing([tenant("a", 0.6, 4000), tenant("b", 0.3, 6000)], GPU_MIB, claims.Sharing.MPS)

    assert config == {
        "strategy": "MPS",
        "mpsConfig": {
            # 0.6 of the summed 0.9 predicted utilization: 66.7 % of the threads, rounded up
            "defaultActiveThreadPercentage": 67,
            # the larger memory given (6000) is less than the 6384 MiB the two leave free, so 6384: a job
            # placed there later is fitted into it
            "defaultPinnedDeviceMemoryLimit": "6384Mi",
        },
    }


def test_a_lone_tenant_gets_every_thread_and_may_pin_what_a_later_joiner_would_be_fitted_into() -> None:
    (config,) = [claims.sharing([tenant("a", 0.6, 4000)], GPU_MIB, claims.Sharing.MPS)]
    assert config is not None
    assert config["mpsConfig"] == {
        "defaultActiveThreadPercentage": 100,
        "defaultPinnedDeviceMemoryLimit": f"{GPU_MIB - 4000}Mi",  # what its prediction leaves free
    }


def test_whole_gpu_jobs_and_time_slicing_carry_no_sharing_config() -> None:
    assert claims.sharing([tenant("a", 0.6, 4000, whole=True)], GPU_MIB, claims.Sharing.MPS) is None
    assert (
        claims.sharing([tenant("a", 0.6, 4000), tenant("b", 0.3, 6000)], GPU_MIB, claims.Sharing.TIMESLICING)
        is None
    )


def test_a_claim_selects_exactly_its_gpu_by_uuid_and_carries_the_drivers_gpu_config() -> None:
    config = claims.sharing([tenant("team-a/a", 0.5, 4000)], GPU_MIB, claims.Sharing.MPS)
    body = claims.claim_body(DesiredClaim("team-a", "gpu-node-0", "GPU-x", config, ("team-a/a",)))

    assert (body["apiVersion"], body["kind"]) == ("resource.k8s.io/v1", "ResourceClaim")
    assert body["metadata"]["labels"][keys.LABEL_MANAGED_BY] == "horus"
    (request,) = body["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].uuid == \"GPU-x\""}}],
    }
    (entry,) = body["spec"]["devices"]["config"]
    assert entry["requests"] == [request["name"]]
    assert entry["opaque"] == {
        "driver": "gpu.nvidia.com",
        "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": config},
    }


def test_a_routed_pods_claim_selects_its_gpu_as_a_dljobs_does_and_is_the_pods_not_the_keepers() -> None:
    body = claims.pod_claim_body("team-a", "train-0-5eed-gpu-0", "GPU-x", "train-0-abcde", "uid-1")
    shared = claims.claim_body(DesiredClaim("team-a", "gpu-node-0", "GPU-x"))
    assert body["spec"] == shared["spec"]  # the same device selection, no sharing config
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "train-0-abcde", "uid": "uid-1", "controller": True}
    ]
    stored = claims.view(body)
    assert not stored.managed  # the keeper deletes the managed claims no DLJob pod wants
    assert stored.owner_uid == "uid-1" and stored.selects("GPU-x") and not stored.selects("GPU-y")


def _holder(job: str, uuid: str, *, namespace: str = "team-a", node: str = "gpu-node-0") -> claims.Holder:
    return claims.Holder(namespace, node, (uuid,), tenant(f"{namespace}/{job}", 0.5, 4000))


def test_co_tenants_get_one_claim_and_each_gpu_of_a_wide_job_its_own() -> None:
    wide = claims.Holder(
        "team-a", "gpu-node-0", ("GPU-c", "GPU-d"), tenant("team-a/w", 0.9, 9000, whole=True)
    )
    wanted = claims.desired(
        [_holder("a", "GPU-x"), _holder("b", "GPU-x"), wide], {"GPU-x": GPU_MIB}, claims.Sharing.MPS
    )

    assert sorted(c.uuid for c in wanted.values()) == ["GPU-c", "GPU-d", "GPU-x"]
    shared = wanted[("team-a", claims.claim_name("gpu-node-0", "GPU-x"))]
    assert shared.jobs == ("team-a/a", "team-a/b")
    assert shared.sharing is not None and shared.sharing["mpsConfig"]["defaultActiveThreadPercentage"] == 50


def test_only_dra_pods_holding_their_gpus_hold_claims() -> None:
    def pod(name: str, phase: str, binding: str = "dra") -> pods.PodView:
        body = PodBuilder(name).phase(phase).obj()
        body["metadata"]["annotations"].update(
            {
                keys.ANNOTATION_BINDING: binding,
                keys.ANNOTATION_GPU_UUIDS: "GPU-x",
                keys.ANNOTATION_CLAIMS: "c",
            }
        )
        return pods.view(body)

    assert claims.holder_of(pod("a", "Running")) == claims.Holder(
        "team-a", "gpu-node-0", ("GPU-x",), tenant("team-a/a", 0.6, 4000)
    )
    assert claims.holder_of(pod("b", "Succeeded")) is None
    assert claims.holder_of(pod("c", "Running", binding="env")) is None


def _stored(desired: DesiredClaim, **changes: object) -> ClaimView:
    fields = {
        "namespace": desired.namespace,
        "name": desired.name,
        "managed": True,
        "sharing": desired.sharing_text,
        "desired_sharing": "",
        "allocated": (),
        "reserved": 0,
        "deleting": False,
        **changes,
    }
    return ClaimView(**fields)  # type: ignore[arg-type]


def test_the_plan_creates_what_is_missing_deletes_what_no_pod_needs_and_keeps_the_rest() -> None:
    wanted = claims.desired([_holder("a", "GPU-x"), _holder("b", "GPU-y")], {}, claims.Sharing.MPS)
    x, y = (wanted[k] for k in sorted(wanted))
    leftover = _stored(DesiredClaim("team-a", "gpu-node-0", "GPU-z"))
    theirs = _stored(DesiredClaim("team-a", "gpu-node-0", "GPU-q"), managed=False)
    going = _stored(DesiredClaim("team-a", "gpu-node-0", "GPU-w"), deleting=True)

    plan = claims.plan(wanted, {c.id: c for c in (_stored(x), leftover, theirs, going)})

    assert plan.create == (y,)
    assert plan.delete == (leftover,)  # never someone else's, never one already being deleted
    assert plan.annotate == ()


def test_a_wanted_claim_being_deleted_is_created_again_once_it_is_gone() -> None:
    wanted = claims.desired([_holder("a", "GPU-x")], {}, claims.Sharing.MPS)
    (claim,) = wanted.values()
    assert claims.plan(wanted, {claim.id: _stored(claim, deleting=True)}).create == ()
    assert claims.plan(wanted, {}).create == (claim,)


def test_a_changed_config_is_written_beside_the_claim_and_cleared_when_it_matches_again() -> None:
    alone = claims.desired([_holder("a", "GPU-x")], {"GPU-x": GPU_MIB}, claims.Sharing.MPS)
    paired = claims.desired(
        [_holder("a", "GPU-x"), _holder("b", "GPU-x")], {"GPU-x": GPU_MIB}, claims.Sharing.MPS
    )
    (created,) = alone.values()
    (now,) = paired.values()
    stored = _stored(created)

    (annotation,) = claims.plan(paired, {stored.id: stored}).annotate
    assert annotation == (stored, now.sharing_text)
    drifted = _stored(created, desired_sharing=now.sharing_text)
    assert claims.plan(alone, {stored.id: drifted}).annotate == ((drifted, ""),)
    assert claims.plan(paired, {stored.id: drifted}).annotate == ()


def test_devices_other_claims_hold_are_named_by_uuid() -> None:
    device = Device("gpu.nvidia.com", "gpu-node-0", "gpu-1")
    theirs = _stored(DesiredClaim("team-b", "x", "y"), managed=False, allocated=(device,))
    ours = _stored(
        DesiredClaim("team-a", "x", "z"), allocated=(Device("gpu.nvidia.com", "gpu-node-0", "gpu-0"),)
    )
    devices = {device: "GPU-1", Device("gpu.nvidia.com", "gpu-node-0", "gpu-0"): "GPU-0"}

    assert claims.foreign_holders([theirs, ours], devices) == {"GPU-1": theirs.key}


def _dra_pod(*, unschedulable: str = "") -> pods.PodView:
    builder = PodBuilder("a").phase("Pending")
    if unschedulable:
        builder.unschedulable_since("2026-12-02T10:00:00Z")
    body = builder.obj()
    body["metadata"]["annotations"].update(
        {keys.ANNOTATION_BINDING: "dra", keys.ANNOTATION_GPU_UUIDS: "GPU-x", keys.ANNOTATION_CLAIMS: "c-x"}
    )
    if unschedulable:
        body["status"]["conditions"][0]["message"] = unschedulable
    return pods.view(body)


@pytest.mark.parametrize(
    ("claim", "unschedulable", "foreign", "expected"),
    [
        (None, "", {}, ("False", "Pending", "claim c-x not created yet")),
        ({}, "", {}, ("False", "Pending", "claim c-x not allocated yet")),
        ({"deleting": True}, "", {}, ("False", "Pending", "claim c-x being deleted")),
        (
            {},
            "0/3 nodes are available: 1 cannot allocate all claims",
            {"GPU-x": "team-b/mine"},
            (
                "False",
                "Unallocatable",
                "claim c-x: 0/3 nodes are available: 1 cannot allocate all claims; "
                "GPU GPU-x is allocated to claim team-b/mine",
            ),
        ),
        (
            {"allocated": (Device("gpu.nvidia.com", "gpu-node-0", "gpu-0"),)},
            "",
            {},
            ("True", "Allocated", "kube-scheduler allocated claim c-x"),
        ),
    ],
)
def test_the_claims_allocated_condition_names_the_claim_and_the_reason(
    claim: dict | None, unschedulable: str, foreign: dict, expected: tuple
) -> None:
    stored = (
        {} if claim is None else {("team-a", "c-x"): ClaimView("team-a", "c-x", True, "", "", (), 0, False)}
    )
    if claim:
        stored[("team-a", "c-x")] = ClaimView(
            "team-a", "c-x", True, "", "", claim.get("allocated", ()), 0, claim.get("deleting", False)
        )
    assert claims.allocation(_dra_pod(unschedulable=unschedulable), stored, foreign) == expected


# A job described by its memory terms (a Hugging Face config): its prediction's source is CONFIG, whose
# upper bound is 1.40 x the prediction (prediction/memory_spread.py).
DESCRIBED = {"weight_bytes": 1.3e10, "kept_activation_bytes_per_sample": 2.0e8}
CONFIG_FACTOR = memory_spread.MEMORY_SPREADS[memory_spread.CONFIG].upper_factor()


def _request(key: str, *, described: bool = True, peak_mib: float | None = None, gpus: int = 1) -> JobRequest:
    workload = Workload(
        model="llama", batch_size=4, features=DESCRIBED if described else None, peak_memory_mib=peak_mib
    )
    return JobRequest(key=key, workload=workload, gpus=gpus)


def test_a_tenant_is_given_its_upper_bound_not_its_point_prediction() -> None:
    def given(request: JobRequest) -> float:
        placed = claims.holder("team-a", "gpu-node-0", ["GPU-x"], request, {"memoryMiB": 8000.0})
        return placed.tenant.memory_mib

    assert CONFIG_FACTOR > 1.3
    assert given(_request("team-a/unproven")) == pytest.approx(8000 * CONFIG_FACTOR)
    # a proven job: its observed peak (what the request records) and the small margin of repeated runs
    proven = given(_request("team-a/proven", peak_mib=8000.0))
    assert 8000 < proven < 8000 * 1.01
    assert given(_request("team-a/catalog", described=False)) == 8000  # a graph's envelope is its bound


def test_each_client_may_pin_its_own_bound_and_together_they_fit_in_the_gpu() -> None:
    gpu_mib = 24576
    point = {"team-a/big": 11000.0, "team-a/small": 5000.0}
    requests = {key: _request(key) for key in point}
    # placement shares the GPU only because the bounds fit: 15400 + 7000 <= 24576
    assert sum(point.values()) * CONFIG_FACTOR <= gpu_mib
    limits = {
        key: claims.client_memory_limit(request, point[key], ["GPU-x"]) for key, request in requests.items()
    }
    pinned = {key: int(limit.removeprefix("GPU-x=").removesuffix("M")) for key, limit in limits.items()}

    assert pinned == {key: math.ceil(mib * CONFIG_FACTOR - 1e-6) for key, mib in point.items()}
    assert pinned["team-a/small"] > point["team-a/small"]  # the upper bound, not the point prediction
    assert sum(pinned.values()) <= gpu_mib
    tenants = [
        claims.holder("team-a", "gpu-node-0", ["GPU-x"], request, {"memoryMiB": point[key]}).tenant
        for key, request in requests.items()
    ]
    config = claims.sharing(tenants, gpu_mib, claims.Sharing.MPS)
    assert config is not None
    ceiling = int(config["mpsConfig"]["defaultPinnedDeviceMemoryLimit"].removesuffix("Mi"))
    # the daemon's limit, which each client's only lowers, leaves every client its own
    assert max(pinned.values()) <= ceiling <= gpu_mib


def test_a_whole_gpu_job_gets_no_client_limit() -> None:
    assert claims.client_memory_limit(_request("team-a/w", gpus=2), 30000.0, ["GPU-c", "GPU-d"]) == ""
    assert claims.client_memory_limit(_request("team-a/a"), 8000.0, [None]) == ""


def test_a_dra_bound_pods_containers_carry_its_client_limit() -> None:
    job = dljob.parse(DLJobBuilder.stored("llama").spec(binding="dra").obj())
    request = jobspec.request(job, Workload(model="llama", batch_size=4, features=DESCRIBED), 5.0)
    assignment = Assignment(job=job.key, node="gpu-node-0", gpu_indices=(0,), predicted_memory_mib=8000.0)
    placement = pods.Placement(
        job=job,
        request=request,
        assignment=assignment,
        attempt=0,
        hostname="gpu-node-0",
        gpu_uuids=("GPU-x",),
        claims=("horus-gpu-node-0-gpu-x",),
    )

    (container,) = pods.build_pod(placement)["spec"]["containers"]

    limit = {"name": claims.PINNED_MEMORY_ENV, "value": f"GPU-x={math.ceil(8000 * CONFIG_FACTOR)}M"}
    assert limit in container["env"]
