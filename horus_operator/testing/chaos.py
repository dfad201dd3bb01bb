"""Fault injection on the local control plane: a burst of DLJobs while the operator, the API server or
etcd die, and what a platform team would check afterwards (`bench/chaos.py`, `tests/e2e/test_chaos.py`).

A scenario submits `jobs` DLJobs in batches every two seconds through `fault_window_s` (a pipeline's
burst: work keeps arriving while the faults hit) and injects its faults at moments drawn from a
seeded RNG inside that window. Node faults hit the node running the most Horus pods at that moment:
deleted (its Node object gone, as a scaled-down cloud node), or failed (`LocalCluster.fail_node`: it
turns NotReady; kwok still finishes its pods on time, so only pods with longer to run than the
operator's NotReady grace show the re-placement); `stranded` counts the live pods they held.
A watcher polls the pods Horus created (kubectl, every `poll_s`) and records:
- duplicated: a job with more than one live pod at the same time (replicas are one pod each here);
- oversubscribed: a GPU whose live pods' predicted memory (their `horus.dev/predicted` annotation)
  exceeds the node's `nvidia.com/gpu.memory`;
- doubled (`reserve` binding, where the fake agents play the device plugin and `horus reserve`): one
  GPU (node and UUID) told to live pods of two different slots at the same time;
and at the end, lost: jobs with no terminal phase (`Succeeded`, `Failed`) by the deadline, and
failover: for each operator death, the seconds until the next pod was created, and (`reserve`) the
reservation pods left 90 s after the last job ended (each no pod holds should go) (from the pods'
creation times, one-second resolution; work arrives every two seconds, so up to that much of it is
waiting for work). `polls` says how many times the watcher saw
the pods (a poll that fails, say while the API server restarts, is skipped and counted apart).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from horus_operator import devcluster
from horus_operator.api import keys, pod_annotations
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import (
    FAST_SETTINGS,
    REPO,
    OperatorProcess,
    lease_holder,
    terminate,
)

TERMINAL = frozenset({"Succeeded", "Failed"})
SUBMIT_EVERY_S = 2.0
# Small jobs several of which share a 16 GiB V100 (the e2e pools' GPUs), so co-location is exercised.
JOB_MIX = (("resnet18", 64), ("lstm-lm", 20), ("transformer", 64), ("a2c", 8), ("resnet50", 16))


@dataclass(frozen=True)
class Scenario:
    name: str
    operator_kills: int = 0
    apiserver_restarts: int = 0
    etcd_restarts: int = 0
    replicas: int = 1  # operators running at once, competing for the Lease
    leader_kills: int = 0  # with replicas > 1: kill whichever replica holds the Lease
    node_deletions: int = 0
    node_failures: int = 0  # nodes turned NotReady for good
    binding: str = "env"  # the operators' --binding; `reserve` runs the fake agents beside them


SCENARIOS = {
    "operator-kills": Scenario("operator-kills", operator_kills=10),
    "control-plane-restarts": Scenario("control-plane-restarts", apiserver_restarts=2, etcd_restarts=1),
    "two-replicas": Scenario("two-replicas", replicas=2, leader_kills=5),
    "node-faults": Scenario("node-faults", node_deletions=2, node_failures=2),
    "reserve-operator-kills": Scenario("reserve-operator-kills", operator_kills=10, binding="reserve"),
}
NODE_FAULTS = ("node-delete", "node-fail")


@dataclass
class Outcome:
    scenario: str
    jobs: int
    lost: int = 0
    duplicated: int = 0
    oversubscribed: int = 0
    failover_s: list[float | None] = field(default_factory=list)  # None: no placement after it
    drain_s: float = 0.0
    faults: list[str] = field(default_factory=list)
    stranded: int = 0  # live pods on nodes when they were deleted or failed
    doubled: int = 0  # `reserve`: GPUs told to live pods of two slots at once
    leftover_reservations: int = 0  # `reserve`: reservation pods left once every job ended
    polls: int = 0
    failed_polls: int = 0

    @property
    def max_failover_s(self) -> float:
        """The longest failover; infinite when a death was followed by no placement at all."""
        return max((float("inf") if s is None else s for s in self.failover_s), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        worst = self.max_failover_s
        return {**asdict(self), "max_failover_s": None if worst == float("inf") else worst}


@dataclass
class _Watch:
    """What the watcher has seen so far (written by its thread, read after it stops)."""

    duplicated_jobs: set[str] = field(default_factory=set)
    oversubscribed_gpus: set[tuple[str, int]] = field(default_factory=set)
    doubled_gpus: set[tuple[str, str]] = field(default_factory=set)  # (node, GPU UUID)
    polls: int = 0
    failed_polls: int = 0
    newest_pod_s: float = 0.0  # epoch s: the latest creation time among the pods seen


def burst(count: int, duration: str) -> list[dict[str, Any]]:
    """`count` DLJobs from JOB_MIX, each running `duration` on its kwok pod."""
    return [
        DLJobBuilder(f"chaos-{index:04d}")
        .model(architecture=JOB_MIX[index % len(JOB_MIX)][0])
        .batch_size(JOB_MIX[index % len(JOB_MIX)][1])
        .runs_for(duration)
        .obj()
        for index in range(count)
    ]


class ChaosRun:
    """One scenario against `cluster` in `namespace`; operators log under `log_dir`."""

    def __init__(
        self,
        cluster: devcluster.LocalCluster,
        namespace: str,
        log_dir: Path,
        *,
        seed: int = 1,
        poll_s: float = 1.0,
        log: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.log_dir = log_dir
        self.rng = random.Random(seed)
        self.poll_s = poll_s
        self.log = log
        self._watch = _Watch()
        self._stop = threading.Event()
        self._generation = 0  # replacement replicas so far
        self.faulted_nodes: dict[str, str] = {}  # node -> "node-delete" or "node-fail", for clean-up

    def run(
        self,
        scenario: Scenario,
        jobs: int,
        *,
        duration: str = "20s",
        fault_window_s: float = 60.0,
        deadline_s: float = 900.0,
    ) -> Outcome:
        outcome = Outcome(scenario.name, jobs)
        self._settings = {**FAST_SETTINGS, "HORUS_BINDING": scenario.binding}
        replicas = [
            OperatorProcess(
                self.cluster,
                self.log_dir / f"{scenario.name}-{index}.log",
                identity=f"chaos-{index}",
                settings=self._settings,
            )
            for index in range(scenario.replicas)
        ]
        agents = self._start_agents() if scenario.binding == "reserve" else None
        for replica in replicas:
            replica.start(wait_for_lease=False)
        watcher = threading.Thread(target=self._watch_pods, daemon=True)
        try:
            self._wait_for_a_leader(replicas)
            watcher.start()
            self.cluster.kubectl("create", "namespace", self.namespace, check=False)
            started = time.monotonic()
            submitter = threading.Thread(
                target=self._submit_over, args=(burst(jobs, duration), fault_window_s), daemon=True
            )
            submitter.start()
            deaths = self._inject(scenario, replicas, started, fault_window_s, outcome)
            submitter.join()
            outcome.drain_s, outcome.lost = self._drain(started, deadline_s, jobs)
            outcome.failover_s = self._failovers(deaths)
            if agents is not None:
                outcome.leftover_reservations = self._reservations_left(within_s=90.0)
        finally:
            self._stop.set()
            if watcher.is_alive():
                watcher.join(timeout=30)
            for replica in replicas:
                replica.stop()
            if agents is not None:
                terminate(agents)
        outcome.doubled = len(self._watch.doubled_gpus)
        outcome.duplicated = len(self._watch.duplicated_jobs)
        outcome.oversubscribed = len(self._watch.oversubscribed_gpus)
        outcome.polls, outcome.failed_polls = self._watch.polls, self._watch.failed_polls
        return outcome

    # ---- faults ----

    def _inject(
        self,
        scenario: Scenario,
        replicas: list[OperatorProcess],
        started: float,
        window: float,
        outcome: Outcome,
    ) -> list[float]:
        """Inject the scenario's faults; returns when (epoch s) each operator died."""
        faults = (
            ["operator"] * scenario.operator_kills
            + ["kube-apiserver"] * scenario.apiserver_restarts
            + ["etcd"] * scenario.etcd_restarts
            + ["leader"] * scenario.leader_kills
            + ["node-delete"] * scenario.node_deletions
            + ["node-fail"] * scenario.node_failures
        )
        # Not in the last batches' seconds: each death must have work arriving after it.
        moments = sorted(self.rng.uniform(1.0, window - 2 * SUBMIT_EVERY_S) for _ in faults)
        self.rng.shuffle(faults)
        deaths: list[float] = []
        for moment, fault in zip(moments, faults, strict=True):
            time.sleep(max(0.0, started + moment - time.monotonic()))
            if fault in ("operator", "leader") and deaths:
                self._wait_for_placement_since(deaths[-1])
            at = time.time()
            if fault == "operator":  # the container restarts: same pod, same identity, its Lease back at once
                replicas[0].kill()
                replicas[0].start(wait_for_lease=False)
            elif fault == "leader":
                self._kill_leader(replicas)
            elif fault in NODE_FAULTS:
                fault = self._fault_node(fault, outcome)
            else:
                self.cluster.restart(fault)
            outcome.faults.append(f"{moment:.1f}s {fault}")
            self.log(f"{moment:6.1f}s  {fault}")
            if fault in ("operator", "leader"):
                deaths.append(at)
        return deaths

    def _fault_node(self, fault: str, outcome: Outcome) -> str:
        """Delete or fail the node with the most live Horus pods; says which, and how many it held."""
        live = [pod for pod in self._get("pods", "-l", keys.LABEL_JOB) if _live(pod)]
        by_node: dict[str, int] = defaultdict(int)
        for pod in live:
            by_node[pod["spec"].get("nodeName") or ""] += 1
        candidates = [
            node["metadata"]["name"]
            for node in self._get("nodes", "-l", devcluster.nodes.FAKE_NODE_LABEL)
            if node["metadata"]["name"] not in self.faulted_nodes
        ]
        node = max(sorted(candidates), key=lambda name: by_node[name])
        if fault == "node-delete":
            self.cluster.kubectl("delete", "node", node, "--wait=false")
        else:
            self.cluster.fail_node(node)
        self.faulted_nodes[node] = fault
        outcome.stranded += by_node[node]
        return f"{fault} {node} ({by_node[node]} live pods)"

    def _kill_leader(self, replicas: list[OperatorProcess]) -> None:
        """SIGKILL the replica holding the Lease; once another replica holds it, the dead one comes back
        as a new pod would: a fresh identity, a standby."""
        holder = lease_holder(self.cluster)
        index = next((i for i, replica in enumerate(replicas) if replica.identity == holder), 0)
        dead = replicas[index]
        dead.kill()
        deadline = time.monotonic() + 120
        while lease_holder(self.cluster) in ("", dead.identity) and time.monotonic() < deadline:
            time.sleep(0.2)
        self._generation += 1
        replicas[index] = OperatorProcess(
            self.cluster, dead.log_path, identity=f"chaos-{index}-{self._generation}", settings=self._settings
        )
        replicas[index].start(wait_for_lease=False)

    def _wait_for_placement_since(self, death: float) -> None:
        """Hold the next operator death until a pod was created after the previous one (bounded): a
        death that lands before the new leader's first placement would fold two failovers into one
        time, the first one's."""
        deadline = time.monotonic() + 60
        while self._watch.newest_pod_s <= death and time.monotonic() < deadline:
            time.sleep(0.2)

    def _wait_for_a_leader(self, replicas: list[OperatorProcess]) -> None:
        deadline = time.monotonic() + 120
        while lease_holder(self.cluster) not in {replica.identity for replica in replicas}:
            if time.monotonic() > deadline:
                raise TimeoutError("no operator replica took the Lease")
            time.sleep(0.5)

    def _failovers(self, deaths: list[float]) -> list[float | None]:
        """For each death, seconds until the first pod created after it; None when none was (a batch
        arrives every SUBMIT_EVERY_S until the window closes, so each death inside it has work
        coming: a failover includes up to that long of waiting for it). Creation
        times are whole seconds: a pod stamped in the death's own second may predate it, so only
        later seconds count (this over-states a failover by less than a second)."""
        created = sorted(
            _epoch(pod["metadata"]["creationTimestamp"]) for pod in self._get("pods", "-l", keys.LABEL_JOB)
        )
        failovers = []
        for at in deaths:
            after = [stamp for stamp in created if stamp > at]
            failovers.append(round(max(0.0, after[0] - at), 1) if after else None)
        return failovers

    # ---- observation ----

    def _submit_over(self, manifests: list[dict[str, Any]], window_s: float) -> None:
        """Submit in equal batches every SUBMIT_EVERY_S through the fault window, as a pipeline or
        a GitOps sync would, so that new work keeps arriving while the faults hit and every operator
        death is followed by a placement to time. A batch refused while the API server
        restarts is sent again."""
        batches = max(1, int(window_s / SUBMIT_EVERY_S))
        for index in range(batches):
            chunk = manifests[index::batches]
            listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": chunk})
            while not self._stop.is_set():
                try:
                    created = self.cluster.kubectl(
                        "apply", "-n", self.namespace, "-f", "-", input=listing, check=False
                    )
                except subprocess.TimeoutExpired:
                    continue
                if created.returncode == 0:
                    break
                time.sleep(1.0)
            self._stop.wait(SUBMIT_EVERY_S)

    def _start_agents(self) -> subprocess.Popen[bytes]:
        """`reserve`: the reservations' namespace as shipped, and the fake agents of every GPU node, which
        report each reservation's GPU as the device plugin and `horus reserve` would (from a watch, at
        once), and publish at the product's default intervals: the load a cluster's agents put on the
        operator, not five times more."""
        for manifest in ("namespace.yaml", "reservation.yaml"):
            self.cluster.kubectl("apply", "-f", str(REPO / "manifests" / manifest))
        argv = [sys.executable, "-c", "from horus_operator.cli import main; main()", "agent", "--backend"]
        argv += ["fake", "--all-nodes", "--metrics-port", "0"]
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        with (self.log_dir / "agents.log").open("ab") as log:
            return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def _reservations_left(self, within_s: float) -> int:
        """Reservation pods left once they have had `within_s` to go (a placement's is kept 60 s)."""
        deadline = time.monotonic() + within_s
        while True:
            found = self.cluster.kubectl(
                "get", "pods", "-n", keys.RESERVATION_NAMESPACE, "-o", "name", check=False
            ).stdout.split()
            if not found or time.monotonic() > deadline:
                if found:  # what each was, for the operator's and the agents' logs to say why it stayed
                    self._describe_left()
                return len(found)
            time.sleep(2.0)

    def _describe_left(self) -> None:
        columns = (
            "NAME:.metadata.name,UID:.metadata.uid,NODE:.spec.nodeName,PHASE:.status.phase,"
            "DELETING:.metadata.deletionTimestamp,CREATED:.metadata.creationTimestamp,"
            f"GPU:.metadata.annotations.{keys.ANNOTATION_RESERVED_GPU.replace('.', chr(92) + '.')}"
        )
        listing = self.cluster.kubectl(
            "get", "pods", "-n", keys.RESERVATION_NAMESPACE, "-o", f"custom-columns={columns}", check=False
        )
        self.log(f"reservation pods left:\n{listing.stdout}")

    def _get(self, *what: str) -> list[dict[str, Any]]:
        """The objects, or [] while the API server does not answer (it may be restarting)."""
        return self._get_or_none(*what) or []

    def _get_or_none(self, *what: str) -> list[dict[str, Any]] | None:
        try:
            found = self.cluster.kubectl("get", "-n", self.namespace, *what, "-o", "json", check=False)
        except subprocess.TimeoutExpired:
            return None
        return json.loads(found.stdout)["items"] if found.returncode == 0 else None

    def _drain(self, started: float, deadline_s: float, jobs: int) -> tuple[float, int]:
        """(seconds until every job is terminal, jobs not terminal at the deadline)."""
        while True:
            phases = [(job.get("status") or {}).get("phase") for job in self._get("dljobs")]
            open_jobs = jobs - sum(phase in TERMINAL for phase in phases)
            if open_jobs == 0 or time.monotonic() - started > deadline_s:
                return round(time.monotonic() - started, 1), open_jobs
            time.sleep(2.0)

    def _watch_pods(self) -> None:
        capacity = {
            node["metadata"]["name"]: float(node["metadata"]["labels"].get(keys.LABEL_GPU_MEMORY, "0"))
            for node in self._get("nodes")  # cluster-scoped: the namespace flag is ignored
        }
        while not self._stop.is_set():
            pods = self._get_or_none("pods", "-l", keys.LABEL_JOB)
            if pods is None:
                self._watch.failed_polls += 1
            else:
                self._observe(pods, capacity)
                self._watch.polls += 1
            self._stop.wait(self.poll_s)

    def _observe(self, pods: list[dict[str, Any]], capacity: dict[str, float]) -> None:
        live_by_job: dict[str, int] = defaultdict(int)
        memory_by_gpu: dict[tuple[str, int], float] = defaultdict(float)
        slots_by_uuid: dict[tuple[str, str], set[int]] = defaultdict(set)
        for pod in pods:
            meta = pod["metadata"]
            self._watch.newest_pod_s = max(self._watch.newest_pod_s, _epoch(meta["creationTimestamp"]))
            if not _live(pod):
                continue
            live_by_job[meta["labels"][keys.LABEL_JOB]] += 1
            annotations = meta.get("annotations") or {}
            demand = pod_annotations.predicted_demand(annotations)
            if demand is None:
                continue
            node = annotations.get(keys.ANNOTATION_NODE, "")
            for gpu in pod_annotations.gpu_indices(annotations):
                memory_by_gpu[(node, gpu)] += demand.memory_mib
            uuids = pod_annotations.split(annotations.get(keys.ANNOTATION_GPU_UUIDS, ""))
            for gpu, uuid in zip(pod_annotations.gpu_indices(annotations), uuids, strict=False):
                slots_by_uuid[(node, uuid)].add(gpu)
        self._watch.duplicated_jobs.update(job for job, count in live_by_job.items() if count > 1)
        self._watch.doubled_gpus.update(gpu for gpu, slots in slots_by_uuid.items() if len(slots) > 1)
        self._watch.oversubscribed_gpus.update(
            gpu for gpu, used in memory_by_gpu.items() if used > capacity.get(gpu[0], float("inf"))
        )


def _live(pod: dict[str, Any]) -> bool:
    """Not being deleted and not ended: it holds (or is about to hold) its GPUs."""
    ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    return not ended and not pod["metadata"].get("deletionTimestamp")


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
