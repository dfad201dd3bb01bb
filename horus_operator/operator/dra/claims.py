"""DRA binding decisions: which ResourceClaims Horus owns, what each carries, what to create and delete.
Pure: inputs are what the API server shows (Horus's pods, the claims), outputs are objects and plans.

One claim per GPU Horus places DRA-bound jobs on, in their namespace: `horus-<node>-<GPU UUID>`,
selecting exactly that device by a CEL expression on its `uuid` attribute, in device class
`gpu.nvidia.com`. Every pod placed on the GPU references the claim (co-tenants share it, as NVIDIA's
driver requires for MPS and time-slicing), and kube-scheduler's DRA plugin allocates it on the node
Horus's nodeSelector names: both come from the same decision. A claim is wanted while some pod that
references it holds its GPU; unwanted claims are deleted (kube-controller-manager deallocates them
once no pod reserves them).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from horus_operator.api import keys
from horus_operator.api.dljob import Binding
from horus_operator.placement.index import wants_whole_gpus
from horus_operator.placement.types import JobRequest
from horus_operator.prediction import memory_spread
from horus_operator.prediction.api import JobPrediction

if TYPE_CHECKING:  # jobs.pods imports this module for each client's limit (`client_memory_limit`)
    from horus_operator.operator.jobs.pods import PodView


class Sharing(StrEnum):
    """How co-tenants share a GPU (`horus run --sharing`): the config of a DRA-bound GPU's claim, and
    whether placement keeps co-tenants within the GPU's time (`time_slices`)."""

    # DRA-bound co-tenants as `mps`; env-bound ones time-slice, as they physically do: Horus mounts no
    # MPS pipe into a pod and the tenancy rules refuse the host path it would need (jobs/tenancy.py).
    AUTO = "auto"
    MPS = "mps"  # one MPS control daemon per claim, limits from the tenants' memory bounds; env too
    TIMESLICING = "timeslicing"  # the driver's time-slicing; env-bound co-tenants time-slice as well


def time_slices(sharing: str, binding: str) -> bool:
    """Whether co-tenants of a job under `binding` time-slice their GPU (`Workload.time_sliced`)."""
    if sharing == Sharing.AUTO:
        return binding == Binding.ENV
    return sharing == Sharing.TIMESLICING


# An MPS client's own pinned memory limit, below the daemon's (it only ever lowers that one), per device
# by UUID: "GPU-…=20480M" (NVIDIA's MPS documentation, "Environment Variables").
PINNED_MEMORY_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
_MAX_NAME = 253
_NOT_DNS = re.compile(r"[^a-z0-9.-]+")

ClaimId = tuple[str, str]  # (namespace, name)


def claim_name(node: str, uuid: str) -> str:
    """Deterministic, so creating it twice is a harmless 409; a DNS subdomain (hashed when too long)."""
    return dns_name(f"horus-{node}-{uuid}")


def dns_name(text: str) -> str:
    """`text` as a DNS subdomain, an object's name: other characters become "-", and a name too long
    keeps its start and ends in a hash of the whole (so two long names stay apart)."""
    name = _NOT_DNS.sub("-", text.lower()).strip("-.")
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{name[: _MAX_NAME - 13].rstrip('-.')}-{digest}"


def claim_names(node: str, uuids: Sequence[str | None]) -> tuple[str, ...]:
    """The claims of a placement's GPUs, in GPU order (every UUID known: a DRA placement waits until)."""
    return tuple(claim_name(node, uuid or "") for uuid in uuids)


@dataclass(frozen=True)
class Tenant:
    """A job on a claimed GPU, with what Horus predicted for it there."""

    job: str  # namespace/name
    utilization: float
    memory_mib: float  # what it is given beside others (`given_memory_mib`), not the point prediction
    whole: bool  # wants its GPUs to itself (`placement.index.wants_whole_gpus`)


@dataclass(frozen=True)
class Holder:
    """A pod on claimed GPUs: one Horus created, or one it is about to create."""

    namespace: str
    node: str
    uuids: tuple[str, ...]
    tenant: Tenant


def holder(
    namespace: str, node: str, uuids: Sequence[str], request: JobRequest, predicted: Mapping[str, float]
) -> Holder:
    tenant = Tenant(
        job=request.key,
        utilization=float(predicted.get("utilization", 0.0)),
        memory_mib=given_memory_mib(request, float(predicted.get("memoryMiB", 0.0))),
        whole=wants_whole_gpus(request),
    )
    return Holder(namespace=namespace, node=node, uuids=tuple(uuids), tenant=tenant)


