"""The telemetry loop on the real control plane: `horus agent --backend fake` processes publish GPUNode
objects for kwok nodes (nothing runs there, so the fake NVML derives readings from the pods Horus placed),
the operator places on and observes through them, and a silent agent's GPUs drop out after the TTL.

Jobs report progress the documented way: by patching their pod's progress annotation (here the test
does it, acting as the training code)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_harness import NODE, Agents, fake_nodes, gpunode
from dljob_harness import apply, dljobs, get_json, horus_pods, service_account_kubeconfig

from horus_operator import devcluster
from horus_operator.agent import kube as agent_kube
from horus_operator.agent.metrics import AgentMetrics
from horus_operator.commands.agent import AgentSettings, run_node
from horus_operator.operator import cluster_view
from horus_operator.operator.telemetry import gpunodes
from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import TruthTable
from horus_operator.prediction.predictor import load_predictor
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

PROGRESS = "horus.dev/progress-steps-per-second"
TTL_SECONDS = 4
# Where the fake agent reports the rates of a truth table, each pod's rate is its current co-tenants' from
# its first reading after they change (there is no stale progress annotation to outlast): 5 s of a
# co-tenancy (or of a job alone) settle it, instead of the minute real agents' rate windows need. Not for
# the tests that annotate progress themselves: there the old rate does outlast the change.
FAST_SETTLING = pytest.mark.operator_settings(HORUS_OBSERVED_SETTLE_SECONDS="5")


def gpu_entry(cluster: devcluster.LocalCluster, index: int, node: str = NODE) -> dict[str, Any]:
    gpus = (gpunode(cluster, node).get("status") or {}).get("gpus") or []
    return next((g for g in gpus if g["index"] == index), {})


def reported(cluster: devcluster.LocalCluster, node: str = NODE) -> list[gpunodes.NodeTelemetry]:
    """The node's GPUNode as an operator seeing it for the first time parses it (none before the agent's
    first publish)."""
    body = gpunode(cluster, node)
    return [gpunodes.parse(body, received_at=time.time())] if body else []


def test_the_fake_agent_publishes_what_the_pods_on_its_node_use(
    cluster: devcluster.LocalCluster, namespace: str, agents: Agents
) -> None:
    # What the operator writes on a pod it placed on GPU 1 (predicted use), and the job's progress.
    predicted = {"utilization": 0.6, "memoryMiB": 5000, "slowdown": 1.0}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-a-0",
            "labels": {"horus.dev/dljob": "train-a"},
            "annotations": {"horus.dev/predicted": json.dumps(predicted), PROGRESS: "12.5"},
        },
        "spec": {
            "nodeName": NODE,
            "containers": [
                {
                    "name": "train",
                    "image": "example.invalid/train:1",
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "1"}],
                }
            ],
        },
    }
    apply(cluster, namespace, pod)
    agents.start(NODE)

    busy = wait_for(
        lambda: gpu_entry(cluster, 1).get("pods") and gpu_entry(cluster, 1),
        timeout=60,
        what="the agent to report the pod on GPU 1",
    )

    assert (busy["utilization"], busy["memoryUsedMiB"], busy["healthy"]) == (0.6, 5000, True)
    (usage,) = busy["pods"]
    assert (usage["namespace"], usage["job"], usage["stepsPerSecond"]) == (namespace, "train-a", 12.5)
    status = gpunode(cluster)["status"]
    assert (status["backend"], status["gpuCount"], status["healthyGpus"]) == ("fake", 4, 4)
    assert gpu_entry(cluster, 0)["utilization"] == 0.0
    table = cluster.kubectl("get", "gpunodes", NODE).stdout
    assert table.split()[:7] == ["NAME", "GPUS", "HEALTHY", "UTIL", "MEMUSEDMIB", "BACKEND", "UPDATED"], table
    assert "0%,60%,0%,0%" in table and "0,5000,0,0" in table, table
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{agents.metrics_ports[NODE]}/metrics", timeout=10
    ).read()
    series = (
        f'horus_pod_gpu_utilization_ratio{{gpu="1",namespace="{namespace}",node="{NODE}",pod="train-a-0"}}'
    )
    assert f"{series} 0.6" in metrics.decode()


def test_a_silent_agents_gpus_become_unavailable_after_the_ttl(
    cluster: devcluster.LocalCluster, agents: Agents
) -> None:
    def snapshot_gpus() -> list[tuple[str | None, bool]]:
        """The node's GPUs as the operator's placement view builds them from the API server's objects."""
        node = json.loads(cluster.kubectl("get", "node", NODE, "-o", "json").stdout)
        view = cluster_view.build_snapshot(
            [cluster_view.view(node)],
            [],
            now=time.time(),
            gpunodes=reported(cluster),
            telemetry_ttl=TTL_SECONDS,
        )
        return [(g.uuid, g.healthy) for g in view.nodes[0].gpus]

    def reported_healthy() -> list[tuple[str | None, bool]] | None:
        gpus = snapshot_gpus()
        return gpus if all(uuid and ok for uuid, ok in gpus) else None

    agents.start(NODE)
    healthy = wait_for(reported_healthy, timeout=60, what="fresh telemetry with GPU UUIDs")
    assert all(uuid and uuid.startswith("GPU-") for uuid, _ in healthy)

    agents.stop(NODE)
    wait_for(
        lambda: not any(ok for _, ok in snapshot_gpus()), timeout=TTL_SECONDS * 5, what="the TTL to expire"
    )
    assert [uuid for uuid, _ in snapshot_gpus()] == [uuid for uuid, _ in healthy]  # UUIDs stay known


