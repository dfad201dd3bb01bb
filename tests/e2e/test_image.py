"""The operator image (`make image`, hack/build-image.sh) run as a container the way the manifests run it.

runc starts the image's unpacked bundle with what the Deployment or the DaemonSet in manifests/ says:
its args and env (fieldRefs filled in), its securityContext (user 65532, read-only root filesystem, all
capabilities dropped, no privilege escalation), its emptyDir volumes as tmpfs mounts, hostPID. Two
things differ from a cluster: the container shares this machine's network namespace (the local control
plane listens on 127.0.0.1), and the session's kubeconfig, mounted read-only, stands in for the
service-account token. Ports the manifests fix (8080, 9400) are replaced by free ones, since the host's
network is shared.

The image is built (or found up to date) by the module's first test; only a machine without the build
tools or runc, or a test run without root (runc and mmdebstrap), skips — with that reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dljob_harness import apply, free_port, get_json, wait_phases

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, lease_holder, terminate, wait_for

pytestmark = pytest.mark.e2e

IMAGE_DIR = REPO / "out" / "image"
TOOLS = ("mmdebstrap", "umoci", "skopeo", "runc")
KUBECONFIG_IN_CONTAINER = "/etc/horus/kubeconfig"
NODE = "gpu-node-1"  # conftest.E2E_POOLS: 4 × V100 16 GiB


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    """Builds the image if its inputs changed; returns the image's configuration (OCI `config`)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' '.join(missing)} not installed (hack/install-deps.sh installs them)")
    if os.geteuid() != 0:
        pytest.skip("runc and mmdebstrap's root mode need root")
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(["bash", "hack/build-image.sh"], cwd=REPO, env=env, check=True)
    (archive,) = IMAGE_DIR.glob("*.oci.tar")
    inspected = subprocess.run(
        ["skopeo", "inspect", "--config", f"oci-archive:{archive}"], capture_output=True, check=True
    )
    return json.loads(inspected.stdout)["config"]


def workload(manifest: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, its one container) of the workload in manifests/<manifest>."""
    (document,) = yaml.safe_load_all((REPO / "manifests" / manifest).read_text())
    pod = document["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


@dataclasses.dataclass(frozen=True)
class Launch:
    """A manifest's pod spec and container, the values its fieldRefs read, env overriding its env, args."""

    pod: dict[str, Any]
    container: dict[str, Any]
    fields: dict[str, str]
    env: dict[str, str]
    args: list[str]


class Container:
    """One runc container from the image's bundle, configured from a manifest's pod spec."""

    def __init__(self, image_config: dict[str, Any], workdir: Path, kubeconfig: Path) -> None:
        self.image_config = image_config
        self.workdir = workdir
        self.id = f"horus-e2e-{secrets.token_hex(4)}"
        # The session's kubeconfig is readable by root only: the container's user gets its own copy.
        self.kubeconfig = workdir / "kubeconfig"
        shutil.copyfile(kubeconfig, self.kubeconfig)
        self.kubeconfig.chmod(0o444)
        self.log_path = workdir / "container.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, launch: Launch) -> None:
        (self.workdir / "config.json").write_text(json.dumps(self._runtime_spec(launch), indent=2))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                ["runc", "run", "--bundle", str(self.workdir), self.id], stdout=log, stderr=subprocess.STDOUT
            )

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process)  # runc forwards the signal to the container's process
            self.process = None
        subprocess.run(["runc", "delete", "--force", self.id], capture_output=True, check=False)

    def running(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"container exited; log:\n{self.log_text()}")
        return True

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def proc(self, name: str) -> str:
        """/proc/<pid>/<name> of the container's process, as this machine sees it."""
        state = subprocess.run(["runc", "state", self.id], capture_output=True, check=True)
        return Path(f"/proc/{json.loads(state.stdout)['pid']}/{name}").read_text()

    def _runtime_spec(self, launch: Launch) -> dict[str, Any]:
        # umoci's runtime spec for the image: its user, env, working directory; the rest is replaced.
        spec = json.loads((IMAGE_DIR / "bundle" / "config.json").read_text())
        pod, container = launch.pod, launch.container
        security = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        dropped = "ALL" in security["capabilities"]["drop"]
        manifest_env = {
            e["name"]: e.get("value") or launch.fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
            for e in container.get("env", [])
        }
        manifest_env |= launch.env | {"KUBECONFIG": KUBECONFIG_IN_CONTAINER}
        spec["root"] = {
            "path": str(IMAGE_DIR / "bundle" / "rootfs"),
            "readonly": security["readOnlyRootFilesystem"],
        }
        spec["process"] |= {
            "terminal": False,
            "args": [*self.image_config["Entrypoint"], *launch.args],
            "env": [*self.image_config["Env"], *(f"{k}={v}" for k, v in manifest_env.items())],
            "user": {"uid": security["runAsUser"], "gid": security["runAsGroup"]},
            "noNewPrivileges": not security["allowPrivilegeEscalation"],
            "capabilities": {k: [] if dropped else v for k, v in spec["process"]["capabilities"].items()},
        }
        shared = {"network"} | ({"pid"} if pod.get("hostPID") else set())
        spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] not in shared]
        empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
        spec["mounts"] += [
            {
                "destination": m["mountPath"],
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev"],
            }
            for m in container.get("volumeMounts", [])
            if m["name"] in empty_dirs
        ]
        spec["mounts"].append(
            {
                "destination": KUBECONFIG_IN_CONTAINER,
                "type": "bind",
                "source": str(self.kubeconfig),
                "options": ["bind", "ro"],
            }
        )
        return spec


