"""A DLJob's pod dies of CUDA OOM beside a co-tenant, on the real local control plane (docs/operator.md,
"Out of memory"): kwok fails the pod with the framework's words as its termination message (the stage's
`pod-fail.stage.kwok.x-k8s.io/message`, as FallbackToLogsOnError would give a log tail); the operator
forgives it once, and the job runs next alone with its memory raised while the co-tenant stays."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dljob_harness import apply, condition, dljobs, get_json, horus_pods, only_nodes, predicted_pairs

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.placement import oom
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

FAIL_MESSAGE = "pod-fail.stage.kwok.x-k8s.io/message"  # hack/kwok/bare-pod-stages.yaml
OOM_TAIL = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 15.77 GiB of which 1.19 GiB is free."
)
GPU_MEMORY_MIB = 16384  # the node's one V100


def _pod(cluster: devcluster.LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    return get_json(cluster, namespace, "pod", name)


def _annotations(pod: dict[str, Any]) -> dict[str, str]:
    return pod["metadata"]["annotations"]


def test_a_pod_dead_of_oom_beside_a_co_tenant_is_retried_alone_with_its_memory_raised(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    node = cluster.add_nodes(devcluster.GpuNodePool(count=1, gpus_per_node=1, name_prefix="oom-node"))[0]
    (model_a, batch_a), (model_b, batch_b) = predicted_pairs()[0]
    with only_nodes(cluster, [node]):
        # backoffLimit 0: a failure that counted would fail the job at once
        apply(
            cluster,
            namespace,
            DLJobBuilder("grows").model(architecture=model_a).batch_size(batch_a).spec(backoffLimit=0).obj(),
        )
        wait_for(lambda: _running(cluster, namespace, "grows-0"), timeout=60, what="grows-0 to run")
        apply(cluster, namespace, DLJobBuilder("stays").model(architecture=model_b).batch_size(batch_b).obj())
        wait_for(lambda: _running(cluster, namespace, "stays-0"), timeout=60, what="stays-0 to run beside it")
        assert (
            _annotations(_pod(cluster, namespace, "stays-0"))[keys.ANNOTATION_COLOCATED]
            == f"{namespace}/grows"
        )

        first = _pod(cluster, namespace, "grows-0")
        assert first["spec"]["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
        predicted = json.loads(_annotations(first)[keys.ANNOTATION_PREDICTED])["memoryMiB"]
        raised = oom.raised_memory_mib(predicted, capacity_mib=GPU_MEMORY_MIB)
        cluster.kubectl(
            "annotate",
            "pod",
            "-n",
            namespace,
            "grows-0",
            f"{keys.KWOK_FAIL_DELAY}=1s",
            f"{FAIL_MESSAGE}={OOM_TAIL}",
        )

        # Forgiven, and waiting alone for the GPU its co-tenant still holds
        job = wait_for(
            lambda: _recovered(cluster, namespace), timeout=60, what="the OOM recorded in grows' status"
        )
        dead = _pod(cluster, namespace, "grows-0")
        terminated = dead["status"]["containerStatuses"][0]["state"]["terminated"]
        assert dead["status"]["phase"] == "Failed" and "CUDA out of memory" in terminated["message"]
        status = job["status"]
        assert status["phase"] == "Queued", status["message"]
        assert status["oomRecovery"] == {
            "pod": "grows-0",
            "beside": [f"{namespace}/stays"],
            "signature": "torch.OutOfMemoryError",
            "memoryMiB": raised,
            "at": status["oomRecovery"]["at"],
        }
        raised_condition = condition(job, "MemoryRaised")
        assert (raised_condition["status"], raised_condition["reason"]) == ("True", "OutOfMemory")
        assert condition(job, "Scheduled")["reason"] == "OutOfMemory"
        events = get_json(cluster, namespace, "events", "--field-selector", "reason=OutOfMemory")["items"]
        assert [e["involvedObject"]["name"] for e in events] == ["grows"]
        assert sorted(p["metadata"]["name"] for p in horus_pods(cluster, namespace)) == ["grows-0", "stays-0"]

        # The co-tenant ends on its own; the job then runs on the GPU alone, with the raised memory
        cluster.kubectl("annotate", "pod", "-n", namespace, "stays-0", f"{keys.KWOK_COMPLETE_DELAY}=1s")
        wait_for(lambda: _running(cluster, namespace, "grows-1"), timeout=60, what="grows-1 to run alone")
        retry = _annotations(_pod(cluster, namespace, "grows-1"))
        request = json.loads(retry[keys.ANNOTATION_REQUEST])
        assert (request["maxSlowdown"], request["peakMemoryMiB"]) == (1.0, raised)
        assert json.loads(retry[keys.ANNOTATION_PREDICTED])["memoryMiB"] == raised
        jobs = wait_for(
            lambda: _phases(cluster, namespace, {"grows": "Running", "stays": "Succeeded"}),
            timeout=60,
            what="grows Running, stays Succeeded",
        )
        grows, stays = jobs["grows"]["status"], jobs["stays"]["status"]
        assert (grows["node"], grows["colocatedWith"], grows["oomRecoveries"]) == (node, [], 1)
        assert grows["predicted"]["memoryMiB"] == raised and grows["attempts"] == 2
        # the co-tenant was never moved: one pod, where it was placed
        assert (stays["node"], stays["gpuList"], stays["attempts"]) == (node, "0", 1)
        pods = sorted(p["metadata"]["name"] for p in horus_pods(cluster, namespace))
        assert pods == ["grows-0", "grows-1", "stays-0"]


def _running(cluster: devcluster.LocalCluster, namespace: str, name: str) -> bool:
    found = cluster.kubectl(
        "get", "pod", "-n", namespace, name, "-o", "jsonpath={.status.phase}", check=False
    )
    return found.stdout == "Running"


def _recovered(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, Any] | None:
    job = dljobs(cluster, namespace).get("grows") or {}
    return job if (job.get("status") or {}).get("oomRecoveries") == 1 else None


def _phases(
    cluster: devcluster.LocalCluster, namespace: str, wanted: dict[str, str]
) -> dict[str, dict[str, Any]] | None:
    jobs = dljobs(cluster, namespace)
    reached = all(
        (jobs.get(name, {}).get("status") or {}).get("phase") == phase for name, phase in wanted.items()
    )
    return jobs if reached else None