def test_without_nvml_the_agent_reports_its_node_unavailable_and_keeps_running(
    cluster: devcluster.LocalCluster, agents: Agents
) -> None:
    agents.start(NODE, backend="nvml")  # this machine has no NVIDIA driver

    status = wait_for(lambda: gpunode(cluster).get("status"), timeout=60, what="the agent's GPUNode")
    node = json.loads(cluster.kubectl("get", "node", NODE, "-o", "json").stdout)
    nodes = [cluster_view.view(node)]
    view = cluster_view.build_snapshot(nodes, [], now=time.time(), gpunodes=reported(cluster))

    assert (status["nvmlAvailable"], status["backend"]) == (False, "nvml")
    assert "NVML" in status["message"]
    assert not any(g.healthy for g in view.nodes[0].gpus)
    time.sleep(2)
    assert agents.processes[NODE].poll() is None  # still running, no crash loop


def test_the_agent_needs_no_more_than_its_manifest_rbac(
    cluster: devcluster.LocalCluster, agents: Agents, tmp_path: Path
) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "agent-rbac.yaml"))
    as_agent = service_account_kubeconfig(
        cluster, "horus-agent", "horus-agent", tmp_path / "agent.kubeconfig"
    )

    agents.start(NODE, kubeconfig=as_agent)

    wait_for(lambda: gpunode(cluster).get("status", {}).get("gpuCount") == 4, timeout=60, what="a GPUNode")
    cannot = [
        "patch pods",
        "patch nodes",
        "get secrets",
        "delete gpunodes.horus.dev",
        "list dljobs.horus.dev",
    ]
    for verb_and_resource in cannot:
        argv = [
            str(devcluster.kubectl_path()),
            f"--kubeconfig={as_agent}",
            "auth",
            "can-i",
            *verb_and_resource.split(),
        ]
        answer = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert answer.stdout.strip() == "no", verb_and_resource