@pytest.fixture
def container(image: dict[str, Any], cluster: devcluster.LocalCluster, tmp_path: Path) -> Iterator[Container]:
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev", "gpunodes.horus.dev")
    running = Container(image, tmp_path, cluster.kubeconfig)
    try:
        yield running
    finally:
        running.stop()


def dockerfile_config() -> dict[str, Any]:
    """The final stage of the Dockerfile, as the image configuration fields it sets."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    final_stage = text.rsplit("\nFROM ", 1)[1]
    instructions = dict(line.split(" ", 1) for line in final_stage.splitlines() if line[:1].isupper())
    return {
        "User": instructions["USER"],
        "WorkingDir": instructions["WORKDIR"],
        "Env": instructions["ENV"].split(),
        "ExposedPorts": {f"{instructions['EXPOSE']}/tcp": {}},
        "Entrypoint": json.loads(instructions["ENTRYPOINT"]),
        "Cmd": json.loads(instructions["CMD"]),
    }


def test_the_dockerfile_configures_the_image_as_make_image_does(image: dict[str, Any]) -> None:
    assert dockerfile_config() == {field: image[field] for field in dockerfile_config()}


def test_the_image_runs_as_the_manifests_say_and_holds_no_compiler(image: dict[str, Any]) -> None:
    deployment_pod, _ = workload("operator.yaml")
    user = deployment_pod["securityContext"]
    assert image["User"] == f"{user['runAsUser']}:{user['runAsGroup']}"
    assert (image["Entrypoint"], image["Cmd"]) == (["horus"], ["run"])
    (path,) = (e.removeprefix("PATH=") for e in image["Env"] if e.startswith("PATH="))
    rootfs = IMAGE_DIR / "bundle" / "rootfs"
    inside = os.pathsep.join(str(rootfs / d.lstrip("/")) for d in path.split(":"))
    assert [tool for tool in ("cc", "gcc", "g++", "apt", "pip") if shutil.which(tool, path=inside)] == []


def test_the_operator_image_places_a_dljob(
    container: Container, cluster: devcluster.LocalCluster, namespace: str
) -> None:
    pod, spec = workload("operator.yaml")
    health_port, metrics_port = free_port(), free_port()
    (manifest_port,) = (p["containerPort"] for p in spec["ports"] if p["name"] == "health")
    args = [a.replace(f":{manifest_port}/", f":{health_port}/") for a in spec["args"]]
    fields = {"metadata.namespace": namespace, "metadata.name": "horus-operator-image-e2e"}
    # The host's ports, as the agent's test does: another operator of the session may hold the manifest's.
    env = {**FAST_SETTINGS, "HORUS_METRICS_PORT": str(metrics_port)}
    container.start(Launch(pod, spec, fields, env=env, args=args))

    def leading() -> bool:
        return container.running() and lease_holder(cluster, namespace) == fields["metadata.name"]

    wait_for(leading, timeout=90, what="the containerised operator to take its Lease")
    apply(cluster, namespace, DLJobBuilder("boxed").model(architecture="resnet50").batch_size(32).obj())
    jobs = wait_phases(cluster, namespace, ["boxed"], {"Running"}, timeout=60)

    (pod_placed,) = get_json(cluster, namespace, "pods", "-l", "horus.dev/dljob=boxed")["items"]
    assert pod_placed["spec"]["nodeName"] == jobs["boxed"]["status"]["node"], container.log_text()
    with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=10) as response:
        assert response.status == 200
    status = dict(line.split(":\t", 1) for line in container.proc("status").splitlines())
    user = pod["securityContext"]
    assert status["Uid"].split() == [str(user["runAsUser"])] * 4
    assert status["Gid"].split() == [str(user["runAsGroup"])] * 4
    assert (int(status["CapEff"], 16), int(status["CapPrm"], 16), status["NoNewPrivs"]) == (0, 0, "1")
    root_options = next(
        line.split()[3] for line in container.proc("mounts").splitlines() if line.split()[1] == "/"
    )
    assert "ro" in root_options.split(","), root_options


def test_the_agent_image_publishes_its_nodes_gpus_with_the_fake_backend(
    container: Container, cluster: devcluster.LocalCluster
) -> None:
    pod, spec = workload("agent-daemonset.yaml")
    metrics_port = free_port()
    env = {
        "HORUS_NVML_BACKEND": "fake",
        "HORUS_PUBLISH_INTERVAL": "1",
        "HORUS_METRICS_PORT": str(metrics_port),
    }
    container.start(Launch(pod, spec, {"spec.nodeName": NODE}, env, spec["args"]))
    try:

        def published() -> dict[str, Any]:
            found = cluster.kubectl("get", "gpunode", NODE, "-o", "json", check=False)
            return (
                container.running() and found.returncode == 0 and json.loads(found.stdout).get("status", {})
            )

        status = wait_for(published, timeout=60, what=f"the containerised agent to publish GPUNode {NODE}")
        assert (status["backend"], status["gpuCount"], status["healthyGpus"]) == ("fake", 4, 4)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            assert f'node="{NODE}"' in response.read().decode()
    finally:
        # A GPUNode left behind would look silent to later tests' operators once its agent stops; the
        # fake backend's ResourceSlice (published if its role allows) goes too.
        cluster.kubectl("delete", "gpunode", NODE, check=False)
        cluster.kubectl(
            "delete", "resourceslice", f"{NODE}-gpu.nvidia.com", "--ignore-not-found", check=False
        )
