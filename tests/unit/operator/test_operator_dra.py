"""The scheduling loop with DRA binding, against a fake of our own API adapter (`FakeKube`): claims are
created before the pods that reference them, shared by co-tenants, deleted when no pod needs them, and
recomputed from what the API server shows after a restart."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from operator_builders import FakeKube
from test_operator_loop import FixedPredictor, _catalog, _settle
from test_operator_loop import _cluster as cluster

from horus_operator.agent import resourceslice
from horus_operator.agent.fake import FakeInventory
from horus_operator.api import dljob, keys
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.base import Limits
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
NODE = "gpu-node-0"
UUIDS = [FakeInventory(NODE, 2, "", 0).uuid(i) for i in range(2)]


class TwoPerGpu:
    """A stand-in policy: each job on the first GPU with fewer than two jobs."""

    name = "two-per-gpu"

    def __init__(self) -> None:
        self.predictions = CachedPredictions(FixedPredictor())  # what the cycle reads
        self.limits = Limits()

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        tenants = Counter(i for job in snapshot.running for i in job.gpu_indices)
        assignments = []
        for request in queue:
            gpu = next((g for g in (0, 1) if tenants[g] < 2), None)
            if gpu is None:
                break
            tenants[gpu] += 1
            assignments.append(
                Assignment(request.key, NODE, (gpu,), predicted_utilization=0.5, predicted_memory_mib=4000)
            )
        return assignments

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        return "waiting: no free GPU"


def _loop(kube: FakeKube, *, dra_served: bool = True, binding: str = dljob.Binding.DRA) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=TwoPerGpu(),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(binding=binding, dra_served=dra_served),
        clock=lambda: NOW,
    )


def _cluster(jobs: int) -> FakeKube:
    """`jobs` DLJobs and one node of 2 GPUs, which a fake agent published as a ResourceSlice."""
    kube = cluster(jobs=jobs, gpus=2)
    labels = kube.nodes[NODE]["metadata"]["labels"]
    kube.slices = [resourceslice.fake_slice(FakeInventory.from_node_labels(NODE, labels), "uid")]
    return kube


def _claim_of(pod: dict) -> list[str]:
    return [ref["resourceClaimName"] for ref in pod["spec"].get("resourceClaims", [])]


def test_co_tenants_share_one_claim_per_gpu_that_selects_its_uuid() -> None:
    kube = _cluster(jobs=3)
    asyncio.run(_settle(_loop(kube)))

    by_job = {pod["metadata"]["name"]: _claim_of(pod) for pod in kube.pods.values()}
    assert by_job["job-0-0"] == by_job["job-1-0"] != by_job["job-2-0"]
    assert sorted(kube.claims) == sorted(f"team-a/{c[0]}" for c in {tuple(v) for v in by_job.values()})
    shared = kube.claims[f"team-a/{by_job['job-0-0'][0]}"]
    expression = shared["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert expression == f"device.attributes['gpu.nvidia.com'].uuid == \"{UUIDS[0]}\""
    mps = shared["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["mpsConfig"]
    assert mps["defaultActiveThreadPercentage"] == 50  # two tenants of equal predicted utilization
    status = kube.jobs["team-a/job-0"]["status"]
    assert (status["binding"], status["claim"]) == ("dra", by_job["job-0-0"][0])


def test_claims_are_deleted_once_no_pod_holding_their_gpu_references_them() -> None:
    kube = _cluster(jobs=3)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    for pod in kube.pods.values():
        if pod["metadata"]["name"] in ("job-0-0", "job-2-0"):
            pod["status"]["phase"] = "Succeeded"
    asyncio.run(_settle(loop))
    assert len(kube.claims) == 1  # job-1 still runs on the shared GPU
    kube.pods["team-a/job-1-0"]["status"]["phase"] = "Failed"
    kube.jobs["team-a/job-1"]["spec"]["backoffLimit"] = 0
    asyncio.run(_settle(loop))
    assert kube.claims == {}


def test_a_restart_recomputes_the_claims_from_what_the_api_server_shows() -> None:
    kube = _cluster(jobs=2)
    asyncio.run(_settle(_loop(kube)))
    (claim,) = kube.claims
    kube.claims.clear()  # lost (deleted by hand) while its pods run
    # one Horus left behind (its pod's creation crashed), and one that is someone else's
    stale = {"name": "horus-stale", "namespace": "team-a", "labels": {keys.LABEL_MANAGED_BY: "horus"}}
    kube.claims["team-a/horus-stale"] = {"metadata": stale, "spec": {}}
    kube.claims["team-a/theirs"] = {"metadata": {"name": "theirs", "namespace": "team-a"}, "spec": {}}

    asyncio.run(_settle(_loop(kube)))  # a new operator process

    assert sorted(kube.claims) == sorted([claim, "team-a/theirs"])  # recreated, leak gone, theirs kept
    assert kube.creates == 2  # no pod twice


def test_a_config_its_tenants_no_longer_call_for_is_written_beside_the_claim() -> None:
    kube = _cluster(jobs=1)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    (name,) = kube.claims
    alone = json.loads(kube.claims[name]["metadata"]["annotations"][keys.ANNOTATION_SHARING])
    assert alone["mpsConfig"]["defaultActiveThreadPercentage"] == 100
    body = DLJobBuilder.stored("late").obj()
    kube.jobs[job_key(body)] = body

    asyncio.run(_settle(loop))  # the late job joins GPU 0

    assert list(kube.claims) == [name]  # the claim's spec is immutable: the same claim, shared
    annotations = kube.claims[name]["metadata"]["annotations"]
    assert json.loads(annotations[keys.ANNOTATION_SHARING]) == alone
    desired = json.loads(annotations[keys.ANNOTATION_DESIRED_SHARING])
    assert desired["mpsConfig"]["defaultActiveThreadPercentage"] == 50


def test_dra_binding_on_a_cluster_without_resource_k8s_io_fails_the_job_naming_the_field() -> None:
    kube = _cluster(jobs=1)
    asyncio.run(_settle(_loop(kube, dra_served=False, binding=dljob.Binding.ENV)))
    assert kube.jobs["team-a/job-0"]["status"]["phase"] == "Scheduled"  # env: fine
    body = DLJobBuilder.stored("wants-dra").spec(binding="dra").obj()
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop(kube, dra_served=False, binding=dljob.Binding.ENV)))
    status = kube.jobs["team-a/wants-dra"]["status"]
    assert status["phase"] == "Failed"
    assert "spec.binding='dra'" in status["message"] and "resource.k8s.io/v1" in status["message"]


def test_an_env_bound_job_next_to_dra_ones_gets_no_claim() -> None:
    kube = _cluster(jobs=0)
    body = DLJobBuilder.stored("plain").spec(binding="env").obj()
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop(kube)))
    (pod,) = kube.pods.values()
    assert _claim_of(pod) == [] and kube.claims == {}
    assert pod["spec"]["containers"][0]["env"][0]["name"] == "NVIDIA_VISIBLE_DEVICES"


def _condition(kube: FakeKube, job: str) -> tuple[str, str, str]:
    (found,) = (
        c for c in kube.jobs[f"team-a/{job}"]["status"]["conditions"] if c["type"] == "ClaimsAllocated"
    )
    return (found["status"], found["reason"], found["message"])


def test_the_dljob_says_whether_kube_scheduler_allocated_its_claim_and_why_not() -> None:
    kube = _cluster(jobs=1)
    loop = _loop(kube)
    asyncio.run(_settle(loop))
    (name,) = (c["metadata"]["name"] for c in kube.claims.values())
    assert _condition(kube, "job-0") == ("False", "Pending", f"claim {name} not allocated yet")

    kube.pods["team-a/job-0-0"]["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 cannot allocate all claims.",
            "lastTransitionTime": "2026-12-02T10:00:00Z",
        }
    ]
    asyncio.run(_settle(loop))
    assert _condition(kube, "job-0") == (
        "False",
        "Unallocatable",
        f"claim {name}: 0/1 nodes are available: 1 cannot allocate all claims.",
    )

    del kube.pods["team-a/job-0-0"]["status"]["conditions"]
    result = {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "request": "gpu"}
    kube.claims[f"team-a/{name}"]["status"] = {"allocation": {"devices": {"results": [result]}}}
    asyncio.run(_settle(loop))
    assert _condition(kube, "job-0") == ("True", "Allocated", f"kube-scheduler allocated claim {name}")