@pytest.fixture
def operator(
    cluster: devcluster.LocalCluster, gpunode_crd: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    """`horus run` with the interference-blind binpack policy (so the second job shares the first one's
    GPU for certain), a short telemetry TTL, and the test's `operator_settings` marker's settings."""
    overrides = {"HORUS_POLICY": "binpack", "HORUS_TELEMETRY_TTL_SECONDS": str(TTL_SECONDS)}
    marker = request.node.get_closest_marker("operator_settings")
    overrides.update(marker.kwargs if marker else {})
    saved = {key: os.environ.get(key) for key in overrides}
    os.environ.update(overrides)
    process = OperatorProcess(cluster, tmp_path / "operator.log", identity="e2e-agent-operator")
    try:
        process.start()
        yield process
    finally:
        process.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        # the observed dataset and the online correction: later tests start from the shipped model
        cluster.kubectl("delete", "configmaps", "-n", "default", "-l", "horus.dev/dataset", check=False)


def dljob(name: str, architecture: str, batch_size: int) -> dict[str, Any]:
    """A job that may share with anything (maxSlowdown 10) and never finishes by itself."""
    return (
        DLJobBuilder(name)
        .model(architecture=architecture)
        .batch_size(batch_size)
        .spec(maxSlowdown=10.0)
        .obj()
    )


def report_progress(
    cluster: devcluster.LocalCluster, namespace: str, job: str, steps_per_second: float
) -> None:
    """What the training code does: annotate its own pod with its current rate."""
    (pod,) = [p for p in horus_pods(cluster, namespace) if p["metadata"]["labels"]["horus.dev/dljob"] == job]
    cluster.kubectl(
        "annotate",
        "--overwrite",
        "-n",
        namespace,
        "pod",
        pod["metadata"]["name"],
        f"{PROGRESS}={steps_per_second}",
    )


def observed(cluster: devcluster.LocalCluster, namespace: str, job: str) -> dict[str, Any]:
    return (dljobs(cluster, namespace).get(job, {}).get("status") or {}).get("observed") or {}


def observed_when(
    cluster: devcluster.LocalCluster, namespace: str, job: str, **expected: Any
) -> dict[str, Any]:
    """The job's status.observed once it has the expected values, else {}."""
    current = observed(cluster, namespace, job)
    return current if all(current.get(k) == v for k, v in expected.items()) else {}


def running(cluster: devcluster.LocalCluster, namespace: str, job: str) -> dict[str, Any] | None:
    status = dljobs(cluster, namespace).get(job, {}).get("status") or {}
    return status if status.get("phase") == "Running" else None


def test_predicted_and_observed_side_by_side_and_the_dataset_grows_when_jobs_share_a_gpu(
    cluster: devcluster.LocalCluster,
    namespace: str,
    agents: Agents,
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    nodes = fake_nodes(cluster)
    agents.start_all()
    wait_for(lambda: all(gpunode(cluster, n) for n in nodes), timeout=60, what="every agent's first GPUNode")

    # Two small RL jobs the roofline predicts far below busy on a V100 (host-bound): the fake NVML
    # reports the predicted utilization, and a GPU measured >= 95 % busy takes no co-tenant.
    apply(cluster, namespace, dljob("job-a", "a2c", 8))
    a = wait_for(lambda: running(cluster, namespace, "job-a"), timeout=60, what="job-a running")
    report_progress(cluster, namespace, "job-a", 10.0)
    # The fake NVML reports the predicted use of a job alone: observed equals predicted by construction,
    # once a whole window has seen the pod (the window in which the agent first lists it averages lower).
    predicted_utilization = round(a["predicted"]["utilization"], 4)
    a_alone = wait_for(
        lambda: observed_when(
            cluster, namespace, "job-a", aloneStepsPerSecond=10.0, utilization=predicted_utilization
        ),
        timeout=60,
        what="job-a observed alone at its predicted utilization",
    )
    assert a_alone["memoryMiB"] == pytest.approx(a["predicted"]["memoryMiB"], abs=1)
    assert a_alone["slowdown"] == 1.0
    assert [g.get("uuid", "").startswith("GPU-") for g in a["gpus"]] == [True]  # UUIDs from the agent

    apply(cluster, namespace, dljob("job-b", "dqn", 8))
    b = wait_for(lambda: running(cluster, namespace, "job-b"), timeout=60, what="job-b running")
    assert (b["node"], b["gpus"]) == (a["node"], a["gpus"]), "binpack puts job-b on job-a's GPU"
    # Report the shared rates once the operator has seen the jobs share (a rate reported before that
    # is taken as belonging to the previous co-tenancy, see observed.observed_status).
    sharing = [f"{namespace}/job-b"]
    wait_for(
        lambda: observed_when(cluster, namespace, "job-a", sharingWith=sharing), timeout=60, what="sharing"
    )
    report_progress(cluster, namespace, "job-a", 6.0)
    report_progress(cluster, namespace, "job-b", 4.0)
    shared_a = wait_for(
        lambda: observed_when(cluster, namespace, "job-a", stepsPerSecond=6.0),
        timeout=60,
        what="job-a observed while sharing",
    )
    assert shared_a["slowdown"] == pytest.approx(10.0 / 6.0, abs=1e-3)
    assert shared_a["sharingWith"] == [f"{namespace}/job-b"]

    # job-a ends (kwok completes its pod); job-b now runs alone, which gives its alone rate.
    (pod_a,) = [
        p for p in horus_pods(cluster, namespace) if p["metadata"]["labels"]["horus.dev/dljob"] == "job-a"
    ]
    cluster.kubectl(
        "annotate",
        "-n",
        namespace,
        "pod",
        pod_a["metadata"]["name"],
        "pod-complete.stage.kwok.x-k8s.io/delay=1s",
    )
    wait_for(
        lambda: observed_when(cluster, namespace, "job-b", sharingWith=[]), timeout=60, what="job-b alone"
    )
    report_progress(cluster, namespace, "job-b", 5.0)

    export = tmp_path / "observed.csv"

    def exported_rows() -> list[str]:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from horus_operator.cli import main; main()",
                "agent",
                "export-observations",
                "--namespace",
                "default",
                "--out",
                str(export),
            ],
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            check=True,
        )
        return export.read_text().splitlines()[1:]

    rows = wait_for(exported_rows, timeout=60, what="the observed co-location in the dataset")
    header = export.read_text().splitlines()[0]
    assert (
        header == "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared"
    )
    (row,) = rows
    gpu, model_a, _, model_b, _, *rates = row.split(",")
    assert gpu == "v100"
    # Rows are ordered by model name; the rates are the ones the jobs reported above.
    expected = {"a2c": (10.0, 6.0), "dqn": (5.0, 4.0)}
    got = {model_a: (float(rates[0]), float(rates[2])), model_b: (float(rates[1]), float(rates[3]))}
    assert got == {model: expected[model] for model in got}