def given_memory_mib(request: JobRequest, predicted_memory_mib: float) -> float:
    """The memory a job placed with `predicted_memory_mib` is given beside others, as placement checked
    it fits (`memory_spread.sharing_memory_mib`): an unproven job's upper bound, a proven one's observed
    peak and a margin. Its source is the predictor's, from what the request (the pod's record) holds."""
    workload = request.workload
    source = memory_spread.source_of(workload.features, observed=workload.peak_memory_mib is not None)
    prediction = JobPrediction(utilization=0.0, memory_mib=predicted_memory_mib, memory_source=source)
    return memory_spread.sharing_memory_mib(prediction)


def client_memory_limit(request: JobRequest, predicted_memory_mib: float, uuids: Sequence[str | None]) -> str:
    """`PINNED_MEMORY_ENV` for a DRA-bound pod on GPUs `uuids`: the memory it is given beside others and
    no more, so a job that outgrows its bound fails alone and a neighbour keeps what placement fitted it
    into. Together the clients' limits are within the GPU's memory: placement shares a GPU only where
    their bounds fit, and the daemon's limit (`sharing`), at most the GPU's memory, caps each. "" for a
    job that shares no GPU (a whole-GPU job's claims carry no MPS config; only one-GPU jobs share) or
    whose GPU is unknown."""
    if wants_whole_gpus(request) or len(uuids) != 1 or not uuids[0]:
        return ""
    return f"{uuids[0]}={math.ceil(given_memory_mib(request, predicted_memory_mib) - 1e-6)}M"


def holder_of(pod: PodView) -> Holder | None:
    """The pod's hold on its GPUs' claims while it holds the GPUs; None for env-bound or finished pods."""
    if pod.binding != Binding.DRA or not pod.holds_gpus or pod.request is None or not pod.gpu_uuids:
        return None
    return holder(pod.namespace, pod.node, pod.gpu_uuids, pod.request, pod.predicted)


def sharing(tenants: Sequence[Tenant], gpu_memory_mib: int, mode: str) -> dict[str, Any] | None:
    """The driver's `GpuConfig.sharing` for a GPU with `tenants`, or None (the driver's default).

    - Whole-GPU jobs share with nobody: no sharing config.
    - `timeslicing`: none either. Pods sharing a claim are time-sliced by the driver by default; a
      TimeSlicing config (interval) is refused unless the driver runs with its alpha TimeSlicingSettings
      feature gate.
    - `mps` (and `auto`): one MPS control daemon per claim; its limits apply to every client alike:
      `defaultActiveThreadPercentage` is the largest tenant's share of the summed predicted utilization
      (100 alone); `defaultPinnedDeviceMemoryLimit` is the largest memory a tenant is given
      (`Tenant.memory_mib`), or what the tenants leave free on the GPU if that is more (so a job placed
      there later, which Horus fits into that free memory, is never refused by the limit), at most the
      GPU's memory. It is the ceiling each client's own limit (`client_memory_limit`) stays under.
    """
    if mode == Sharing.TIMESLICING or not tenants or any(t.whole for t in tenants):
        return None
    total = sum(max(t.utilization, 0.0) for t in tenants)
    largest_share = max(max(t.utilization, 0.0) for t in tenants) / total if total > 0 else 1.0
    percentage = min(100, max(1, math.ceil(100 * largest_share - 1e-9)))
    largest = max(t.memory_mib for t in tenants)
    free = gpu_memory_mib - sum(t.memory_mib for t in tenants)
    pinned = min(gpu_memory_mib, math.ceil(max(largest, free) - 1e-6))  # a float's last bit pins no more MiB
    return {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": percentage,
            "defaultPinnedDeviceMemoryLimit": f"{pinned}Mi",
        },
    }


@dataclass(frozen=True)
class DesiredClaim:
    namespace: str
    node: str
    uuid: str
    sharing: Mapping[str, Any] | None = field(default=None, compare=False)
    jobs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return claim_name(self.node, self.uuid)

    @property
    def id(self) -> ClaimId:
        return (self.namespace, self.name)

    @property
    def sharing_text(self) -> str:
        return _canonical(self.sharing)


