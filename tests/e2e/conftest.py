"""End-to-end fixtures: one real local control plane per test session.

Fixtures for tests marked `@pytest.mark.e2e`:

- `cluster` (session): a running `horus_operator.devcluster.LocalCluster` — compiled etcd-backed
  kube-apiserver, kube-controller-manager (garbage collector, namespace, job/replicaset/deployment
  controllers), kube-scheduler and kwok — brought up once in a temporary state directory and torn
  down after the last test. `KUBECONFIG` points at its admin kubeconfig for the whole session (so
  kopf, the kubernetes client and subprocesses find it). Provides `.kubeconfig` (Path),
  `.kubectl(*args, input=None, check=True, timeout=120) -> CompletedProcess[str]` (raises
  `devcluster.ClusterError` on failure when `check`), `.add_nodes(GpuNodePool(...)) -> [names]`,
  `.state_dir` (logs in `logs/<process>.log`), `.ports`. Its nodes are `E2E_POOLS`: two
  `gpu-node-<i>` (4 × Tesla-V100-SXM2-16GB) and one `a100-node-0` (8 × NVIDIA-A100-SXM4-40GB),
  labelled like GPU Feature Discovery, with `nvidia.com/gpu` capacity. Nodes are shared by the
  session: a test that adds nodes uses its own `name_prefix`.
- `namespace` (per test): a fresh namespace named after the test, deleted afterwards (without
  waiting). Put every object a test creates in it.

Pods end through kwok stages keyed on annotations (see docs/local-cluster.md):
`pod-complete.stage.kwok.x-k8s.io/delay: "5s"` → Succeeded, `pod-fail.stage.kwok.x-k8s.io/delay`
→ Failed. Without either, a bound pod stays Running.

If the control plane is not compiled yet and e2e tests were collected, it is built right after
collection (a long first build; outside any test's timeout) instead of skipping: an e2e run that
silently tested nothing would be worse than a slow one.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agents

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, OperatorProcess

E2E_POOLS = (
    devcluster.GpuNodePool(count=2, gpus_per_node=4),
    devcluster.GpuNodePool(
        count=1,
        gpus_per_node=8,
        gpu_product="NVIDIA-A100-SXM4-40GB",
        gpu_memory_mib=40960,
        name_prefix="a100-node",
    ),
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "operator_settings(**env): HORUS_* settings added for this test (or module) to the ones its "
        "operator fixture starts `horus run` with (conftest's `horus`, test_agent's `operator`)",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    control_plane = devcluster.ControlPlane.pinned()
    wants_cluster = any(item.get_closest_marker("e2e") for item in session.items)
    if wants_cluster and not control_plane.is_built and not session.config.option.collectonly:
        control_plane.build()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries the log tail of each operator that logged during the test (also
    one the test stopped in its clean-up): e2e failures that only CI's loaded machine shows are then
    readable from its output."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for process in sorted(OperatorProcess.started, key=lambda p: str(p.log_path)):
            if process.log_path.exists() and process.log_path.stat().st_mtime >= call.start:
                title = f"operator {process.identity} log, last 150 lines"
                report.sections.append((title, process.log_tail(150)))
        report.sections.extend(_cluster_sections(item))


def _cluster_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """What the cluster showed when an e2e test failed: every DLJob (phase, node, GPUs, resourceVersion,
    message) and Horus pod (phase, node, why it is not running), the test namespace's events and the
    scheduler's and kwok's log tails. A pod the operator created that never ran is otherwise invisible
    in the report (the namespace is gone by then)."""
    funcargs = getattr(item, "funcargs", {})
    cluster = funcargs.get("cluster")
    if not isinstance(cluster, devcluster.LocalCluster):
        return []
    columns = (
        "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase,"
        "NODE:.spec.nodeName,DELETING:.metadata.deletionTimestamp,"
        "WHY:.status.conditions[?(@.status=='False')].message"
    )
    jobs = (
        "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase,"
        "NODE:.status.node,GPUS:.status.gpuList,VERSION:.metadata.resourceVersion,MESSAGE:.status.message"
    )
    queries = {
        "DLJobs": ("get", "dljobs", "-A", "-o", jobs),
        "Horus pods": ("get", "pods", "-A", "-l", keys.LABEL_JOB, "-o", columns),
    }
    if isinstance(funcargs.get("namespace"), str):
        queries["events"] = ("get", "events", "-n", funcargs["namespace"], "--sort-by=.lastTimestamp")
    sections = []
    for title, args in queries.items():
        found = cluster.kubectl(*args, check=False, timeout=20)
        sections.append((f"cluster: {title}", found.stdout + found.stderr))
    for component, about_pods in (("kube-scheduler", " pod="), ("kwok", '"pod":')):
        log = cluster.state_dir / "logs" / f"{component}.log"
        if log.exists():
            lines = [line for line in log.read_text(errors="replace").splitlines() if about_pods in line]
            sections.append((f"cluster: {component} log about pods, last 40 lines", "\n".join(lines[-40:])))
    return sections


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.LocalCluster]:
    local = devcluster.LocalCluster(tmp_path_factory.mktemp("cluster"), pools=E2E_POOLS)
    local.up()
    previous_kubeconfig = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(local.kubeconfig)
    try:
        yield local
    finally:
        if previous_kubeconfig is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous_kubeconfig
        local.down()


@pytest.fixture
def namespace(cluster: devcluster.LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    # Namespace names are DNS labels: lower case, at most 63 characters.
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:48]
    name = f"{stem}-{secrets.token_hex(3)}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def horus(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    """`horus run` (default policy) against the session's cluster with the CRDs applied, per test module,
    at the fast settings and those of the module's `operator_settings` marker."""
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    marker = request.node.get_closest_marker("operator_settings")
    settings = {**FAST_SETTINGS, **(marker.kwargs if marker else {})}
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    operator = OperatorProcess(cluster, log, settings=settings)
    operator.start()
    yield operator
    operator.stop()


@pytest.fixture(scope="module")
def gpunode_crd(cluster: devcluster.LocalCluster) -> Iterator[None]:
    cluster.kubectl(
        "apply", "-f", str(REPO / "crds" / "dljob.yaml"), "-f", str(REPO / "crds" / "gpunode.yaml")
    )
    cluster.wait_established("gpunodes.horus.dev", "dljobs.horus.dev")
    yield
    # Stale GPUNodes would make later tests' GPUs look silent: leave no telemetry behind, and no
    # ResourceSlices either (the fake agents publish them; later tests read GPUs from GFD labels).
    cluster.kubectl("delete", "gpunodes", "--all", check=False)
    cluster.kubectl("delete", "resourceslices", "--all", check=False)


@pytest.fixture
def agents(cluster: devcluster.LocalCluster, gpunode_crd: None, tmp_path: Path) -> Iterator[Agents]:
    running = Agents(cluster, tmp_path)
    try:
        yield running
    finally:
        running.stop()
        cluster.kubectl("delete", "gpunodes", "--all", check=False)