def correction_state(cluster: devcluster.LocalCluster) -> dict[str, Any]:
    found = cluster.kubectl(
        "get", "configmap", "-n", "default", "horus-slowdown-correction", "-o", "json", check=False
    )
    if found.returncode != 0:
        return {}
    return json.loads(json.loads(found.stdout)["data"]["correction.json"])


def placed(cluster: devcluster.LocalCluster, namespace: str, job: str) -> dict[str, Any] | None:
    status = dljobs(cluster, namespace).get(job, {}).get("status") or {}
    return status if status.get("node") else None


@FAST_SETTLING
def test_a_measured_slowdown_above_the_prediction_corrects_the_next_placement_across_a_restart(
    cluster: devcluster.LocalCluster, namespace: str, agents: Agents, operator: OperatorProcess
) -> None:
    # The fake NVML reports Gavel's V100 measurements: recommendation/512 runs 8.27x slower next to
    # resnet50/64, where the shipped model predicts 6.13x. Nothing here reports progress: the agents
    # publish the measured rates themselves. (Not resnet18/256: alone it reads 100 % busy, and binpack
    # does not pair onto a GPU over 95 % busy once the agent's first reading is in.)
    truth = REPO / "data" / "colocation" / "gavel_pairs_train.csv"
    nodes = fake_nodes(cluster)
    agents.start_all(truth=truth)
    wait_for(lambda: all(gpunode(cluster, n) for n in nodes), timeout=60, what="every agent's first GPUNode")
    recommendation, resnet = Workload("recommendation", 512), Workload("resnet50", 64)
    prior = load_predictor().slowdowns("v100", [resnet, recommendation])[1]  # type: ignore[index]
    measured = TruthTable.from_csv(truth).slowdowns("v100", [("recommendation", 512), ("resnet50", 64)])[0]  # type: ignore[index]
    assert measured > prior * 1.3

    # Earlier tests' namespaces may still be going away, their pods holding GPUs binpack would pack
    # job-a next to: it must run alone first.
    horus_pods = ("pods", "-A", "-l", "horus.dev/dljob", "--field-selector", "status.phase=Running")
    wait_for(
        lambda: not get_json(cluster, "default", *horus_pods)["items"], timeout=90, what="earlier pods gone"
    )
    apply(cluster, namespace, dljob("job-a", "recommendation", 512))
    wait_for(
        lambda: observed(cluster, namespace, "job-a").get("aloneStepsPerSecond"), timeout=60, what="a alone"
    )
    apply(cluster, namespace, dljob("job-b", "resnet50", 64))
    a, b = (
        wait_for(lambda j=j: placed(cluster, namespace, j), timeout=60, what=j) for j in ("job-a", "job-b")
    )
    assert (b["node"], b["gpus"]) == (a["node"], a["gpus"]), "binpack puts job-b on job-a's GPU"
    # The operator counts a rate for a co-tenancy once it changed or the co-tenancy has settled (5 s here).
    state = wait_for(lambda: correction_state(cluster).get("pairs"), timeout=150, what="the lesson saved")
    assert [row[:5] for row in state] == [["v100", "recommendation", 512, "fp32", ""]]

    operator.stop()  # a new leader must continue from what was learned
    operator.start()
    apply(cluster, namespace, dljob("job-c", "resnet50", 64))
    c = wait_for(lambda: placed(cluster, namespace, "job-c"), timeout=60, what="job-c placed")
    apply(cluster, namespace, dljob("job-d", "recommendation", 512))
    d = wait_for(lambda: placed(cluster, namespace, "job-d"), timeout=60, what="job-d placed")

    assert (d["node"], d["gpus"]) == (c["node"], c["gpus"])
    predicted = d["predicted"]
    assert (predicted["slowdownSource"], predicted["slowdownSamples"]) == ("observed", 1)
    assert prior < predicted["slowdown"] <= measured * 1.001  # moved toward what was measured
    assert a["predicted"]["slowdownSource"] == "prior"