def desired(
    holders: Iterable[Holder], gpu_memory_mib: Mapping[str, int], mode: str
) -> dict[ClaimId, DesiredClaim]:
    """The claims `holders` need, each with the sharing config its tenants call for. `gpu_memory_mib`:
    each GPU's memory by UUID (a GPU missing there gets no MPS memory limit from it)."""
    tenants: dict[tuple[str, str, str], list[Tenant]] = {}
    for holder in holders:
        for uuid in holder.uuids:
            tenants.setdefault((holder.namespace, holder.node, uuid), []).append(holder.tenant)
    wanted: dict[ClaimId, DesiredClaim] = {}
    for (namespace, node, uuid), on_gpu in tenants.items():
        on_gpu.sort(key=lambda t: t.job)
        memory = gpu_memory_mib.get(uuid, 0)
        config = sharing(on_gpu, memory, mode) if memory else None
        claim = DesiredClaim(namespace, node, uuid, config, tuple(t.job for t in on_gpu))
        wanted[claim.id] = claim
    return wanted


def claim_body(claim: DesiredClaim) -> dict[str, Any]:
    return {
        "apiVersion": keys.DRA_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim.name,
            "namespace": claim.namespace,
            "labels": {keys.LABEL_MANAGED_BY: keys.MANAGER, keys.LABEL_CLAIM_NODE: _label_value(claim.node)},
            "annotations": {
                keys.ANNOTATION_CLAIM_UUID: claim.uuid,
                keys.ANNOTATION_SHARING: claim.sharing_text,
            },
        },
        "spec": _selecting(claim.uuid, claim.sharing),
    }


def pod_claim_body(namespace: str, name: str, uuid: str, pod_name: str, pod_uid: str) -> dict[str, Any]:
    """The claim of one GPU of one pod of the pod route, named at the pod's admission: the same device
    selection as a DLJob's claim, no sharing config (nobody joins it: `pod_spec.own_claims_scope`), and
    owned by the pod, so the garbage collector deletes it with the pod. Not labelled as Horus's: the
    keeper keeps only claims its DLJobs' pods share, and would delete this one as unwanted."""
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid, "controller": True}
    return {
        "apiVersion": keys.DRA_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {keys.ANNOTATION_CLAIM_UUID: uuid},
            "ownerReferences": [owner],
        },
        "spec": _selecting(uuid, None),
    }


def _selecting(uuid: str, sharing: Mapping[str, Any] | None) -> dict[str, Any]:
    """A claim's spec: exactly the GPU `uuid`, with the driver's sharing config when there is one."""
    request = "gpu"
    selector = {"cel": {"expression": uuid_selector(uuid)}}
    exactly = {"deviceClassName": keys.GPU_DEVICE_CLASS, "selectors": [selector]}
    devices: dict[str, Any] = {"requests": [{"name": request, "exactly": exactly}]}
    if sharing is not None:
        parameters = {
            "apiVersion": keys.GPU_CONFIG_API_VERSION,
            "kind": keys.GPU_CONFIG_KIND,
            "sharing": sharing,
        }
        devices["config"] = [
            {"requests": [request], "opaque": {"driver": keys.GPU_DRIVER, "parameters": parameters}}
        ]
    return {"devices": devices}


def uuid_selector(uuid: str) -> str:
    return f"device.attributes['{keys.GPU_DRIVER}'].uuid == {json.dumps(uuid)}"


def _label_value(node: str) -> str:
    """Label values stop at 63 characters; node names may be longer (the claim's name has it whole)."""
    return node if len(node) <= 63 else hashlib.sha256(node.encode()).hexdigest()[:63]


def _canonical(config: Mapping[str, Any] | None) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":")) if config is not None else ""


