"""`reserve` binding, pure: the reservation pods Horus keeps, one per GPU slot it uses, and what to do
with those that exist.

A slot is a node and a GPU index of Horus's books. Its reservation pod (namespace `horus-reservation`,
named after the slot) asks NVIDIA's device plugin for `nvidia.com/gpu: 1` on that node, so the kubelet
and kube-scheduler count the GPU taken: no pod of another scheduler is given it, and kube-scheduler's own
fit check refuses a reservation where the plugin has no GPU left. The plugin, not Horus, picks the
physical GPU; the reservation reports its UUID (`horus reserve` reads it through NVML) in an annotation,
and the job's pods on the slot get that UUID: as `NVIDIA_VISIBLE_DEVICES`, or as a CDI device annotation
(`DeviceMode`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.dra.claims import dns_name

Slot = tuple[str, int]  # (node, GPU index)
ENDED = frozenset({"Succeeded", "Failed"})


class DeviceMode(StrEnum):
    """How a reserve-bound pod is told its GPU (`horus run --reservation-device-mode`; `jobs/pods.py`)."""

    ENV = "env"  # NVIDIA_VISIBLE_DEVICES=<UUID>: the NVIDIA runtime's environment variable
    CDI = "cdi"  # the CDI device annotation `nvidia.com/gpu=<UUID>`, NVIDIA_VISIBLE_DEVICES=void


@dataclass(frozen=True)
class ReservationSettings:
    """What the platform team sets (`horus run --reservation-*`, the chart's `reservation.*`)."""

    image: str = "horus-operator:latest"  # the operator's own image: it carries `horus reserve`
    runtime_class: str = ""  # e.g. "nvidia" where the GPU Operator's runtime is not the default
    priority_class: str = ""  # above the workloads it must not be preempted by
    service_account: str = "horus-reservation"  # may patch pods of its namespace (its own annotation)
    report_timeout_s: float = 60.0  # a reservation that has not reported its GPU by then is replaced
    device_mode: DeviceMode = DeviceMode.ENV  # how the job's pods are told the reserved GPU


@dataclass(frozen=True)
class ReservationView:
    name: str
    node: str
    index: int
    uuid: str  # "" until it reports
    phase: str
    deleting: bool
    created_at: datetime | None
    refused: str = ""  # kube-scheduler's message while it cannot schedule it ("" once scheduled)
    uid: str = ""  # which incarnation of the slot's name: one deleted and made again is another pod
    version: str = ""  # its resourceVersion

    @property
    def slot(self) -> Slot:
        return (self.node, self.index)

    @property
    def ready(self) -> bool:
        return bool(self.uuid) and not self.deleting and self.phase not in ENDED

    @property
    def no_gpu_left(self) -> bool:
        """kube-scheduler refuses it for the device plugin's GPUs: others hold every one of the node's."""
        return f"Insufficient {keys.DEVICE_PLUGIN_RESOURCE}" in self.refused


def name(slot: Slot) -> str:
    node, index = slot
    return f"gpu-{dns_name(node)}-{index}"


def view(body: Mapping[str, Any]) -> ReservationView | None:
    """A reservation pod as Horus reads it; None for a pod that is not one (or whose slot is unreadable).
    Only pods of `horus-reservation` are: a pod elsewhere wearing the labels (whoever may create pods
    there) must not choose what a job is told, nor have Horus's reservations deleted."""
    meta = body.get("metadata") or {}
    if meta.get("namespace") != keys.RESERVATION_NAMESPACE:
        return None
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    node = labels.get(keys.LABEL_RESERVATION_NODE)
    try:
        index = int(annotations.get(keys.ANNOTATION_RESERVATION_SLOT, ""))
    except ValueError:
        return None
    if not node:
        return None
    created = meta.get("creationTimestamp")
    status = body.get("status") or {}
    return ReservationView(
        name=str(meta.get("name", "")),
        node=node,
        index=index,
        uuid=str(annotations.get(keys.ANNOTATION_RESERVED_GPU, "")),
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        created_at=datetime.fromisoformat(created.replace("Z", "+00:00")) if created else None,
        refused=_refused(status),
        uid=str(meta.get("uid") or ""),
        version=str(meta.get("resourceVersion") or ""),
    )


def reported(existing: Iterable[ReservationView]) -> dict[str, dict[int, str]]:
    """Node -> slot -> the GPU UUID its reservation reported, for the reservations that hold their GPU
    (`ready`): where the agent's telemetry of a slot is read (`telemetry/gpunodes.slot_readings`)."""
    held: dict[str, dict[int, str]] = {}
    for reservation in existing:
        if reservation.ready:
            held.setdefault(reservation.node, {})[reservation.index] = reservation.uuid
    return held


def _refused(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "")
    return ""


def body(slot: Slot, hostname: str, settings: ReservationSettings) -> dict[str, Any]:
    """The reservation pod of `slot`: pinned to its node by hostname, one GPU of the device plugin's,
    tiny requests, every taint tolerated (it goes where Horus chose), as locked down as a pod can be
    (Pod Security "restricted")."""
    node, index = slot
    container = {
        "name": "reserve",
        "image": settings.image,
        "args": ["reserve"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "resources": {
            "requests": {"cpu": "5m", "memory": "48Mi"},
            "limits": {keys.DEVICE_PLUGIN_RESOURCE: "1", "memory": "96Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    spec: dict[str, Any] = {
        "nodeSelector": {keys.LABEL_HOSTNAME: hostname},
        "tolerations": [{"operator": "Exists"}],
        "serviceAccountName": settings.service_account,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 0,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    if settings.runtime_class:
        spec["runtimeClassName"] = settings.runtime_class
    if settings.priority_class:
        spec["priorityClassName"] = settings.priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name(slot),
            "namespace": keys.RESERVATION_NAMESPACE,
            "labels": {keys.LABEL_MANAGED_BY: keys.MANAGER, keys.LABEL_RESERVATION_NODE: node},
            "annotations": {keys.ANNOTATION_RESERVATION_SLOT: str(index)},
        },
        "spec": spec,
    }


def to_delete(
    existing: Iterable[ReservationView], wanted: Iterable[Slot], now: datetime, report_timeout_s: float
) -> list[ReservationView]:
    """The reservations to delete: those no pod holds nor a placement awaits (`wanted`), and those that
    go whoever wants them (`failing`; replaced when a placement wants their slot again)."""
    keep = set(wanted)
    return [
        reservation
        for reservation in existing
        if not reservation.deleting
        and (reservation.slot not in keep or failing(reservation, now, report_timeout_s))
    ]


def failing(reservation: ReservationView, now: datetime, report_timeout_s: float) -> bool:
    """Whether `reservation` cannot give its slot a GPU: it ended (evicted, failed), kube-scheduler
    refuses it for want of a device-plugin GPU, or it has not reported a GPU within `report_timeout_s`."""
    silent = (
        not reservation.uuid
        and reservation.created_at is not None
        and (now - reservation.created_at).total_seconds() > report_timeout_s
    )
    return reservation.phase in ENDED or reservation.no_gpu_left or silent