@FAST_SETTLING
def test_a_busy_fraction_the_agent_observed_alone_is_what_the_next_job_of_its_kind_is_placed_by(
    cluster: devcluster.LocalCluster,
    namespace: str,
    agents: Agents,
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    """Issue 25, item 2: the fake agent reads per-pod utilization from the truth's `util_*_alone`
    columns; once job-a has run alone, its busy fraction stands for jobs of its signature in the
    placement that follows (status.predicted: utilization and utilizationSource)."""
    busy = 0.12  # a truth of our own: recommendation/512 keeps a V100 12 % busy alone
    truth = tmp_path / "truth.csv"
    with (REPO / "data" / "colocation" / "gavel_pairs_train.csv").open() as source:
        rows = list(csv.DictReader(source))
    for row in rows:
        for side in ("a", "b"):
            chosen = (row["gpu"], row[f"model_{side}"], row[f"batch_{side}"]) == (
                "v100",
                "recommendation",
                "512",
            )
            row[f"util_{side}_alone"] = str(busy) if chosen else ""
    with truth.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    nodes = fake_nodes(cluster)
    agents.start_all(truth=truth)
    wait_for(lambda: all(gpunode(cluster, n) for n in nodes), timeout=60, what="every agent's first GPUNode")

    # Earlier tests' pods may still hold GPUs job-a would be packed next to: it must run alone.
    running_pods = ("pods", "-A", "-l", "horus.dev/dljob", "--field-selector", "status.phase=Running")
    wait_for(
        lambda: not get_json(cluster, "default", *running_pods)["items"], timeout=90, what="earlier pods gone"
    )
    apply(cluster, namespace, dljob("job-a", "recommendation", 512))

    def noted() -> list[Any]:  # the busy fraction, once job-a's alone period has settled (5 s here)
        rows = correction_state(cluster).get("busy") or []
        return [row for row in rows if row[1:3] == ["recommendation", 512]]

    (row,) = wait_for(noted, timeout=150, what="job-a's busy fraction alone noted and saved")
    assert row[-1] == pytest.approx(busy, abs=0.01)
    apply(cluster, namespace, dljob("job-b", "recommendation", 512))
    b = wait_for(lambda: placed(cluster, namespace, "job-b"), timeout=60, what="job-b placed")
    a = placed(cluster, namespace, "job-a")

    assert a is not None and a["predicted"]["utilizationSource"] == "predicted"
    assert b["predicted"]["utilizationSource"] == "observed"
    assert b["predicted"]["utilization"] == pytest.approx(busy, abs=0.01)
    assert a["predicted"]["utilization"] != pytest.approx(busy, abs=0.01)


def test_the_operator_places_nothing_on_gpus_whose_agents_went_silent(
    cluster: devcluster.LocalCluster, namespace: str, agents: Agents, operator: OperatorProcess
) -> None:
    nodes = fake_nodes(cluster)
    agents.start_all()
    wait_for(lambda: all(gpunode(cluster, n) for n in nodes), timeout=60, what="every agent's first GPUNode")
    agents.stop()
    time.sleep(TTL_SECONDS + 1)

    apply(cluster, namespace, dljob("job-c", "resnet50", 32))

    def waiting() -> str:
        status = dljobs(cluster, namespace).get("job-c", {}).get("status") or {}
        return status.get("message", "") if status.get("phase") == "Queued" else ""

    assert "unhealthy" in wait_for(waiting, timeout=60, what="job-c queued")
    agents.start_all()
    placed = wait_for(
        lambda: running(cluster, namespace, "job-c"), timeout=60, what="job-c placed once agents report"
    )
    assert placed["node"] in nodes


def queued_message(cluster: devcluster.LocalCluster, namespace: str, job: str) -> str:
    status = dljobs(cluster, namespace).get(job, {}).get("status") or {}
    return status.get("message", "") if status.get("phase") == "Queued" else ""


def test_nothing_is_placed_on_a_gpu_its_agent_reports_unhealthy_and_the_waiting_job_says_why(
    cluster: devcluster.LocalCluster, namespace: str, agents: Agents, operator: OperatorProcess
) -> None:
    # Every GPU but gpu-node-0's 0, 2 and 3 reads unhealthy: four jobs that each want a GPU whole.
    # Earlier tests' namespaces may still be going away, their pods holding GPUs of the node.
    on_node = ("pods", "-A", "-l", "horus.dev/dljob", "--field-selector", f"spec.nodeName={NODE}")
    wait_for(
        lambda: not get_json(cluster, "default", *on_node)["items"], timeout=60, what="earlier pods gone"
    )
    nodes = fake_nodes(cluster)
    counts = {
        n: int(get_json(cluster, "default", "node", n)["metadata"]["labels"]["nvidia.com/gpu.count"])
        for n in nodes
    }
    sick = [f"{n}:{i}" for n in nodes for i in range(counts[n]) if n != NODE] + [f"{NODE}:1"]
    agents.start_all(unhealthy=sick)
    wait_for(
        lambda: gpu_entry(cluster, 1).get("healthy") is False, timeout=60, what="GPU 1 reported unhealthy"
    )
    names = [f"whole-{i}" for i in range(4)]
    apply(
        cluster,
        namespace,
        *(
            DLJobBuilder(n).model(architecture="resnet50").batch_size(32).spec(maxSlowdown=1.0).obj()
            for n in names
        ),
    )

    not_usable = f"not usable: GPU unhealthy or its agent silent ({len(sick)} GPUs)"
    wait_for(
        lambda: (
            sum(running(cluster, namespace, n) is not None for n in names) == 3
            and any(not_usable in queued_message(cluster, namespace, n) for n in names)
        ),
        timeout=60,
        what="three jobs running, the fourth told the unhealthy GPUs are not usable",
    )
    placed = [running(cluster, namespace, n) for n in names]
    assert sorted((s["node"], s["gpuList"]) for s in placed if s) == [(NODE, "0"), (NODE, "2"), (NODE, "3")]
    events = cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        "reason=Waiting",
        "-o",
        "jsonpath={.items[*].message}",
    ).stdout
    assert not_usable in events, events

    # The GPU recovers (a reset): the waiting job takes it.
    agents.stop()
    agents.start_all(unhealthy=sick[:-1])
    (waiting,) = [n for n, s in zip(names, placed, strict=True) if s is None]
    moved = wait_for(
        lambda: running(cluster, namespace, waiting), timeout=60, what="the job on the healthy GPU 1"
    )
    assert (moved["node"], moved["gpuList"]) == (NODE, "1")