@dataclass(frozen=True)
class Device:
    """One allocated device, as a claim's allocation result names it."""

    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class ClaimView:
    """One ResourceClaim as the API server shows it (Horus's, or anyone's)."""

    namespace: str
    name: str
    managed: bool  # Horus owns it
    sharing: str  # the config it was created with (Horus's claims)
    desired_sharing: str  # the config its tenants call for now, when that differs
    allocated: tuple[Device, ...]
    reserved: int  # pods (or other consumers) it is reserved for
    deleting: bool
    selectors: tuple[str, ...] = ()  # the CEL expressions of its requests: which devices it may have
    owner_uid: str = ""  # the uid of its controller (a pod of the pod route, for that pod's claims)
    version: str = field(default="", compare=False)  # metadata.resourceVersion (cache.put_pod says why)

    def selects(self, uuid: str) -> bool:
        """Whether it asks for exactly the GPU `uuid`, as Horus's claims do."""
        return self.selectors == (uuid_selector(uuid),)

    @property
    def id(self) -> ClaimId:
        return (self.namespace, self.name)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def view(body: Mapping[str, Any]) -> ClaimView:
    meta, status = body["metadata"], body.get("status") or {}
    annotations = meta.get("annotations") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return ClaimView(
        namespace=meta["namespace"],
        name=meta["name"],
        managed=(meta.get("labels") or {}).get(keys.LABEL_MANAGED_BY) == keys.MANAGER,
        sharing=annotations.get(keys.ANNOTATION_SHARING, ""),
        desired_sharing=annotations.get(keys.ANNOTATION_DESIRED_SHARING, ""),
        allocated=tuple(Device(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results),
        reserved=len(status.get("reservedFor") or []),
        deleting=bool(meta.get("deletionTimestamp")),
        selectors=_selectors(body.get("spec") or {}),
        owner_uid=next(
            (o.get("uid", "") for o in meta.get("ownerReferences") or [] if o.get("controller")), ""
        ),
        version=str(meta.get("resourceVersion") or ""),
    )


def _selectors(spec: Mapping[str, Any]) -> tuple[str, ...]:
    requests = (spec.get("devices") or {}).get("requests") or []
    return tuple(
        (selector.get("cel") or {}).get("expression", "")
        for request in requests
        for selector in (request.get("exactly") or {}).get("selectors") or []
    )


@dataclass(frozen=True)
class Plan:
    """What to change so the API server holds exactly the wanted claims."""

    create: tuple[DesiredClaim, ...] = ()
    delete: tuple[ClaimView, ...] = ()
    # (claim, the config its tenants call for, or "" once it matches again): the spec is immutable, so a
    # changed config is written beside it and applies when the claim is next created
    annotate: tuple[tuple[ClaimView, str], ...] = ()


def plan(wanted: Mapping[ClaimId, DesiredClaim], existing: Mapping[ClaimId, ClaimView]) -> Plan:
    """Level-triggered: from what is wanted now and what exists, never from what was done before. A
    wanted claim being deleted is created again once it is gone."""
    create = tuple(claim for claim_id, claim in wanted.items() if claim_id not in existing)
    delete = tuple(
        claim
        for claim_id, claim in existing.items()
        if claim.managed and not claim.deleting and claim_id not in wanted
    )
    annotate = []
    for claim_id, claim in wanted.items():
        stored = existing.get(claim_id)
        if stored is None or not stored.managed or stored.deleting:
            continue
        drift = claim.sharing_text if claim.sharing_text != stored.sharing else ""
        if drift != stored.desired_sharing:
            annotate.append((stored, drift))
    return Plan(create=create, delete=delete, annotate=tuple(annotate))


def foreign_holders(claims: Iterable[ClaimView], devices: Mapping[Device, str]) -> dict[str, str]:
    """GPU UUID -> "namespace/name" of a claim not Horus's that holds it. `devices`: the UUID of each
    device the ResourceSlices list, by (driver, pool, device)."""
    held: dict[str, str] = {}
    for claim in claims:
        if claim.managed:
            continue
        for device in claim.allocated:
            uuid = devices.get(device)
            if uuid is not None:
                held[uuid] = claim.key
    return held


def allocation(
    pod: PodView, claims: Mapping[ClaimId, ClaimView], foreign: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """The DLJob's ClaimsAllocated condition (status, reason, message) from its live pod's claims; None
    for env-bound pods and pods no longer holding their GPUs (their claims go away with them)."""
    if pod.binding != Binding.DRA or not pod.claims or not pod.holds_gpus:
        return None
    views = [claims.get((pod.namespace, name)) for name in pod.claims]
    waiting = [(name, v) for name, v in zip(pod.claims, views, strict=True) if v is None or not v.allocated]
    if not waiting:
        return ("True", "Allocated", f"kube-scheduler allocated claim {', '.join(pod.claims)}")
    name, stored = waiting[0]
    uuid = dict(zip(pod.claims, pod.gpu_uuids, strict=False)).get(name, "")
    holder = f"; GPU {uuid} is allocated to claim {foreign[uuid]}" if uuid in foreign else ""
    if pod.unschedulable_since is not None:
        return (
            "False",
            "Unallocatable",
            f"claim {name}: {pod.scheduling_message or 'unschedulable'}{holder}",
        )
    state = (
        "not created yet" if stored is None else "being deleted" if stored.deleting else "not allocated yet"
    )
    return ("False", "Pending", f"claim {name} {state}{holder}")
