"""What the webhook does to a pod at creation (pure): nothing to a pod that does not ask for Horus; for
one that does, either refuse it (`InvalidJob`, naming the annotation or the spec field) or hold it at
the scheduling gate, bound by its binding (`horus.dev/binding`, else the operator's `--binding`):
- env: its containers read their GPUs from the pod's own annotation, which Horus writes at release;
- dra: it references one ResourceClaim per GPU it asks for, named here, which Horus creates once it has
  chosen the GPUs (`route.PodRoute.release`). A pod's `spec.resourceClaims` cannot change after its
  creation, gated or not (kube-apiserver's pod update validation lets a gated pod change only its
  scheduling gates, node selector and affinity, tolerations and images), so the names are chosen now,
  before any GPU is: they are the pod's own, never a GPU's claim shared by co-tenants as a DLJob's pods
  share theirs.
- reserve, where the operator runs `--reservation-device-mode cdi`: its containers are told no GPU by the
  variable (`void`), and the CDI device annotation Horus writes at release, with the UUIDs the slots'
  reservations reported, names them to the runtime. Its environment cannot change after creation either,
  so the variable is set now; an annotation can be written at release. Under the `env` device mode
  (the UUID in the variable) `reserve` is not offered to routed pods.

The checks are the DLJob's: the annotations through `api/pod_spec.py` (the DLJob spec's parser, its
bounds and, for a model that needs no ConfigMap, the operator's `WorkloadResolver`), the pod spec
through `jobs/template.py` (what would choose the node or the GPUs instead of Horus).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from horus_operator.api import dljob, keys, pod_spec
from horus_operator.api.dljob import Binding, InvalidJob, JobSpec
from horus_operator.operator.dra import claims
from horus_operator.operator.jobs import pods, template
from horus_operator.operator.jobs.pods import NO_GPU, VISIBLE_DEVICES

# Containers read their GPUs from the annotation Horus writes at release: the kubelet resolves the
# downward API when it starts the container, after the gate is gone and the annotation written.
DEVICES_FIELD = f"metadata.annotations['{keys.ANNOTATION_VISIBLE_DEVICES}']"
VISIBLE_DEVICES_ENV: Mapping[str, Any] = {
    "name": VISIBLE_DEVICES,
    "valueFrom": {"fieldRef": {"fieldPath": DEVICES_FIELD}},
}
NO_GPU_ENV: Mapping[str, str] = {"name": VISIBLE_DEVICES, "value": NO_GPU}


@dataclass(frozen=True)
class Bindings:
    """What decides a pod's binding besides its own annotation: the operator's settings."""

    default: Binding = Binding.ENV  # `horus run --binding`
    dra_served: bool = False  # the API server serves resource.k8s.io/v1
    reserve_cdi: bool = False  # `horus run --reservation-device-mode cdi`: routed pods may be reserve-bound


def admit(
    pod: Mapping[str, Any],
    *,
    namespace: str = "",
    resolve: Callable[[JobSpec], object] | None = None,
    bindings: Bindings = Bindings(),
    token: str = "",
) -> dict[str, Any] | None:
    """The changes to make to `pod` as a merge patch, None for a pod Horus leaves alone. `resolve`: the
    operator's workload resolver, asked for models that need no ConfigMap (those are read when the pod
    is placed, and a failure told then). `token`: unique to this admission, naming the claims of a
    DRA-bound pod that has no name yet (`claim_names`). Raises `InvalidJob` for a pod Horus cannot run."""
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if not pod_spec.wants_horus(labels, annotations):
        return None
    spec: Mapping[str, Any] = pod.get("spec") or {}
    job = check(pod, namespace=namespace, resolve=resolve)
    gates = [dict(g) for g in spec.get("schedulingGates") or []]
    if not any(gate.get("name") == keys.SCHEDULING_GATE for gate in gates):
        gates.append({"name": keys.SCHEDULING_GATE})
    changed: dict[str, Any] = {"schedulingGates": gates}
    binding = binding_of(job, annotations, bindings)
    if binding is Binding.DRA:
        names = own_claims(spec) or claim_names(meta, job.gpus, token)
        changed |= _claiming(spec, names)
    else:  # reserve: no GPU by the variable, the CDI annotation names them; env: read from the annotation
        told = NO_GPU_ENV if binding is Binding.RESERVE else VISIBLE_DEVICES_ENV
        for kind in template.CONTAINER_LISTS:
            if spec.get(kind):
                changed[kind] = [_telling(container, told) for container in spec[kind]]
    return {"metadata": {"labels": {keys.LABEL_MANAGED: "true"}}, "spec": changed}


def binding_of(job: JobSpec, annotations: Mapping[str, str], bindings: Bindings) -> Binding:
    """The DLJob's rule (`dljob.binding_of`), its errors naming `horus.dev/binding`. The `reserve`
    binding reaches a routed pod's containers only through the CDI annotation Horus writes at release:
    without the operator's `--reservation-device-mode cdi`, asked for, it is refused; as the operator's
    default, a routed pod gets `env` (docs/operator.md, "Bindings")."""
    try:
        binding = dljob.binding_of(job, default=bindings.default, dra_served=bindings.dra_served)
    except InvalidJob as invalid:
        raise pod_spec.renamed(invalid, annotations) from None
    if binding is not Binding.RESERVE or bindings.reserve_cdi:
        return binding
    if job.binding:
        reason = (
            "pods of the pod route are reserve-bound only where the operator runs "
            "--reservation-device-mode cdi (their containers' environment cannot change after creation, "
            "their annotations can); env or dra"
        )
        raise pod_spec.renamed(InvalidJob("spec.binding", job.binding, reason), annotations)
    return Binding.ENV


def bound_by(spec: Mapping[str, Any]) -> Binding:
    """The binding the webhook gave a pod, read from what it wrote into the spec, which cannot change
    after creation: claims of its own (dra), containers told no GPU by the variable (reserve: the CDI
    annotation names them at release), else env."""
    if own_claims(spec):
        return Binding.DRA
    return Binding.RESERVE if reserved(spec) else Binding.ENV


def reserved(spec: Mapping[str, Any]) -> bool:
    """Whether the webhook bound the pod by `reserve`: every container is told no GPU by the variable
    (an owner's own variable is refused at admission, and env binding replaces it)."""
    containers = spec.get("containers") or []
    return bool(containers) and not own_claims(spec) and all(map(_told_no_gpu, containers))


def records(annotations: Mapping[str, str]) -> list[str]:
    """Horus's records on a pod: its placement record (`pod_spec.placement_records`) and, under
    `reserve` with CDI devices, the device annotation the runtime gives the pod its GPUs by."""
    cdi = [pods.CDI_ANNOTATION] if pods.CDI_ANNOTATION in annotations else []
    return sorted([*pod_spec.placement_records(annotations), *cdi])


def claim_names(meta: Mapping[str, Any], gpus: int, token: str) -> tuple[str, ...]:
    """The ResourceClaims of a DRA-bound pod, one per GPU: `<pod>-gpu-<i>`. A pod of a controller
    (a Job's) has only its `generateName` at admission (the API server adds the suffix after the
    webhooks), so `token` stands in for the suffix. Either way the names are read back from the pod's
    spec from then on (`own_claims`), so every later attempt finds the claims a first one made."""
    base = meta.get("name") or f"{(meta.get('generateName') or 'pod').rstrip('-.')}-{token}"
    return tuple(claims.dns_name(f"{base}-{pods.claim_reference(i)}") for i in range(gpus))


def own_claims(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaims the webhook made the pod reference, in GPU order: the leading entries of
    `spec.resourceClaims` named `gpu-0`, `gpu-1`, … Any other entry is refused at admission; entries an
    owner writes in this shape are taken as the webhook's, which gives them nothing: Horus creates
    claims of those names for the GPUs it chooses, and never uses one it does not own."""
    names: list[str] = []
    for position, reference in enumerate(spec.get("resourceClaims") or []):
        if reference.get("name") != pods.claim_reference(position) or not reference.get("resourceClaimName"):
            break
        names.append(str(reference["resourceClaimName"]))
    return tuple(names)


def _claiming(spec: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The pod references `names` as a DLJob's pod references its claims (every container gets them
    all; init containers and sidecars see no GPU), and reads no GPU variable."""
    bound = _without_ours(spec)
    pods.reference_claims(bound, names)
    pods.set_visible_devices(bound.get("initContainers") or [], NO_GPU)
    return {kind: bound[kind] for kind in ("resourceClaims", *template.CONTAINER_LISTS) if bound.get(kind)}


def check(
    pod: Mapping[str, Any], *, namespace: str = "", resolve: Callable[[JobSpec], object] | None = None
) -> JobSpec:
    """The pod's `JobSpec`, or `InvalidJob` naming what Horus cannot run."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    written = records(annotations)
    if written:
        raise InvalidJob(
            pod_spec.annotation_field(written[0]),
            annotations[written[0]],
            "Horus's record of a placement: written by Horus, never by the pod's owner",
        )
    spec: Mapping[str, Any] = pod.get("spec") or {}
    check_spec(spec)
    job = pod_spec.parse(pod, namespace=namespace)
    referenced = own_claims(spec)
    if referenced and len(referenced) != job.gpus:  # the annotation changed since admission
        raise InvalidJob(
            pod_spec.annotation_field(keys.ANNOTATION_GPU_COUNT),
            annotations.get(keys.ANNOTATION_GPU_COUNT),
            f"the pod references {len(referenced)} ResourceClaims, one per GPU it asked for when created",
        )
    pod_spec.group(pod, namespace=namespace)  # a gang's annotations, checked here as the spec's are
    if resolve is not None and not job.resolved_off_loop:
        try:
            resolve(job)
        except InvalidJob as invalid:
            raise pod_spec.renamed(invalid, annotations) from None
    return job


def check_spec(spec: Mapping[str, Any]) -> None:
    """The DLJob's template rules (`template.check`), named by the pod's own fields (`spec.nodeName`,
    `spec.containers[0].resources.limits`)."""
    try:
        template.check({"spec": _without_ours(spec)})
    except InvalidJob as invalid:
        field = invalid.field_path.replace(template.FIELD, "spec", 1)
        raise InvalidJob(field, invalid.value, invalid.reason) from None


def _without_ours(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec less what the webhook itself adds (a pod admitted twice is admitted alike, and a gated
    pod is judged again as it was at admission): the GPU variable, and the claims of a DRA-bound pod."""
    copied = copy.deepcopy(dict(spec))
    references = {pods.claim_reference(i) for i in range(len(own_claims(spec)))}
    if references:
        copied["resourceClaims"] = copied["resourceClaims"][len(references) :]
    for kind in template.CONTAINER_LISTS:
        for container in copied.get(kind) or []:
            if container.get("env"):
                container["env"] = [e for e in container["env"] if not _ours(e)]
            resources = container.get("resources") or {}
            if references and resources.get("claims"):
                resources["claims"] = [c for c in resources["claims"] if c.get("name") not in references]
    return copied


def reads_gpus(container: Mapping[str, Any]) -> bool:
    """Whether `container` reads its GPUs from the pod's annotation, as the webhook makes it."""
    return any(_reading_annotation(env) for env in container.get("env") or [])


def _ours(env: Mapping[str, Any]) -> bool:
    """The variable as the webhook wrote it: read from the annotation, or "no GPU" (a DRA-bound pod's init
    containers, a reserve-bound pod's containers)."""
    return _reading_annotation(env) or _no_gpu(env)


def _told_no_gpu(container: Mapping[str, Any]) -> bool:
    return any(map(_no_gpu, container.get("env") or []))


def _no_gpu(env: Mapping[str, Any]) -> bool:
    return env.get("name") == VISIBLE_DEVICES and env.get("value") == NO_GPU


def _reading_annotation(env: Mapping[str, Any]) -> bool:
    """The GPU variable read from the annotation (the API server adds the fieldRef's apiVersion)."""
    field = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    return env.get("name") == VISIBLE_DEVICES and field == DEVICES_FIELD


def _telling(container: Mapping[str, Any], told: Mapping[str, Any]) -> dict[str, Any]:
    """`container` with the GPU variable `told`, in place of any it had."""
    changed = copy.deepcopy(dict(container))
    env = [e for e in changed.get("env") or [] if e.get("name") != VISIBLE_DEVICES]
    changed["env"] = [*env, copy.deepcopy(dict(told))]
    return changed
