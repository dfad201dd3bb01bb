"""The pod Horus creates for a placed DLJob, and what a pod tells about its placement.

Pure. A pod carries everything needed to rebuild the cluster view after a restart: its DLJob (label),
attempt, node, GPU indices/UUIDs and the job request (annotations).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from horus_operator.api import defaults, keys, pod_annotations
from horus_operator.api.dljob import Binding, JobSpec
from horus_operator.operator import compact
from horus_operator.operator.dra.claims import PINNED_MEMORY_ENV, client_memory_limit
from horus_operator.operator.jobs import oom
from horus_operator.placement.types import Assignment, JobRequest
from horus_operator.prediction.api import Workload

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NO_GPU = "void"  # the NVIDIA container toolkit's value for "no GPU device and no driver in the container"
# `reserve` with `--reservation-device-mode cdi`: the pod names its GPUs in a CDI device annotation, in the
# form a device plugin's Allocate answer takes (the CDI library's `cdi.k8s.io/<plugin>_<id>` key, a
# comma-separated list of fully qualified device names). Each GPU is named by UUID under the NVIDIA
# container toolkit's kind, as its generated spec names them (`nvidia-ctk cdi generate` names every GPU
# by index and by UUID; the index is the driver's, which need not be Horus's).
CDI_ANNOTATION = "cdi.k8s.io/horus_gpus"
CDI_GPU_KIND = "nvidia.com/gpu"
INVOLVED_POD = ("v1", "Pod")  # an Event's `involved_kind` about a pod (of the pod route), not a DLJob


def pod_name(job_name: str, attempt: int) -> str:
    """Deterministic, so creating the same attempt twice is a harmless 409."""
    return f"{job_name}-{attempt}"


def visible_devices(gpu_indices: Sequence[int], uuids: Sequence[str | None]) -> str:
    """NVIDIA_VISIBLE_DEVICES: UUIDs when all are known (indices can change across reboots), else indices."""
    if uuids and all(uuids):
        return ",".join(str(u) for u in uuids)
    return ",".join(str(i) for i in gpu_indices)


def cdi_device(uuid: str) -> str:
    """The fully qualified CDI name of the GPU with this UUID."""
    return f"{CDI_GPU_KIND}={uuid}"


@dataclass(frozen=True)
class Placement:
    """What the pod for one attempt of a job should look like."""

    job: JobSpec
    request: JobRequest
    assignment: Assignment
    attempt: int
    hostname: str
    gpu_uuids: tuple[str | None, ...] = ()
    claims: tuple[str, ...] = ()  # DRA binding: the ResourceClaim of each GPU, in GPU order
    cdi_devices: tuple[str, ...] = ()  # the CDI devices its annotation names (`cdi_device`), in GPU order
    binding: str = ""  # recorded on the pod; "" says it by its claims (dra with claims, else env)


def claim_reference(position: int) -> str:
    """The pod-level name of its `position`th GPU claim (what its containers' `resources.claims` name)."""
    return f"gpu-{position}"


def build_pod(placement: Placement) -> dict[str, Any]:
    job, assignment = placement.job, placement.assignment
    template = copy.deepcopy(dict(job.template))
    spec: dict[str, Any] = template.get("spec", {})
    if placement.claims:
        reference_claims(spec, placement.claims)
        # Init containers and sidecars are outside the claims: they see no GPU, whatever their image's
        # ENV or an envFrom says (an explicit `env` entry wins over both).
        set_visible_devices(spec.get("initContainers", []), NO_GPU)
        # Under MPS a job past the memory it was given fails alone, never its neighbour (dra/claims.py).
        memory_mib = predicted(assignment)["memoryMiB"]
        limit = client_memory_limit(placement.request, memory_mib, placement.gpu_uuids)
        for container in spec.get("containers", []) if limit else []:
            container["env"] = [*container.get("env", []), {"name": PINNED_MEMORY_ENV, "value": limit}]
    else:
        for kind in ("initContainers", "containers"):
            set_visible_devices(spec.get(kind, []), _told_devices(placement))
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), keys.LABEL_HOSTNAME: placement.hostname}
    spec.setdefault("restartPolicy", "Never")  # Horus counts attempts; "OnFailure" would hide failures
    for container in spec.get("containers", []):  # the log tail says why it failed (an OOM: jobs/oom.py)
        container.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job.name, placement.attempt),
            "namespace": job.namespace,
            "labels": {**template.get("metadata", {}).get("labels", {}), **_labels(job)},
            "annotations": {
                **template.get("metadata", {}).get("annotations", {}),
                **placement_annotations(placement),
            },
            "ownerReferences": [owner_reference(job.name, job.uid)],
        },
        "spec": spec,
    }


