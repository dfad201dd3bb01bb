"""A DLJob may do no more than its owner may (issue 24; docs/reliability.md, "Threat model").

A tenant is a user who may create DLJobs in one namespace and nothing else (a Role, acted out through
impersonation); the operator runs with the manifests' admission policy and tenancy ConfigMap installed.
Each attempt that once got through is refused at admission or fails its job with a message naming the
field, and nothing a tenant does moves, holds or reveals another namespace's GPU, pod, Secret or
ConfigMap (issue 44: the allowlist covers Pod Security "baseline", ConfigMaps are checked as Secrets
are, `maxPriority` bounds spec.priority, and no status quotes a value read from a ConfigMap).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from dljob_harness import apply, dljobs, horus_pods, wait_phases
from onnx import TensorProto, helper

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.testing.builders import IMAGE, DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

ADMISSION = REPO / "manifests" / "admission.yaml"
OWN_NAMESPACE = "horus-system"  # the operator's: its Lease and the tenancy ConfigMap
PLACED = {"Scheduled", "Running", "Succeeded"}


@pytest.fixture(scope="module")
def operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The CRDs, the admission policy with its ConfigMap (DLJob-only tenants off), and the operator."""
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    cluster.kubectl("apply", "-f", str(ADMISSION))
    running = OperatorProcess(
        cluster, tmp_path_factory.mktemp("tenancy") / "operator.log", lease_namespace=OWN_NAMESPACE
    )
    running.start()
    yield running
    running.stop()
    cluster.kubectl("delete", "-f", str(ADMISSION), "--ignore-not-found")  # later modules run without it


@pytest.fixture
def dljob_only(cluster: devcluster.LocalCluster, operator: OperatorProcess) -> Iterator[None]:
    """The platform team admits DLJob-only tenants: service account `trainer`, priority class `batch`."""
    _tenancy(
        cluster,
        dljobOnlyTenants="true",
        allowedServiceAccounts="default,trainer",
        allowedPriorityClasses="batch",
    )
    yield
    _tenancy(cluster, dljobOnlyTenants="false", allowedServiceAccounts="default", allowedPriorityClasses="")


def _tenancy(cluster: devcluster.LocalCluster, **data: str | None) -> None:
    """Set keys of ConfigMap horus-tenancy; None removes one."""
    patch = json.dumps({"data": data})
    cluster.kubectl("patch", "configmap", "horus-tenancy", "-n", OWN_NAMESPACE, "--type=merge", "-p", patch)


class Tenant:
    """A user with a Role that allows DLJobs in `namespace` and nothing else, acted as by impersonation."""

    def __init__(self, cluster: devcluster.LocalCluster, namespace: str, name: str = "tenant") -> None:
        self.cluster, self.namespace, self.user = cluster, namespace, f"{name}@{namespace}"
        role = f"{name}-dljobs"
        verbs = "--verb=create,get,list,watch,update,patch,delete"
        cluster.kubectl("create", "role", role, "-n", namespace, verbs, "--resource=dljobs.horus.dev")
        cluster.kubectl(
            "create", "rolebinding", role, "-n", namespace, f"--role={role}", f"--user={self.user}"
        )

    def may_read(self, resource: str, name: str) -> None:
        """Let the tenant `get` one object by name (a Role with resourceNames)."""
        role = f"read-{resource}-{name}"
        self.cluster.kubectl(
            "create", "role", role, "-n", self.namespace, "--verb=get", f"--resource={resource}",
            f"--resource-name={name}",
        )  # fmt: skip
        self.cluster.kubectl(
            "create", "rolebinding", role, "-n", self.namespace, f"--role={role}", f"--user={self.user}"
        )

    def may(self, *verb_resource: str) -> bool:
        asked = self.cluster.kubectl(
            "auth", "can-i", *verb_resource, "-n", self.namespace, "--as", self.user, check=False
        )
        return asked.stdout.strip() == "yes"

    def submit(self, body: dict[str, Any], *options: str) -> str:
        """The API server's answer to the tenant's `kubectl create`: "" when admitted, else its message."""
        done = self.cluster.kubectl(
            "create", "-n", self.namespace, "--as", self.user, "-f", "-", *options,
            input=json.dumps(body), check=False,
        )  # fmt: skip
        return "" if done.returncode == 0 else done.stderr


def _template(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "train", "image": IMAGE}], **spec}}


