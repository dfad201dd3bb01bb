"""JobSet's own controller, and Kubeflow Trainer's through it, with Horus on the real local control
plane: JobSet's manager (jobset_harness.py, built from its Go module, its JobSet webhooks registered)
makes a JobSet's Jobs, the control plane's Job controller makes their pods, Horus's pod webhook gates
them and its scheduling cycle (podroute_harness.py) places them as one gang; kube-scheduler binds; kwok
ends them.

What it shows, with examples/pod-route/jobset.yaml (2 replicated Jobs × 2 pods, `horus.dev/group-size:
"4"`): the pods JobSet's Jobs make carry its label `jobset.sigs.k8s.io/jobset-name` and are one gang
by it. One pod is held back at admission (a ValidatingAdmissionPolicy refusing the second Job's index
1, as a controller slow to make a pod would be): the other 3 are gated and told "3 of 4 pods of gang
JobSet … seen", and none is released while the fourth is missing. The hold lifted, the Job controller
makes the fourth; all 4 are released, each on a GPU Horus chose, bound there by kube-scheduler,
completed by kwok, and JobSet marks the JobSet Completed.

Then a TrainJob (Trainer v2, its manager built and run the same way) of a TrainingRuntime whose pod
template carries Horus's label and annotations: Trainer makes it into a JobSet, JobSet into a Job of 4
pods, and Horus places them as one gang; they complete and Trainer marks the TrainJob Complete.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import podroute_harness as harness
import pytest
import yaml
from jobset_harness import NAME_LABEL, TRAINER_API, JobSetManager, TrainerManager, install_crds
from podroute_harness import GATE

from horus_operator import devcluster
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "pod-route" / "jobset.yaml"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(scope="module")
def jobset(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JobSetManager]:
    install_crds(cluster, "jobset", "jobsets.jobset.x-k8s.io")
    manager = JobSetManager(cluster, tmp_path_factory.mktemp("jobset"))
    manager.start()
    try:
        yield manager
    finally:
        manager.stop()


@pytest.fixture(scope="module")
def webhook_operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with harness.serving_webhook(cluster, tmp_path_factory.mktemp("pod-route"), "e2e-jobset") as operator:
        yield operator


def held_pod(job: str, index: str) -> dict[str, Any]:
    """A pod as Job `job`'s controller makes its pod of completion index `index` (for a dry run)."""
    return harness.pod("held", labels={"job-name": job, COMPLETION_INDEX: index})


@contextlib.contextmanager
def hold_back(cluster: devcluster.LocalCluster, namespace: str, job: str, index: str) -> Iterator[None]:
    """For the duration, the API server refuses Job `job`'s pod of completion index `index` in
    `namespace` (a ValidatingAdmissionPolicy and its binding); the Job controller retries it, with
    backoff, until it is let through."""
    name = f"hold-{namespace}"
    labels = "object.metadata.labels"
    refuses = (
        f"has({labels}) && '{COMPLETION_INDEX}' in {labels} && 'job-name' in {labels}"
        f" && {labels}['job-name'] == '{job}' && {labels}['{COMPLETION_INDEX}'] == '{index}'"
    )
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [{"expression": f"!({refuses})", "message": "held back by the test"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    objects = json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]})
    cluster.kubectl("apply", "-f", "-", input=objects)
    try:

        def refused() -> bool:  # the API server's policies are read from an informer: poll until on
            dry = harness.create(cluster, namespace, held_pod(job, index), check=False, dry=True)
            return "held back by the test" in dry.stderr

        wait_for(refused, timeout=30, what="the hold in force")
        yield
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input=objects)


def example_jobset(duration: str) -> dict[str, Any]:
    """The example's JobSet, its pods ended by kwok `duration` after they run."""
    jobset = yaml.safe_load(EXAMPLE.read_text())
    for replicated in jobset["spec"]["replicatedJobs"]:
        annotations = replicated["template"]["spec"]["template"]["metadata"]["annotations"]
        annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = duration
    return jobset


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def get(cluster: devcluster.LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)