def _told_devices(placement: Placement) -> str:
    """NVIDIA_VISIBLE_DEVICES of a pod without claims. Under CDI the annotation names the GPUs and the
    variable must name none: a CUDA image sets NVIDIA_VISIBLE_DEVICES=all, which a pod requesting no
    nvidia.com/gpu keeps, and the NVIDIA runtime reading it (its legacy mode; its CDI mode where no
    annotation reaches it, which reads `all` as `nvidia.com/gpu=all`) would give the pod every GPU of its
    node. `void` is what the toolkit's own CDI spec sets once CDI gave the devices: the containers see
    exactly the annotated GPUs, or, where the node does not honour the annotation, none."""
    if placement.cdi_devices:
        return NO_GPU
    return visible_devices(placement.assignment.gpu_indices, placement.gpu_uuids)


def set_visible_devices(containers: Sequence[dict[str, Any]], devices: str) -> None:
    """Every container of the pod, init containers and sidecars too, sees exactly `devices`: under env
    binding a container without the variable would see every GPU of its node (the NVIDIA runtime's
    default for a CUDA image)."""
    for container in containers:
        container["env"] = [*container.get("env", []), {"name": VISIBLE_DEVICES, "value": devices}]


def owner_reference(job_name: str, uid: str) -> dict[str, Any]:
    """The controller reference a DLJob's pods carry: what makes a pod the job's (`controlling_dljob`)."""
    return {
        "apiVersion": keys.API_VERSION,
        "kind": keys.KIND,
        "name": job_name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def reference_claims(spec: dict[str, Any], claims: Sequence[str]) -> None:
    """DRA binding: the pod references its GPUs' claims and every container gets them all, as every
    container gets NVIDIA_VISIBLE_DEVICES under env binding. The driver, not an environment variable,
    then decides what the containers see."""
    references = [{"name": claim_reference(i), "resourceClaimName": claim} for i, claim in enumerate(claims)]
    spec["resourceClaims"] = [*spec.get("resourceClaims", []), *references]
    for container in spec.get("containers", []):
        resources = container.setdefault("resources", {})
        resources["claims"] = [*resources.get("claims", []), *({"name": r["name"]} for r in references)]


def _labels(job: JobSpec) -> dict[str, str]:
    return {keys.LABEL_JOB: job.name, keys.LABEL_MANAGED_BY: keys.MANAGER}


def placement_annotations(placement: Placement) -> dict[str, str]:
    assignment = placement.assignment
    annotations = {
        keys.ANNOTATION_ATTEMPT: str(placement.attempt),
        keys.ANNOTATION_NODE: assignment.node,
        keys.ANNOTATION_GPUS: pod_annotations.join(assignment.gpu_indices),
        keys.ANNOTATION_REQUEST: json.dumps(encode_request(placement.request), sort_keys=True),
        keys.ANNOTATION_PREDICTED: json.dumps(
            {**predicted(assignment), **_predicted_shape(placement.job)}, sort_keys=True
        ),
        keys.ANNOTATION_COLOCATED: pod_annotations.join(assignment.colocated_with),
        keys.ANNOTATION_BINDING: str(placement.binding) or ("dra" if placement.claims else "env"),
    }
    if placement.claims:
        annotations[keys.ANNOTATION_CLAIMS] = pod_annotations.join(placement.claims)
    if placement.cdi_devices:
        annotations[CDI_ANNOTATION] = ",".join(placement.cdi_devices)
    if placement.gpu_uuids and all(placement.gpu_uuids):
        annotations[keys.ANNOTATION_GPU_UUIDS] = pod_annotations.join(placement.gpu_uuids)
    job = placement.job
    if job.simulated_duration:
        delay_key = keys.KWOK_FAIL_DELAY if job.simulated_failure else keys.KWOK_COMPLETE_DELAY
        annotations[delay_key] = job.simulated_duration
    return annotations


def predicted(assignment: Assignment) -> dict[str, Any]:
    """What the pod's placement predicted, and whether its slowdown is the model's ("prior") or
    corrected by observations (docs/operator.md, "Online correction")."""
    return {
        "utilization": round(assignment.predicted_utilization, 4),
        "memoryMiB": round(assignment.predicted_memory_mib, 1),
        "slowdown": round(assignment.predicted_slowdown, 4),
        "slowdownSource": assignment.slowdown_source,
        "slowdownSamples": assignment.slowdown_samples,
        "utilizationSource": assignment.utilization_source,
        **({"stepSeconds": round(assignment.predicted_step_s, 6)} if assignment.predicted_step_s else {}),
    }


def _predicted_shape(job: JobSpec) -> dict[str, Any]:
    """The input shape the prediction counted, when the job gave one (spec.model.inputShape, accepted
    by then: the workload was resolved before placement)."""
    return {"inputShape": list(job.input_shape)} if isinstance(job.input_shape, list) else {}


def encode_request(request: JobRequest) -> dict[str, Any]:
    workload = request.workload
    return {
        "key": request.key,
        "model": workload.model,
        "batchSize": workload.batch_size,
        "features": dict(workload.features) if workload.features is not None else None,
        "featuresKey": workload.features_key,
        "precision": workload.precision,
        "framework": workload.framework,
        "hostCpus": workload.host_cpus,
        "timeSliced": workload.time_sliced,
        # a memory raised after an OOM (placement/oom.py): the running job holds it
        **({"peakMemoryMiB": workload.peak_memory_mib} if workload.peak_memory_mib is not None else {}),
        "gpus": request.gpus,
        "maxSlowdown": request.max_slowdown,
        "priority": request.priority,
        "submittedAt": request.submitted_at,
        "shareScope": request.share_scope,
    }


def decode_request(data: Mapping[str, Any], *, env_bound: bool = False) -> JobRequest:
    """The request a pod's annotation holds. `env_bound`: the pod is bound by env, whose co-tenants
    time-slice (no MPS pipe is mounted), what a request from before `timeSliced` existed cannot say; the
    flag matters only under `--sharing auto`, where env-bound jobs are exactly the time-sliced ones
    (`claims.time_slices`): `mps` ignores it and `timeslicing` applies the bound to every GPU."""
    workload = Workload(
        model=data["model"],
        batch_size=int(data["batchSize"]),
        features=data.get("features"),
        features_key=data.get("featuresKey", ""),
        precision=data.get("precision", defaults.DEFAULT_PRECISION),  # absent from pods made before precision
        framework=data.get("framework", defaults.DEFAULT_FRAMEWORK),  # absent from pods made before it
        host_cpus=float(data.get("hostCpus", 0.0)),  # absent from pods made before the CPU term
        time_sliced=bool(data.get("timeSliced", env_bound)),  # absent from pods made before --sharing auto
        peak_memory_mib=float(data["peakMemoryMiB"]) if data.get("peakMemoryMiB") is not None else None,
    )
    return JobRequest(
        key=data["key"],
        workload=workload,
        gpus=int(data.get("gpus", defaults.GPUS)),
        max_slowdown=float(data.get("maxSlowdown", defaults.MAX_SLOWDOWN)),
        priority=int(data.get("priority", defaults.PRIORITY)),
        submitted_at=float(data.get("submittedAt", 0.0)),
        share_scope=str(data.get("shareScope", "")),  # absent from pods made before DRA binding
    )


@dataclass(frozen=True)
class PodView:
    """One Horus pod as the API server shows it."""

    name: str
    namespace: str
    job_name: str
    uid: str
    attempt: int
    node: str  # the node Horus chose
    bound_node: str  # spec.nodeName, "" until bound
    gpu_indices: tuple[int, ...]
    gpu_uuids: tuple[str, ...]
    phase: str
    request: JobRequest | None
    predicted: Mapping[str, Any]  # see `predicted`
    colocated_with: tuple[str, ...]
    deleting: bool
    unschedulable_since: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    message: str
    binding: str = "env"
    claims: tuple[str, ...] = ()  # DRA binding: its GPUs' ResourceClaims, in GPU order
    scheduling_message: str = ""  # kube-scheduler's word while it cannot schedule the pod
    created_at: datetime | None = None  # when Horus created it: the placement it carries began then
    owner_uid: str = ""  # the uid of the DLJob that controls it ("" when no DLJob does)
    out_of_memory: str = ""  # the out-of-GPU-memory error its containers ended with (`oom.signature`)
    # metadata.resourceVersion: which of two copies is newer (the cache keeps the newer), not what it says
    version: str = field(default="", compare=False)

    @property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job_name}"

    @property
    def holds_gpus(self) -> bool:
        """A pod holds its GPUs until it ends or is being deleted."""
        return self.phase not in TERMINAL_PHASES and not self.deleting