def _job(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return DLJobBuilder(name).spec(template=template).obj()


def test_a_tenant_who_may_not_create_pods_may_not_create_a_dljob(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    tenant = Tenant(cluster, namespace)
    assert tenant.may("create", "dljobs.horus.dev") and not tenant.may("create", "pods")
    for name, template in {
        "plain": _template(),
        "host": _template(
            hostNetwork=True, hostPID=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}]
        ),
        "critical": _template(priorityClassName="system-node-critical"),
    }.items():
        refused = wait_for(
            lambda t=template, n=name: tenant.submit(_job(n, t)), timeout=30, what="the policy"
        )
        assert "may not create pods in namespace" in refused, refused
    assert dljobs(cluster, namespace) == {}


def _container(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "train", "image": IMAGE, **fields}]}}


def _secured(**fields: Any) -> dict[str, Any]:
    return _container(securityContext=fields)


def _volume(**source: Any) -> dict[str, Any]:
    return _template(volumes=[{"name": "v", **source}])


# What a team keeps in a ConfigMap of its namespace: JSON, but no model config.
LEAK = '{"model_type": "db-password=hunter2"}'
SECRET_ENV = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "team-credentials", "key": "token"}}}
SETTINGS_ENV = {
    "name": "DB",
    "valueFrom": {"configMapKeyRef": {"name": "app-settings", "key": "config.json"}},
}
C0 = "spec.template.spec.containers[0]"
POD = "spec.template.spec.securityContext"
APPARMOR = "container.apparmor.security.beta.kubernetes.io/train"
ESCALATIONS: dict[str, tuple[dict[str, Any], str]] = {  # name -> (template, what the refusal names)
    "host-network": (_template(hostNetwork=True), "hostNetwork"),
    "host-pid": (_template(hostPID=True), "hostPID"),
    "host-ipc": (_template(hostIPC=True), "hostIPC"),
    "host-path": (_template(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "hostPath"),
    "root-sys-admin": (
        _container(securityContext={"runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}}),
        "capabilities.add",
    ),
    "admin-account": (_template(serviceAccountName="namespace-admin"), "serviceAccountName"),
    "other-secret": (_container(env=[SECRET_ENV]), "Secret"),
    "secret-volume": (
        _template(volumes=[{"name": "s", "secret": {"secretName": "team-credentials"}}]),
        "Secret",
    ),
    "node-critical": (_template(priorityClassName="system-node-critical"), "priorityClassName"),
    "own-scheduler": (_template(schedulerName="anything-goes"), "schedulerName"),
    "gpu-uuids": (
        {"metadata": {"annotations": {"horus.dev/gpu-uuids": "GPU-x"}}, **_template()},
        "horus.dev/",
    ),
    "own-gpu": (
        _container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
        "NVIDIA_VISIBLE_DEVICES",
    ),
    # Pod Security "baseline", field by field (issue 44: these once ran, or were admitted).
    "selinux-spc": (
        _template(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
        f"{POD}.seLinuxOptions.type",
    ),
    "selinux-user": (
        _secured(seLinuxOptions={"user": "system_u"}),
        f"{C0}.securityContext.seLinuxOptions.user",
    ),
    "apparmor": (
        _secured(appArmorProfile={"type": "Unconfined"}),
        f"{C0}.securityContext.appArmorProfile.type",
    ),
    "apparmor-annotation": (
        {"metadata": {"annotations": {APPARMOR: "unconfined"}}, **_template()},
        f"spec.template.metadata.annotations[{APPARMOR}]",
    ),
    "seccomp": (
        _template(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        f"{POD}.seccompProfile.type",
    ),
    "seccomp-container": (
        _secured(seccompProfile={"type": "Unconfined"}),
        f"{C0}.securityContext.seccompProfile.type",
    ),
    "sysctl": (
        _template(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}),
        f"{POD}.sysctls[0].name",
    ),
    "proc-mount": (_secured(procMount="Unmasked"), f"{C0}.securityContext.procMount"),
    "host-process": (
        _secured(windowsOptions={"hostProcess": True}),
        f"{C0}.securityContext.windowsOptions.hostProcess",
    ),
    "probe-host": (
        _container(livenessProbe={"httpGet": {"host": "169.254.169.254", "port": 80}}),
        f"{C0}.livenessProbe.httpGet.host",
    ),
    "csi-secret": (
        _volume(csi={"driver": "cephfs.csi.ceph.com", "nodePublishSecretRef": {"name": "team-credentials"}}),
        "spec.template.spec.volumes[0].csi",
    ),
    "cephfs-secret": (
        _volume(cephfs={"monitors": ["10.0.0.1:6789"], "secretRef": {"name": "team-credentials"}}),
        "spec.template.spec.volumes[0].cephfs",
    ),
    "ephemeral": (
        _volume(ephemeral={"volumeClaimTemplate": {"spec": {"storageClassName": "any"}}}),
        "spec.template.spec.volumes[0].ephemeral",
    ),
    "topology-spread": (
        _template(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "no-such-label", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        ),
        "spec.template.spec.topologySpreadConstraints",
    ),
    # ConfigMaps the tenant may not read, as Secrets.
    "config-map-env": (_container(env=[SETTINGS_ENV]), f"{C0}.env[0].valueFrom.configMapKeyRef"),
    "config-map-env-from": (
        _container(envFrom=[{"configMapRef": {"name": "app-settings"}}]),
        f"{C0}.envFrom[0].configMapRef",
    ),
    "config-map-volume": (
        _volume(projected={"sources": [{"configMap": {"name": "app-settings"}}]}),
        "spec.template.spec.volumes[0].projected.sources[0].configMap",
    ),
}


def test_dljob_only_tenants_are_held_to_the_allowlist_and_see_only_their_gpus(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, dljob_only: None, namespace: str
) -> None:
    tenant = Tenant(cluster, namespace)
    cluster.kubectl(
        "create", "secret", "generic", "team-credentials", "-n", namespace, "--from-literal=token=x"
    )
    cluster.kubectl(
        "create", "configmap", "all-gpus", "-n", namespace, "--from-literal=NVIDIA_VISIBLE_DEVICES=all"
    )
    cluster.kubectl(
        "create", "configmap", "app-settings", "-n", namespace, f"--from-literal=config.json={LEAK}"
    )
    for name, (template, field) in ESCALATIONS.items():
        refused = tenant.submit(_job(name, template))
        assert field in refused, (name, refused)
    model_config_map = DLJobBuilder("model").model(
        huggingface={"configMap": "app-settings", "sequenceLength": 8}
    )
    assert "spec.model.huggingface.configMap (app-settings)" in tenant.submit(model_config_map.obj())
    tenant.may_read("configmaps", "all-gpus")  # what the sidecar below reads: by name, as it may
    # Within the allowlist: admitted and placed, and every container, init container and sidecar sees
    # exactly the assigned GPU (an explicit env entry beats envFrom and the image's ENV).
    sidecars = [
        {"name": "fetch", "image": IMAGE, "envFrom": [{"configMapRef": {"name": "all-gpus"}}]},
        {"name": "logger", "image": IMAGE, "restartPolicy": "Always"},
    ]
    allowed = _template(serviceAccountName="trainer", initContainers=sidecars)
    assert tenant.submit(_job("allowed", allowed)) == ""
    wait_phases(cluster, namespace, ["allowed"], PLACED, timeout=60)
    (pod,) = horus_pods(cluster, namespace)
    gpus = pod["metadata"]["annotations"][keys.ANNOTATION_GPUS]
    for container in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]:
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env["NVIDIA_VISIBLE_DEVICES"] == gpus, container["name"]
    assert set(dljobs(cluster, namespace)) == {"allowed"}


def test_max_priority_bounds_every_dljobs_priority(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, dljob_only: None, namespace: str
) -> None:
    """A priority of 1,000,000 once took the next free GPU ahead of another team's earlier job (and, under
    the las queue order, could not be preempted)."""
    tenant = Tenant(cluster, namespace)
    _tenancy(cluster, maxPriority="100")
    try:
        eager = DLJobBuilder("eager").spec(priority=1_000_000).obj()
        refused = wait_for(  # a dry run until the policy has read the bound
            lambda: tenant.submit(eager, "--dry-run=server"),
            timeout=30,
            what="the policy to read maxPriority",
        )
        assert "spec.priority=1000000: refused: above maxPriority in ConfigMap horus-tenancy (100)" in refused
        assert tenant.submit(DLJobBuilder("fair").spec(priority=100).obj()) == ""
        by_admin = DLJobBuilder("admin").spec(priority=101).obj()  # a pod creator's DLJob too
        created = cluster.kubectl(
            "create", "-n", namespace, "-f", "-", input=json.dumps(by_admin), check=False
        )
        assert "spec.priority=101: refused" in created.stderr
    finally:
        _tenancy(cluster, maxPriority=None)
    assert set(dljobs(cluster, namespace)) == {"fair"}


def test_no_status_quotes_a_value_read_from_a_config_map(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    """The operator reads a DLJob's model ConfigMap with its own rights: a tenant once got
    `model_type='db-password=hunter2'` back in a status. A DLJob naming a ConfigMap that holds no model
    (stored by a pod creator here; a DLJob-only tenant who may not read it is refused at admission, test
    above) fails naming the key, and no status or Event quotes what the ConfigMap holds."""
    cluster.kubectl(
        "create", "configmap", "app-settings", "-n", namespace, f"--from-literal=config.json={LEAK}",
        "--from-literal=model.onnx=db-password=hunter2",
    )  # fmt: skip
    apply(
        cluster,
        namespace,
        DLJobBuilder("hf").model(huggingface={"configMap": "app-settings", "sequenceLength": 8}).obj(),
        DLJobBuilder("onnx").model(onnx={"configMap": "app-settings", "key": "model.onnx"}).obj(),
    )
    jobs = wait_phases(cluster, namespace, ["hf", "onnx"], {"Failed"}, timeout=60)
    hf, onnx = (jobs[name]["status"]["message"] for name in ("hf", "onnx"))
    assert hf.startswith(f"spec.model.huggingface.configMap='{namespace}/app-settings[config.json]': ")
    assert "config.model_type" in hf and "unreadable ONNX graph" in onnx
    written = cluster.kubectl("get", "dljobs,events", "-n", namespace, "-o", "json").stdout
    assert "hunter2" not in written


def test_a_stored_job_beyond_the_allowlist_fails_in_the_operator_naming_the_field(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    """Defence in depth: a DLJob admitted before DLJob-only tenants were allowed (or with the policy
    unbound) is checked again before it is placed."""
    operator.stop()
    try:
        apply(cluster, namespace, _job("stored", _template(hostPID=True)))  # by an admin, tenancy off
        _tenancy(cluster, dljobOnlyTenants="true")
        operator.start()
        jobs = wait_phases(cluster, namespace, ["stored"], {"Failed"}, timeout=60)
    finally:
        _tenancy(cluster, dljobOnlyTenants="false")
        if not operator.running:
            operator.start()
    assert jobs["stored"]["status"]["message"].startswith("spec.template.spec.hostPID=True")
    assert horus_pods(cluster, namespace) == []


def _squatter(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod with Horus's labels and annotations claiming every GPU of `node` whole, made by someone who
    may create pods: no DLJob controls it."""
    request = {"key": f"x/{name}", "model": "resnet50", "batchSize": 32, "gpus": gpus, "maxSlowdown": 1.0}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {keys.LABEL_JOB: name, keys.LABEL_MANAGED_BY: keys.MANAGER},
            "annotations": {
                keys.ANNOTATION_NODE: node,
                keys.ANNOTATION_GPUS: ",".join(str(i) for i in range(gpus)),
                keys.ANNOTATION_REQUEST: json.dumps(request),
            },
        },
        "spec": {"nodeSelector": {keys.LABEL_HOSTNAME: node}, "containers": [{"name": "c", "image": IMAGE}]},
    }


def test_pods_that_copy_horus_labels_hold_no_gpu_and_are_never_adopted(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    other = f"{namespace}-b"[:63]
    cluster.kubectl("create", "namespace", other)
    try:
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        gpu_nodes = {n["metadata"]["name"]: int(n["metadata"]["labels"][keys.LABEL_GPU_COUNT]) for n in nodes
                     if keys.LABEL_GPU_COUNT in n["metadata"]["labels"]}  # fmt: skip
        squatters = [
            _squatter(f"squat-{i}", node, count) for i, (node, count) in enumerate(sorted(gpu_nodes.items()))
        ]
        apply(cluster, other, *squatters)
        # A pod named as the first pod of a DLJob that does not exist yet, with Horus's labels.
        early = _squatter("early-0", sorted(gpu_nodes)[0], 1)
        early["metadata"]["labels"][keys.LABEL_JOB] = "early"
        apply(cluster, namespace, early, DLJobBuilder("victim").obj())
        wait_phases(cluster, namespace, ["victim"], PLACED, timeout=60)  # the squatters' GPUs were free
        apply(cluster, namespace, DLJobBuilder("early").runs_for("1s").obj())
        jobs = wait_phases(cluster, namespace, ["early"], {"Failed"}, timeout=90)
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
    message = jobs["early"]["status"]["message"]
    assert message.startswith("metadata.name='early'") and f"{namespace}/early-0" in message, message
    adopted = cluster.kubectl("get", "pod", "early-0", "-n", namespace, "-o", "json").stdout
    assert json.loads(adopted)["metadata"].get("ownerReferences") is None, "Horus took over a foreign pod"


def test_status_is_no_control_channel(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    """A fabricated `status.moves` entry (dljobs/status is never a tenant's, but RBAC can be got wrong)
    moves no job that does not allow moving and holds no GPU beyond what a job asks."""
    apply(
        cluster,
        namespace,
        DLJobBuilder("fixed").obj(),
        DLJobBuilder("movable").spec(migration={"allowed": True}).obj(),
    )
    wait_phases(cluster, namespace, ["fixed", "movable"], {"Running"}, timeout=60)
    before = _live_pods(cluster, namespace)
    fabricated = {
        "fixed": {"to": "a100-node-0/0"},  # migration not allowed
        "movable": {"to": "a100-node-0/0,1,2,3"},  # four GPUs for a one-GPU job
    }
    for name, target in fabricated.items():
        entry = {"from": "x/0", "reason": "fabricated", "trigger": "over-limit", "at": "2026-12-03T00:00:00Z",
                 "attempt": 0, "state": "Moving", **target}  # fmt: skip
        patch = json.dumps({"status": {"moves": [entry]}})
        cluster.kubectl(
            "patch", "dljob", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch
        )
    seen = [_live_pods(cluster, namespace)]
    for _ in range(6):  # three resync periods (2 s here): a move would have deleted a pod by now
        time.sleep(1)
        seen.append(_live_pods(cluster, namespace))
    assert all(uids == before for uids in seen), seen
    assert {j["status"]["phase"] for j in dljobs(cluster, namespace).values()} == {"Running"}


def _live_pods(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, str]:
    """Name -> uid of the namespace's Horus pods not being deleted."""
    pods = horus_pods(cluster, namespace)
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    }


def _chain_graph(nodes: int) -> bytes:
    """A graph of `nodes` activations in a chain: about 23 bytes a node, so 40,000 nodes make ~0.9 MB
    (a ConfigMap holds at most 1 MiB)."""
    chain = [helper.make_node("Relu", [f"h{i - 1}" if i else "x"], [f"h{i}"]) for i in range(nodes)]
    graph = helper.make_graph(
        chain,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info(f"h{nodes - 1}", TensorProto.FLOAT, ["batch", 64])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_big_graphs_are_read_off_the_loop_while_other_jobs_are_placed(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    graphs = 15
    for i in range(graphs):  # distinct graphs: the content cache must not make this cheap
        graph = base64.b64encode(_chain_graph(40_000 + i)).decode()
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"graph-{i}"},
                      "binaryData": {"model.onnx": graph}}  # fmt: skip
        cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(config_map))
    big = [DLJobBuilder(f"big-{i}").model(onnx={"configMap": f"graph-{i}"}).obj() for i in range(graphs)]
    apply(cluster, namespace, *big)
    apply(cluster, namespace, DLJobBuilder("plain").obj())
    names = [f"big-{i}" for i in range(graphs)]
    jobs = wait_phases(cluster, namespace, ["plain", *names], PLACED | {"Failed"}, timeout=180)
    placed_at = {name: _scheduled_at(job) for name, job in jobs.items()}
    assert all(jobs[n]["status"]["phase"] in PLACED for n in names), {n: jobs[n]["status"] for n in names}
    # The plain job, submitted last, did not wait for the graphs: it was placed before the last of them.
    assert placed_at["plain"] < max(placed_at[n] for n in names), placed_at
    cycles = [int(ms) for ms in re.findall(r"status writes in (\d+) ms", operator.log_text())]
    print(f"\ncycles while {graphs} graphs of ~0.9 MB were read: {len(cycles)}, the longest {max(cycles)} ms")


def _scheduled_at(job: dict[str, Any]) -> str:
    return next(c["lastTransitionTime"] for c in job["status"]["conditions"] if c["type"] == "Scheduled")