class SkewedAgents:
    """The real agent loop (fake backend) of every GPU node, run in this process on a wall clock `skew`
    seconds off this machine's, which is the operator's."""

    def __init__(self, cluster: devcluster.LocalCluster) -> None:
        self.cluster = cluster
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, skew: float) -> None:
        agent_kube.load_config(str(self.cluster.kubeconfig))
        self._stop = threading.Event()
        settings = AgentSettings("fake", sample_interval=0.25, publish_interval=1.0)
        for node in fake_nodes(self.cluster):
            args = (node, settings, AgentMetrics(), self._stop, lambda: time.time() + skew)
            self._threads.append(threading.Thread(target=run_node, args=args, daemon=True))
            self._threads[-1].start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()


@pytest.fixture
def skewed_agents(cluster: devcluster.LocalCluster, gpunode_crd: None) -> Iterator[SkewedAgents]:
    running_agents = SkewedAgents(cluster)
    try:
        yield running_agents
    finally:
        running_agents.stop()
        cluster.kubectl("delete", "gpunodes", "--all", check=False)


SKEW_SECONDS = 300.0  # five minutes, far beyond the operator's TTL (4 s here, 60 s by default)


def agent_clock_offset(cluster: devcluster.LocalCluster) -> float | None:
    """How far ahead of this machine's clock the agent stamped its latest publish (< 0: behind)."""
    body = gpunode(cluster)
    updated_at = gpunodes.parse(body, received_at=time.time()).updated_at if body else None
    return None if updated_at is None else updated_at - time.time()