def view(pod: Mapping[str, Any]) -> PodView:
    """The cache keeps one per pod: strings that many pods share (namespace, node, phase, what the
    annotations' JSON holds) are interned (`compact.py`)."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    binding = sys.intern(annotations.get(keys.ANNOTATION_BINDING, "env"))
    return PodView(
        name=meta["name"],
        namespace=sys.intern(meta["namespace"]),
        job_name=(meta.get("labels") or {}).get(keys.LABEL_JOB, ""),
        uid=meta.get("uid", ""),
        attempt=int(annotations.get(keys.ANNOTATION_ATTEMPT, "0")),
        node=sys.intern(annotations.get(keys.ANNOTATION_NODE, "")),
        bound_node=sys.intern(spec.get("nodeName") or ""),
        gpu_indices=pod_annotations.gpu_indices(annotations),
        gpu_uuids=pod_annotations.split(annotations.get(keys.ANNOTATION_GPU_UUIDS, "")),
        phase=sys.intern(status.get("phase") or "Pending"),
        request=_request(annotations, env_bound=binding == Binding.ENV),
        predicted=compact.interned(pod_annotations.json_object(annotations, keys.ANNOTATION_PREDICTED)),
        colocated_with=pod_annotations.split(annotations.get(keys.ANNOTATION_COLOCATED, "")),
        deleting=bool(meta.get("deletionTimestamp")),
        unschedulable_since=_unschedulable_since(status),
        started_at=_time(status.get("startTime")),
        finished_at=_finished_at(status),
        message=_message(status),
        binding=binding,
        claims=pod_annotations.split(annotations.get(keys.ANNOTATION_CLAIMS, "")),
        scheduling_message=_scheduling_message(status),
        created_at=_time(meta.get("creationTimestamp")),
        owner_uid=controlling_dljob(meta),
        out_of_memory=oom.pod_signature(status),
        version=str(meta.get("resourceVersion") or ""),
    )


def controlling_dljob(meta: Mapping[str, Any]) -> str:
    """The uid of the DLJob named in the pod's controller owner reference, "" when none is. Anyone who
    may create pods can copy Horus's labels; only the pod Horus made for a DLJob is controlled by that
    DLJob's uid (an owner reference to another namespace or a made-up uid is garbage-collected)."""
    for owner in meta.get("ownerReferences") or []:
        if (
            owner.get("controller")
            and owner.get("kind") == keys.KIND
            and owner.get("apiVersion") == keys.API_VERSION
        ):
            return str(owner.get("uid") or "")
    return ""


def _request(annotations: Mapping[str, str], *, env_bound: bool) -> JobRequest | None:
    raw = annotations.get(keys.ANNOTATION_REQUEST)
    if not raw:
        return None
    try:
        return decode_request(compact.interned(json.loads(raw)), env_bound=env_bound)
    except (ValueError, KeyError, TypeError):  # hand-edited annotation: the pod still holds its GPUs
        return None


def _time(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _unschedulable(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition
    return None


def _unschedulable_since(status: Mapping[str, Any]) -> datetime | None:
    condition = _unschedulable(status)
    return _time(condition.get("lastTransitionTime")) if condition else None


def _scheduling_message(status: Mapping[str, Any]) -> str:
    condition = _unschedulable(status)
    return str(condition.get("message") or "") if condition else ""


def _finished_at(status: Mapping[str, Any]) -> datetime | None:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("finishedAt"):
            return _time(terminated["finishedAt"])
    return None


def _message(status: Mapping[str, Any]) -> str:
    if status.get("message"):
        return str(status["message"])
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return f"container {container.get('name')} exited {terminated.get('exitCode')}: " + str(
                terminated.get("reason", "")
            )
    return ""
