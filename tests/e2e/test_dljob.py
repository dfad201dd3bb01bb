"""DLJobs end to end on the real local control plane: `horus run` as a subprocess, kubectl as the user.

kwok ends pods on the `spec.simulation.duration` the operator copies to them; kube-scheduler binds them to
the node Horus chose; the garbage collector cascades DLJob deletion.
"""

from __future__ import annotations

import gzip
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from dljob_harness import apply, condition, dljobs, horus_pods, only_nodes, predicted_pairs, wait_phases

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

PHASE_ORDER = ["Pending", "Queued", "Scheduled", "Running", "Succeeded"]
HOLDING = {"Pending", "Running"}


def _env(pod: dict[str, Any], name: str) -> str | None:
    for entry in pod["spec"]["containers"][0].get("env", []):
        if entry["name"] == name:
            return entry.get("value")
    return None


def _gpu_env_matches(job: dict[str, Any], pod: dict[str, Any]) -> bool:
    gpus = job["status"]["gpus"]
    expected = (
        ",".join(g["uuid"] for g in gpus) if all("uuid" in g for g in gpus) else job["status"]["gpuList"]
    )
    return _env(pod, "NVIDIA_VISIBLE_DEVICES") == expected


def test_examples_go_queued_to_succeeded_on_the_chosen_gpu(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl("apply", "-n", namespace, "-k", str(REPO / "examples"))
    names = sorted(dljobs(cluster, namespace))
    assert len(names) == 8
    seen: dict[str, list[str]] = defaultdict(list)
    pods_seen: dict[str, dict[str, Any]] = {}
    estimated: dict[str, str] = {}  # estimatedCompletionTime seen while running

    def all_finished() -> bool:
        for name, job in dljobs(cluster, namespace).items():
            status = job.get("status") or {}
            phase = status.get("phase", "Pending")
            if not seen[name] or seen[name][-1] != phase:
                seen[name].append(phase)
            if phase == "Running" and "estimatedCompletionTime" in status:
                estimated[name] = status["estimatedCompletionTime"]
        for pod in horus_pods(cluster, namespace):
            if pod["status"].get("phase") in HOLDING:
                pods_seen[pod["metadata"]["name"]] = pod
        return all(seen[n][-1] == "Succeeded" for n in names)

    wait_for(all_finished, timeout=180, what="the examples to succeed", every=0.5)
    header = cluster.kubectl("get", "dljobs", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "NODE", "GPU", "UTIL", "SLOWDOWN", "CLAIM", "AGE"]
    cluster.kubectl("wait", "--for=condition=Complete", "dljob", "--all", "-n", namespace, "--timeout=10s")

    jobs, pods = (
        dljobs(cluster, namespace),
        {p["metadata"]["labels"]["horus.dev/dljob"]: p for p in horus_pods(cluster, namespace)},
    )
    for name in names:
        job, pod = jobs[name], pods[name]
        phases = seen[name]
        assert phases == sorted(phases, key=PHASE_ORDER.index), f"{name} went {phases}"
        assert "Running" in phases, f"{name} never seen Running: {phases}"
        status = job["status"]
        assert pod["metadata"]["name"] == f"{name}-0"
        assert (
            pod["spec"]["nodeName"] == status["node"] == pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        )
        assert _gpu_env_matches(job, pod), (name, _env(pod, "NVIDIA_VISIBLE_DEVICES"), status["gpuList"])
        assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        for kind in ("Scheduled", "Complete"):
            assert condition(job, kind)["status"] == "True", (name, kind)
        assert status["startTime"] <= status["completionTime"]
        assert 0 < status["predicted"]["utilization"] <= 1 and status["predicted"]["slowdown"] >= 1
    assert len(jobs["two-gpu-vgg16"]["status"]["gpus"]) == 2
    # spec.totalSteps (cnn-resnet50 only): an end estimated from its start while it ran, gone once done.
    assert set(estimated) == {"cnn-resnet50"}
    assert estimated["cnn-resnet50"] > jobs["cnn-resnet50"]["status"]["startTime"]
    assert "estimatedCompletionTime" not in jobs["cnn-resnet50"]["status"]
    # maxSlowdown 1.0: nobody joined it, and it joined nobody.
    assert jobs["exclusive-bert"]["status"]["colocatedWith"] == []
    assert all(f"{namespace}/exclusive-bert" not in jobs[n]["status"]["colocatedWith"] for n in names)


def test_compatible_jobs_share_a_gpu_and_an_incompatible_pair_does_not(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    node = cluster.add_nodes(devcluster.GpuNodePool(count=1, gpus_per_node=1, name_prefix="share-node"))[0]
    compatible, incompatible = predicted_pairs()
    with only_nodes(cluster, [node]):
        first, second = (
            DLJobBuilder(f"fit-{i}").model(architecture=m).batch_size(b).obj()
            for i, (m, b) in enumerate(compatible)
        )
        apply(cluster, namespace, first)
        wait_phases(cluster, namespace, ["fit-0"], {"Scheduled", "Running"}, timeout=60)
        apply(cluster, namespace, second)
        jobs = wait_phases(cluster, namespace, ["fit-1"], {"Scheduled", "Running"}, timeout=60)
        assert jobs["fit-1"]["status"]["node"] == node
        assert jobs["fit-1"]["status"]["colocatedWith"] == [f"{namespace}/fit-0"]
        assert jobs["fit-1"]["status"]["predicted"]["slowdown"] > 1.0
        cluster.kubectl("delete", "dljob", "fit-0", "fit-1", "-n", namespace, "--wait=true")
        wait_for(lambda: not horus_pods(cluster, namespace), timeout=60, what="pods to be collected")

        (model_a, batch_a), (model_b, batch_b), bound = incompatible
        apply(
            cluster,
            namespace,
            DLJobBuilder("clash-0")
            .model(architecture=model_a)
            .batch_size(batch_a)
            .spec(maxSlowdown=bound)
            .obj(),
        )
        wait_phases(cluster, namespace, ["clash-0"], {"Scheduled", "Running"}, timeout=60)
        apply(
            cluster,
            namespace,
            DLJobBuilder("clash-1")
            .model(architecture=model_b)
            .batch_size(batch_b)
            .spec(maxSlowdown=bound)
            .obj(),
        )
        jobs = wait_phases(cluster, namespace, ["clash-1"], {"Queued"}, timeout=60)
        time.sleep(3 * 2)  # several scheduling cycles (resync every 2 s): it must still wait
        jobs = dljobs(cluster, namespace)
        assert jobs["clash-1"]["status"]["phase"] == "Queued"
        assert jobs["clash-1"]["status"]["message"].startswith("waiting")
        assert [p["metadata"]["name"] for p in horus_pods(cluster, namespace)] == ["clash-0-0"]


def test_memory_is_never_oversubscribed_in_a_burst(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    """More memory-hungry jobs than the GPUs can hold (they never finish): Horus places what fits and
    queues the rest; no GPU's predicted memory in use exceeds what its node's labels say it has."""
    models = [("resnet50", 32), ("vgg16", 32), ("mobilenet_v2", 32), ("bert", 4)]
    burst = [
        DLJobBuilder(f"mem-{i}").model(architecture=m).batch_size(b).spec(maxSlowdown=3.0).obj()
        for i, (m, b) in enumerate(models * 10)
    ]
    apply(cluster, namespace, *burst)

    def settled() -> bool:
        statuses = [j.get("status") or {} for j in dljobs(cluster, namespace).values()]
        placed = [s for s in statuses if s.get("phase") in ("Scheduled", "Running")]
        told = [
            s for s in statuses if s.get("phase") == "Queued" and s.get("message", "").startswith("waiting")
        ]
        return len(placed) + len(told) == len(burst) and bool(told)

    wait_for(settled, timeout=120, what="every job placed or told why it waits")
    capacity = {
        n["metadata"]["name"]: int(n["metadata"]["labels"]["nvidia.com/gpu.memory"])
        for n in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    in_use: dict[tuple[str, str], float] = defaultdict(float)
    for pod in horus_pods(cluster, namespace):
        annotations = pod["metadata"]["annotations"]
        memory = json.loads(annotations["horus.dev/predicted"])["memoryMiB"]
        for gpu in annotations["horus.dev/gpus"].split(","):
            in_use[(annotations["horus.dev/node"], gpu)] += memory
    assert any(used > 0 for used in in_use.values())
    over = {key: used for key, used in in_use.items() if used > capacity[key[0]]}
    assert over == {}, f"oversubscribed GPUs (MiB in use): {over}"


def test_a_restart_mid_burst_leaves_exactly_one_pod_per_job(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    """The operator is killed (SIGKILL) while it places a 50-job burst and started again."""
    cluster.add_nodes(devcluster.GpuNodePool(count=12, gpus_per_node=4, name_prefix="burst-node"))
    burst = [
        DLJobBuilder(f"burst-{i}").model(architecture="resnet18").batch_size(64).obj() for i in range(50)
    ]
    apply(cluster, namespace, *burst)
    wait_for(
        lambda: len(horus_pods(cluster, namespace)) >= 10, timeout=60, what="the burst to start", every=0.1
    )
    horus.kill()
    horus.start()
    names = [j["metadata"]["name"] for j in burst]
    wait_phases(cluster, namespace, names, {"Scheduled", "Running"}, timeout=120)
    pods_by_job: dict[str, list[str]] = defaultdict(list)
    for pod in horus_pods(cluster, namespace):
        pods_by_job[pod["metadata"]["labels"]["horus.dev/dljob"]].append(pod["metadata"]["name"])
    assert {job: pods for job, pods in pods_by_job.items() if pods != [f"{job}-0"]} == {}
    assert sorted(pods_by_job) == sorted(names)


def test_bad_input_fails_with_the_field_named_and_never_blocks_the_queue(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl(
        "create", "configmap", "garbage", "-n", namespace, "--from-literal=model.onnx=this is not protobuf"
    )
    cases = {
        "unknown-model": (
            DLJobBuilder("unknown-model").model(architecture="nosuchnet").runs_for("3s").obj(),
            "InvalidSpec",
            "spec.model.architecture='nosuchnet'",
        ),
        "bad-onnx": (
            DLJobBuilder("bad-onnx").model(onnx={"configMap": "garbage"}).runs_for("3s").obj(),
            "InvalidSpec",
            "spec.model.onnx",
        ),
        "no-onnx": (
            DLJobBuilder("no-onnx").model(onnx={"configMap": "absent"}).runs_for("3s").obj(),
            "InvalidSpec",
            "not found",
        ),
        "too-much-memory": (
            DLJobBuilder("too-much-memory")
            .model(architecture="vgg16")
            .batch_size(65536)
            .runs_for("3s")
            .obj(),
            "Unsatisfiable",
            "spec.batchSize=65536",
        ),
    }
    apply(cluster, namespace, *(body for body, _, _ in cases.values()), DLJobBuilder("good").obj())
    jobs = wait_phases(cluster, namespace, list(cases), {"Failed"}, timeout=90)
    wait_phases(cluster, namespace, ["good"], {"Scheduled", "Running"}, timeout=60)
    for name, (_, reason, text) in cases.items():
        failed = condition(jobs[name], "Failed")
        assert (jobs[name]["status"]["phase"], failed.get("reason")) == ("Failed", reason), (
            name,
            jobs[name]["status"],
        )
        assert text in failed["message"], (name, failed["message"])
    assert {p["metadata"]["labels"]["horus.dev/dljob"] for p in horus_pods(cluster, namespace)} == {"good"}


def test_more_gpus_than_any_node_has_fails(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    counts = {
        n["metadata"]["name"]: int(n["metadata"]["labels"]["nvidia.com/gpu.count"])
        for n in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    if max(counts.values()) >= 8:
        big = [name for name, count in counts.items() if count >= 8]
        pytest.skip(f"{big} have 8 GPUs, the most spec.gpus allows; covered by unit tests")
    apply(cluster, namespace, DLJobBuilder("wide").runs_for("3s").spec(gpus=8).obj())
    jobs = wait_phases(cluster, namespace, ["wide"], {"Failed"}, timeout=60)
    assert "spec.gpus=8" in condition(jobs["wide"], "Failed")["message"]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"resources": {"limits": {"nvidia.com/gpu": "1"}}}, "GPU resource"),
        ({"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}, "NVIDIA_VISIBLE_DEVICES"),
        ({"env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}, "CUDA_VISIBLE_DEVICES"),
    ],
)
def test_the_schema_refuses_gpu_requests_and_gpu_env_in_the_template(
    cluster: devcluster.LocalCluster,
    horus: OperatorProcess,
    namespace: str,
    change: dict[str, Any],
    refusal: str,
) -> None:
    body = DLJobBuilder("refused").runs_for("3s").obj()
    body["spec"]["template"]["spec"]["containers"][0].update(change)
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body), check=False)
    assert result.returncode != 0 and refusal in result.stderr, result.stderr


def test_the_schema_wants_exactly_one_model_source(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    body = (
        DLJobBuilder("two-models")
        .model(architecture="resnet50", features={"flops": 1.0})
        .runs_for("3s")
        .obj()
    )
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body), check=False)
    assert result.returncode != 0 and "exactly one of spec.model" in result.stderr, result.stderr


def test_failed_pods_are_retried_up_to_the_backoff_limit(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    body = DLJobBuilder("flaky").runs_for("1s").spec(backoffLimit=1).obj()
    body["spec"]["simulation"]["fail"] = True
    apply(cluster, namespace, body)
    jobs = wait_phases(cluster, namespace, ["flaky"], {"Failed"}, timeout=90)
    assert condition(jobs["flaky"], "Failed")["reason"] == "BackoffLimitExceeded"
    assert sorted(p["metadata"]["name"] for p in horus_pods(cluster, namespace)) == ["flaky-0", "flaky-1"]


def test_reapplying_changes_nothing_and_deleting_removes_the_pod(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "job.json"
    manifest.write_text(json.dumps(DLJobBuilder("steady").obj()))
    cluster.kubectl("apply", "-n", namespace, "-f", str(manifest))
    jobs = wait_phases(cluster, namespace, ["steady"], {"Running"}, timeout=60)
    before = jobs["steady"]["metadata"]
    again = cluster.kubectl("apply", "-n", namespace, "-f", str(manifest)).stdout
    assert "unchanged" in again
    after = dljobs(cluster, namespace)["steady"]["metadata"]
    assert (after["generation"], after["resourceVersion"]) == (
        before["generation"],
        before["resourceVersion"],
    )
    assert len(horus_pods(cluster, namespace)) == 1
    cluster.kubectl("delete", "dljob", "steady", "-n", namespace)
    wait_for(
        lambda: not horus_pods(cluster, namespace), timeout=60, what="the garbage collector to delete the pod"
    )


def test_a_pod_whose_node_vanished_is_placed_again(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    doomed = cluster.add_nodes(devcluster.GpuNodePool(count=1, gpus_per_node=1, name_prefix="doomed-node"))[0]
    with only_nodes(cluster, [doomed]):
        apply(cluster, namespace, DLJobBuilder("survivor").obj())
        jobs = wait_phases(cluster, namespace, ["survivor"], {"Scheduled", "Running"}, timeout=60)
        assert jobs["survivor"]["status"]["node"] == doomed
    cluster.kubectl("delete", "node", doomed)

    def moved() -> bool:
        status = dljobs(cluster, namespace)["survivor"].get("status") or {}
        return status.get("phase") in ("Scheduled", "Running") and status.get("node") not in (None, doomed)

    wait_for(moved, timeout=90, what="the job to be placed on another node")

    def only_the_new_pod() -> bool:
        return sorted(p["metadata"]["name"] for p in horus_pods(cluster, namespace)) == ["survivor-1"]

    wait_for(only_the_new_pod, timeout=30, what="the stranded pod survivor-0 to be removed")


def test_a_model_from_an_onnx_configmap_gets_features_and_is_placed(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    """A user's graph in a ConfigMap (binaryData): the operator profiles it and places the job like the
    catalog entry exported from the same graph (horus_operator/prediction/data/graphs/pointnet.onnx.gz)."""
    graph = tmp_path / "model.onnx"
    shipped = REPO / "horus_operator/prediction/data/graphs/pointnet.onnx.gz"
    graph.write_bytes(gzip.decompress(shipped.read_bytes()))
    source = f"--from-file=model.onnx={graph}"
    cluster.kubectl("create", "configmap", "pointnet-graph", "-n", namespace, source)
    apply(
        cluster,
        namespace,
        DLJobBuilder("from-onnx").model(onnx={"configMap": "pointnet-graph"}).runs_for("3s").obj(),
        DLJobBuilder("from-catalog").model(architecture="pointnet").runs_for("3s").obj(),
    )
    jobs = wait_phases(cluster, namespace, ["from-onnx", "from-catalog"], {"Succeeded"}, timeout=120)
    onnx_job, catalog_job = jobs["from-onnx"]["status"], jobs["from-catalog"]["status"]
    assert condition(jobs["from-onnx"], "Complete")["status"] == "True"
    assert onnx_job["node"] and onnx_job["gpus"]
    assert 0 < onnx_job["predicted"]["utilization"] <= 1
    pods = {p["metadata"]["labels"]["horus.dev/dljob"]: p for p in horus_pods(cluster, namespace)}
    assert pods["from-onnx"]["spec"]["nodeName"] == onnx_job["node"]
    nodes = {
        item["metadata"]["name"]: item
        for item in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    products = {
        nodes[job["node"]]["metadata"]["labels"].get("nvidia.com/gpu.product")
        for job in (onnx_job, catalog_job)
    }
    if len(products) == 1:  # same GPU type: the same features predict the same utilization
        assert onnx_job["predicted"]["utilization"] == pytest.approx(catalog_job["predicted"]["utilization"])


# The Hugging Face config the catalog's llama-160m graph was exported from (its `source`).
LLAMA_160M = json.loads((REPO / "examples" / "huggingface" / "llama-160m.json").read_text())


def test_a_model_from_a_hugging_face_config_in_a_configmap_is_counted_and_placed(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    """A transformer described by its config.json (no graph): counted as the graph exported from the
    same config is profiled, so it is predicted as the catalog entry (its loss's memory added) and
    placed; a config the operator cannot count fails with the field named."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_160M))
    cluster.kubectl(
        "create", "configmap", "llama-config", "-n", namespace, f"--from-file=config.json={config}"
    )
    # Eager attention, as the catalog's graph was exported (SDPA, the default, stores no T x T scores).
    described = {"configMap": "llama-config", "sequenceLength": 2048, "attention": "eager"}
    apply(
        cluster,
        namespace,
        DLJobBuilder("from-config").model(huggingface=described).batch_size(1).runs_for("3s").obj(),
        DLJobBuilder("from-catalog").model(architecture="llama-160m").batch_size(1).runs_for("3s").obj(),
        DLJobBuilder("lora-inline")
        .model(huggingface={"config": LLAMA_160M, "sequenceLength": 2048, "lora": {"rank": 8}})
        .batch_size(1)
        .runs_for("3s")
        .obj(),
        DLJobBuilder("not-counted")
        .model(huggingface={"config": {**LLAMA_160M, "model_type": "t5"}, "sequenceLength": 512})
        .runs_for("3s")
        .obj(),
    )
    names = ["from-config", "from-catalog", "lora-inline"]
    jobs = wait_phases(cluster, namespace, names, {"Succeeded"}, timeout=120)
    statuses = {name: jobs[name]["status"] for name in names}
    assert all(condition(jobs[name], "Complete")["status"] == "True" for name in names)
    pods = {p["metadata"]["labels"]["horus.dev/dljob"]: p for p in horus_pods(cluster, namespace)}
    assert pods["from-config"]["spec"]["nodeName"] == statuses["from-config"]["node"]
    counted, listed, lora = (statuses[name]["predicted"] for name in names)
    assert lora["memoryMiB"] < counted["memoryMiB"]  # adapters only: no gradients or Adam state for the base
    nodes = {
        item["metadata"]["name"]: item["metadata"]["labels"].get("nvidia.com/gpu.product")
        for item in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    # the same graph, and the loss over the vocabulary that no forward graph holds (FP32 logits, log-softmax)
    assert counted["memoryMiB"] > listed["memoryMiB"]
    if nodes[statuses["from-config"]["node"]] == nodes[statuses["from-catalog"]["node"]]:
        assert counted["utilization"] == pytest.approx(listed["utilization"])
    failed = wait_phases(cluster, namespace, ["not-counted"], {"Failed"}, timeout=60)["not-counted"]
    assert condition(failed, "Failed")["reason"] == "InvalidSpec"
    assert "spec.model.huggingface.config.model_type='t5'" in condition(failed, "Failed")["message"]


def test_a_catalog_model_at_its_training_input_shape_is_counted_again_and_placed(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    """VGG-16 on CIFAR-10's 32×32 images: predicted at that shape (status says which), a fraction of the
    ImageNet graph's memory; a shape its five max pools cannot take fails with the field named."""
    apply(
        cluster,
        namespace,
        DLJobBuilder("cifar")
        .model(architecture="vgg16", inputShape=[3, 32, 32])
        .batch_size(128)
        .runs_for("3s")
        .obj(),
        DLJobBuilder("imagenet").model(architecture="vgg16").batch_size(128).runs_for("3s").obj(),
        DLJobBuilder("too-small").model(architecture="vgg16", inputShape=[3, 16, 16]).runs_for("3s").obj(),
    )
    jobs = wait_phases(cluster, namespace, ["cifar", "imagenet"], {"Succeeded"}, timeout=120)
    cifar, imagenet = jobs["cifar"]["status"]["predicted"], jobs["imagenet"]["status"]["predicted"]
    assert cifar["inputShape"] == [3, 32, 32] and "inputShape" not in imagenet
    assert cifar["memoryMiB"] < imagenet["memoryMiB"] / 3
    failed = wait_phases(cluster, namespace, ["too-small"], {"Failed"}, timeout=60)["too-small"]
    assert condition(failed, "Failed")["reason"] == "InvalidSpec"
    assert "spec.model.inputShape=[3, 16, 16]: vgg16 cannot take it" in condition(failed, "Failed")["message"]