def test_agents_minutes_behind_the_operator_still_count_as_fresh(
    cluster: devcluster.LocalCluster, namespace: str, skewed_agents: SkewedAgents, operator: OperatorProcess
) -> None:
    skewed_agents.start(-SKEW_SECONDS)
    wait_for(
        lambda: (agent_clock_offset(cluster) or 0.0) < 30 - SKEW_SECONDS,
        timeout=60,
        what="publishes 5 min old",
    )

    apply(cluster, namespace, dljob("job-late-clock", "resnet50", 32))

    placed = wait_for(
        lambda: running(cluster, namespace, "job-late-clock"), timeout=60, what="the job placed"
    )
    assert placed["gpus"][0].get("uuid", "").startswith("GPU-")  # the agents' telemetry was used


def test_agents_minutes_ahead_of_the_operator_go_stale_one_ttl_after_they_fall_silent(
    cluster: devcluster.LocalCluster, namespace: str, skewed_agents: SkewedAgents, operator: OperatorProcess
) -> None:
    skewed_agents.start(SKEW_SECONDS)
    wait_for(
        lambda: (agent_clock_offset(cluster) or 0.0) > SKEW_SECONDS - 30,
        timeout=60,
        what="publishes 5 min ahead",
    )
    skewed_agents.stop()
    time.sleep(TTL_SECONDS + 1)  # their last lastUpdate still lies minutes in the future

    apply(cluster, namespace, dljob("job-after-silence", "resnet50", 32))

    assert "GPU unhealthy or its agent silent" in wait_for(
        lambda: queued_message(cluster, namespace, "job-after-silence"), timeout=60, what="the job queued"
    )
    assert running(cluster, namespace, "job-after-silence") is None