def test_a_jobsets_pods_made_by_its_controller_are_placed_as_one_gang_once_all_are_seen(
    cluster: devcluster.LocalCluster, jobset: JobSetManager, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    created = example_jobset("5s")
    name = created["metadata"]["name"]
    replicated = created["spec"]["replicatedJobs"][0]["name"]
    gang = f"JobSet {namespace}/{name}"
    selector = f"{NAME_LABEL}={name}"

    with hold_back(cluster, namespace, f"{name}-{replicated}-1", "1"):
        harness.create(cluster, namespace, created)

        def three_told_why() -> list[dict[str, Any]] | None:
            found = harness.pods(cluster, namespace, "-l", selector)
            told = [
                p
                for p in found
                if f"3 of 4 pods of gang {gang} seen" in condition(p, "horus.dev/Placed").get("message", "")
            ]
            return found if len(found) == 3 and len(told) == 3 else None

        waiting = wait_for(three_told_why, timeout=90, what="3 pods of the JobSet told they wait for the 4th")
        for pod in waiting:
            assert harness.gates(pod) == [GATE], "gated by Horus's webhook at creation"
            assert not harness.released(pod), "part of the gang was released"
            (owner,) = pod["metadata"]["ownerReferences"]
            assert owner["kind"] == "Job" and owner["name"].startswith(f"{name}-{replicated}-")
        jobs = json.loads(
            cluster.kubectl("get", "jobs", "-n", namespace, "-l", selector, "-o", "json").stdout
        )
        assert sorted(j["metadata"]["name"] for j in jobs["items"]) == [
            f"{name}-{replicated}-{i}" for i in (0, 1)
        ]
        for job in jobs["items"]:
            (owner,) = job["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"]) == ("JobSet", name), "made by JobSet's controller"

        def refused_told() -> bool:
            events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
            return any(
                e["reason"] == "FailedCreate" and "held back by the test" in e["message"]
                for e in events["items"]
            )

        wait_for(refused_told, timeout=30, what="the Job controller told the fourth pod was refused")

    def all_released() -> list[dict[str, Any]] | None:
        found = harness.pods(cluster, namespace, "-l", selector)
        ok = len(found) == 4 and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
        return found if ok else None

    pods = wait_for(all_released, timeout=120, what="the JobSet's 4 pods released together and bound")
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        assert pod["spec"]["nodeName"] == annotations["horus.dev/node"], "bound where Horus chose"
        assert harness.gates(pod) == []
        (env,) = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
        assert (
            env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['horus.dev/visible-devices']"
        )
        assert annotations["horus.dev/visible-devices"] == annotations["horus.dev/gpus"]

    def completed() -> dict[str, Any] | None:
        found = get(cluster, namespace, "jobset", name)
        return found if condition(found, "Completed").get("status") == "True" else None

    done = wait_for(completed, timeout=90, what="JobSet's controller to mark the JobSet Completed")
    assert condition(done, "Failed").get("status") != "True", done["status"]
    statuses = {s["name"]: s for s in done["status"]["replicatedJobsStatus"]}
    assert statuses[replicated]["succeeded"] == 2, statuses


@pytest.fixture(scope="module")
def trainer(
    cluster: devcluster.LocalCluster, jobset: JobSetManager, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrainerManager]:
    names = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
    install_crds(cluster, "trainer", *(f"{name}.trainer.kubeflow.org" for name in names))
    manager = TrainerManager(cluster, tmp_path_factory.mktemp("trainer"))
    manager.start()
    try:
        yield manager
    finally:
        manager.stop()


def horus_runtime(name: str, nodes: int, duration: str) -> dict[str, Any]:
    """A TrainingRuntime as a platform team would write it for Horus: one replicated Job of `nodes`
    pods (Trainer's plain policy: no framework's launcher), its pod template opted in, naming its model
    and its gang's size; kwok ends the pods `duration` after they run."""
    pod = {
        "metadata": {
            "labels": {"horus.dev/managed": "true"},
            "annotations": {
                "horus.dev/model": "bert",
                "horus.dev/batch-size": "16",
                "horus.dev/group-size": str(nodes),
                "pod-complete.stage.kwok.x-k8s.io/delay": duration,
            },
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "trainer:1"}]},
    }
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": pod},
        },
    }
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": nodes}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


@contextlib.contextmanager
def training_runtime(
    cluster: devcluster.LocalCluster, namespace: str, runtime: dict[str, Any]
) -> Iterator[str]:
    """`runtime` created in `namespace`; at the end its TrainJobs and then it deleted, while Trainer runs
    (it lifts the finalizer it puts on a runtime in use once no TrainJob uses it)."""
    harness.create(cluster, namespace, runtime)
    try:
        yield runtime["metadata"]["name"]
    finally:
        cluster.kubectl("delete", "trainjobs", "--all", "-n", namespace, "--timeout=60s", check=False)
        cluster.kubectl("delete", "trainingruntimes", "--all", "-n", namespace, "--timeout=60s", check=False)


def test_a_trainjobs_pods_made_through_its_jobset_are_placed_as_one_gang_and_complete(
    cluster: devcluster.LocalCluster,
    trainer: TrainerManager,
    webhook_operator: OperatorProcess,
    namespace: str,
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    with training_runtime(cluster, namespace, horus_runtime("horus-plain", 4, "5s")) as name:
        runtime = {"name": name, "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"}
        train = {
            "apiVersion": TRAINER_API,
            "kind": "TrainJob",
            "metadata": {"name": "tune"},
            "spec": {"runtimeRef": runtime},
        }
        harness.create(cluster, namespace, train)

        def all_released() -> list[dict[str, Any]] | None:
            found = harness.pods(cluster, namespace, "-l", f"{NAME_LABEL}=tune")
            ok = len(found) == 4 and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
            return found if ok else None

        pods = wait_for(all_released, timeout=120, what="the TrainJob's 4 pods released together and bound")
        for pod in pods:
            assert pod["spec"]["nodeName"] == pod["metadata"]["annotations"]["horus.dev/node"]
        (owner,) = get(cluster, namespace, "jobset", "tune")["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("TrainJob", "tune"), "the JobSet is Trainer's"

        def complete() -> dict[str, Any] | None:
            found = get(cluster, namespace, "trainjob", "tune")
            return found if condition(found, "Complete").get("status") == "True" else None

        wait_for(complete, timeout=90, what="Trainer to mark the TrainJob Complete")
