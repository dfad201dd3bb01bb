"""The local control plane behaves like a cluster with GPU nodes: kube-scheduler binds GPU pods to
the fake nodes, kwok runs and ends them on their delay annotation, the garbage collector cascades
owner references, and `horus cluster down` leaves nothing behind."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from horus_operator import devcluster

pytestmark = pytest.mark.e2e

V100 = "Tesla-V100-SXM2-16GB"
TERMINAL_PHASES = {"Succeeded", "Failed"}


def gpu_pod(
    name: str, *, gpus: int, product: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.product": product},
            "containers": [
                {
                    "name": "train",
                    "image": "example.invalid/train:latest",  # never pulled: kwok runs nothing
                    "resources": {"limits": {devcluster.GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }


def create(cluster: devcluster.LocalCluster, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    created = cluster.kubectl("create", "-n", namespace, "-o", "json", "-f", "-", input=json.dumps(manifest))
    return json.loads(created.stdout)


def get(cluster: devcluster.LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", "-n", namespace, kind, name, "-o", "json").stdout)


def watch_phases(
    cluster: devcluster.LocalCluster, namespace: str, pod: str, timeout_s: int = 120
) -> list[str]:
    """Every phase the API server reports for the pod (current state first) until a terminal one."""
    argv = [
        str(devcluster.kubectl_path()),
        f"--kubeconfig={cluster.kubeconfig}",
        f"--request-timeout={timeout_s}s",
        *("get", "pod", pod, "-n", namespace, "--watch", "-o", 'jsonpath={.status.phase}{"\\n"}'),
    ]
    phases: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as watch:
        assert watch.stdout is not None
        for line in watch.stdout:
            if line.strip() and (not phases or phases[-1] != line.strip()):
                phases.append(line.strip())
            if phases and phases[-1] in TERMINAL_PHASES:
                break
        watch.terminate()
    return phases


def test_fake_gpu_nodes_carry_gpu_feature_discovery_labels_and_capacity(
    cluster: devcluster.LocalCluster,
) -> None:
    listing = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)
    by_name = {node["metadata"]["name"]: node for node in listing["items"]}

    assert set(by_name) == {"gpu-node-0", "gpu-node-1", "a100-node-0"}
    a100 = by_name["a100-node-0"]
    assert a100["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert a100["metadata"]["labels"]["nvidia.com/gpu.count"] == "8"
    assert a100["metadata"]["labels"]["nvidia.com/gpu.memory"] == "40960"
    assert a100["status"]["allocatable"][devcluster.GPU_RESOURCE] == "8"
    assert a100["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"


def test_gpu_pod_is_scheduled_runs_and_succeeds_after_its_delay(
    cluster: devcluster.LocalCluster, namespace: str
) -> None:
    pod = gpu_pod(
        "train-ok", gpus=2, product=V100, annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "8s"}
    )
    create(cluster, namespace, pod)

    phases = watch_phases(cluster, namespace, "train-ok")

    assert phases[-2:] == ["Running", "Succeeded"]
    finished = get(cluster, namespace, "pod", "train-ok")
    assert finished["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    node = json.loads(cluster.kubectl("get", "node", finished["spec"]["nodeName"], "-o", "json").stdout)
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == V100
    scheduled = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=train-ok,reason=Scheduled",
        "-o", "jsonpath={.items[*].reportingComponent}",
    )  # fmt: skip
    assert scheduled.stdout.split() == ["default-scheduler"]


def test_pod_with_fail_annotation_fails(cluster: devcluster.LocalCluster, namespace: str) -> None:
    pod = gpu_pod("train-bad", gpus=1, product=V100, annotations={"pod-fail.stage.kwok.x-k8s.io/delay": "2s"})
    create(cluster, namespace, pod)

    phases = watch_phases(cluster, namespace, "train-bad")

    assert phases[-1] == "Failed"
    failed = get(cluster, namespace, "pod", "train-bad")
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_pod_asking_more_gpus_than_any_node_stays_pending(
    cluster: devcluster.LocalCluster, namespace: str
) -> None:
    create(cluster, namespace, gpu_pod("too-big", gpus=5, product=V100))

    cluster.kubectl(
        "wait", "-n", namespace, "pod/too-big", "--for=condition=PodScheduled=False", "--timeout=60s"
    )
    pod = get(cluster, namespace, "pod", "too-big")
    assert pod["status"]["phase"] == "Pending"
    assert "nvidia.com/gpu" in pod["status"]["conditions"][0]["message"]


def test_deleting_the_owner_deletes_the_pod(cluster: devcluster.LocalCluster, namespace: str) -> None:
    owner = create(
        cluster, namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    )
    pod = gpu_pod("owned", gpus=1, product=V100)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    ]
    create(cluster, namespace, pod)
    cluster.kubectl(
        "wait", "-n", namespace, "pod/owned", "--for=jsonpath={.status.phase}=Running", "--timeout=60s"
    )

    cluster.kubectl("delete", "-n", namespace, "configmap", "owner", "--wait=true")

    cluster.kubectl("wait", "-n", namespace, "pod/owned", "--for=delete", "--timeout=90s")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_cli_down_leaves_no_process_and_no_listener(cluster: devcluster.LocalCluster, tmp_path: Path) -> None:
    # A second cluster beside the session's: ports are chosen at start, so the two never collide.
    state_dir = tmp_path / "cli-cluster"
    horus = [Path(sys.executable).with_name("horus"), "cluster"]
    subprocess.run([*horus, "up", "--state-dir", state_dir, "--nodes", "1"], check=True, timeout=300)
    subprocess.run([*horus, "status", "--state-dir", state_dir], check=True, timeout=60)
    second = devcluster.LocalCluster(state_dir)
    records = second.processes.records()
    ports = second.ports.as_dict().values()
    assert {record.name for record in records} >= {"etcd", "kube-apiserver", "kube-scheduler", "kwok"}
    assert all(_listening(port) for port in ports)

    subprocess.run([*horus, "down", "--state-dir", state_dir], check=True, timeout=120)

    assert not any(record.alive for record in records)
    assert not any(_listening(port) for port in ports)
    assert not state_dir.exists()
    assert cluster.kubectl("get", "--raw", "/readyz").stdout == "ok"  # the session's cluster is untouched


def test_failed_start_reports_the_failing_log_and_leaves_nothing_running(tmp_path: Path) -> None:
    # A control plane whose kube-apiserver exits at once; every other binary is the real one.
    real = devcluster.ControlPlane.pinned()
    broken = devcluster.ControlPlane(tmp_path / "broken-plane")
    broken.bin_dir.mkdir(parents=True)
    for binary in real.bin_dir.iterdir():
        (broken.bin_dir / binary.name).symlink_to(binary)
    (broken.bin_dir / "kube-apiserver").unlink()
    (broken.bin_dir / "kube-apiserver").write_text(
        "#!/bin/sh\necho 'apiserver: deliberate failure'\nexit 3\n"
    )
    (broken.bin_dir / "kube-apiserver").chmod(0o755)
    (broken.root / ".complete").write_text("test double\n")
    local = devcluster.LocalCluster(tmp_path / "state", control_plane=broken, timeout=60)

    with pytest.raises(devcluster.ClusterError, match="kube-apiserver exited") as failure:
        local.up()

    assert "apiserver: deliberate failure" in str(failure.value)
    assert not local.is_running()
    assert (tmp_path / "state" / "logs" / "etcd.log").exists()  # logs are kept for inspection
