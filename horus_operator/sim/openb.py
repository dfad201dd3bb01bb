"""Alibaba's GPU-sharing trace (openb) replayed as FGD's simulator replays it, through Horus's policies.

FGD (Weng et al., "Beware of Fragmentation", USENIX ATC 2023; hkust-adsl/kubernetes-scheduler-simulator)
schedules a trace's pods one at a time on a fixed cluster and never ends one. Its protocol, read from
`pkg/simulator/simulator.go` and `experiments/analysis/merge_alloc_discrete.py` there:
- the pod list is *tuned* to 130 % of the cluster's GPU capacity: with its seed, random pods are removed
  while the requested GPU thousandths exceed it, or random copies of the trace's pods added until the
  next would; then the pods are sorted by name and shuffled (the same random stream);
- each pod, in that order, is placed or fails for good (no retries, no departures);
- after each pod the allocation ratio is the GPU thousandths allocated over the cluster's GPUs, and the
  requested ratio the thousandths of every pod so far, placed or not; the allocation ratio at X %
  requested is the mean of those after pods whose requested ratio rounds to X (±1 where none does).

Here Go's random stream is Python's (`random.Random(seed)`), so the seeds draw other pods than FGD's.
A pod is a `JobRequest` that states its share (`gpu_milli`: 1000 for whole GPUs, which also ask
maxSlowdown 1.0). Its CPU, memory and GPU-model constraint (`gpu_spec`) reach the policy one of two
ways (`Replay(hosts=...)`):
- stated (`JobRequest.cpu_milli`, `host_memory_mib`, `gpu_products`, with each node's CPU and memory
  left in `ClusterSnapshot.hosts`): the policy filters on them and may score them (horus's node-level
  fragmentation, `placement/nodefrag.py`); pods that ask no GPU go where they add least to that
  measure (`nodefrag.least_costly_host`);
- not stated: each pod avoids (`avoid_nodes`) the nodes without the CPU and memory it asks or of
  another GPU model, and pods that ask no GPU take CPU and memory only, on the node with the least GPU
  left free (a CPU pod there strands no GPU), then the least CPU free.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from horus_operator.api import defaults
from horus_operator.placement.base import WHOLE_GPU_MILLI
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.nodefrag import NodeMix, NodeStates, least_costly_host
from horus_operator.placement.types import (
    ClusterSnapshot,
    Gpu,
    HostRoom,
    JobRequest,
    Node,
    Policy,
    RunningJob,
)
from horus_operator.prediction.api import JobPrediction, Workload

TUNE_RATIO = 1.3  # FGD's experiments request 130 % of the cluster's GPUs
STATED_MODEL = "openb-stated-share"  # the workload of every pod: its batch size is its stated share


@dataclass(frozen=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class OpenbPod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_milli: int  # thousandths of each of its GPUs (1000 for whole ones)
    gpu_spec: frozenset[str]  # GPU models it may run on; empty: any

    @property
    def requested_milli(self) -> int:
        """GPU thousandths it asks in all (FGD's `TotalMilliGpu`)."""
        return self.gpus * self.gpu_milli


def read_nodes(path: Path) -> list[OpenbNode]:
    """FGD's node list (`sn,cpu_milli,memory_mib,gpu,model`)."""
    with path.open(newline="") as handle:
        return [
            OpenbNode(row["sn"], int(row["cpu_milli"]), int(row["memory_mib"]), int(row["gpu"]), row["model"])
            for row in csv.DictReader(handle)
        ]


def read_pods(path: Path) -> list[OpenbPod]:
    """FGD's pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`: the multi-GPU
    variants have no `gpu_spec` column, their pods take any GPU model)."""
    with path.open(newline="") as handle:
        return [
            OpenbPod(
                row["name"],
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                int(row["num_gpu"]),
                int(row["gpu_milli"]) if int(row["num_gpu"]) else 0,
                frozenset(model for model in (row.get("gpu_spec") or "").split("|") if model),
            )
            for row in csv.DictReader(handle)
        ]


def tuned(pods: Sequence[OpenbPod], capacity_milli: int, rng: random.Random) -> list[OpenbPod]:
    """The pods FGD replays: the list tuned to `TUNE_RATIO` of `capacity_milli`, sorted by name, shuffled."""
    target = TUNE_RATIO * capacity_milli
    chosen = list(pods)
    requested = sum(pod.requested_milli for pod in chosen)
    while requested > target:
        requested -= chosen.pop(rng.randrange(len(chosen))).requested_milli
    copies = 0
    while True:
        copy = pods[rng.randrange(len(pods))]
        if requested + copy.requested_milli > target:
            break
        chosen.append(replace(copy, name=f"{copy.name}-tuned-{copies}"))
        requested += copy.requested_milli
        copies += 1
    chosen.sort(key=lambda pod: pod.name)
    rng.shuffle(chosen)
    return chosen


class StatedSharePredictor:
    """Answers placement's questions about a pod from its stated share alone: it uses that share of the
    GPU, claims no memory beyond it and no slowdown (the share is the contract; nobody predicts it)."""

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return JobPrediction(utilization=workload.batch_size / WHOLE_GPU_MILLI, memory_mib=0.0)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return (1.0,) * len(workloads)


def cluster(nodes: Iterable[OpenbNode]) -> tuple[Node, ...]:
    """Horus's view of the GPU nodes: GPUs typed by FGD's model names, which only `StatedSharePredictor`
    hears, with no memory (no stated share asks for any)."""
    return tuple(
        Node(node.name, tuple(Gpu(node.name, index, node.model, 0) for index in range(node.gpus)))
        for node in nodes
        if node.gpus
    )


@dataclass(frozen=True)
class Step:
    """The cluster after one pod: GPU thousandths requested so far and allocated."""

    requested_milli: int
    allocated_milli: int


class Replay:
    """One policy placing a tuned pod list on FGD's cluster, one pod at a time; `hosts`: pods state
    their CPU, memory and GPU models to it, and nodes their CPU and memory left (see the module)."""

    def __init__(self, nodes: Sequence[OpenbNode], policy: Policy, hosts: bool = False) -> None:
        self._policy = policy
        self._hosts: dict[str, HostRoom] | None = (
            {node.name: HostRoom(node.cpu_milli, node.memory_mib) for node in nodes} if hosts else None
        )
        self._mix = NodeMix()  # the GPU pods seen, for where a CPU pod strands least (`hosts` only)
        self._states = NodeStates()
        self._gpu_nodes = cluster(nodes)
        self._index = ClusterIndex(self._gpu_nodes)
        self._cpu = {node.name: node.cpu_milli for node in nodes}
        self._memory = {node.name: node.memory_mib for node in nodes}
        self._gpu_left = {node.name: node.gpus * WHOLE_GPU_MILLI for node in nodes}
        self._models = {node.name: node.model for node in nodes}
        self.capacity_milli = sum(node.gpus for node in nodes) * WHOLE_GPU_MILLI
        self._allocated_milli = 0

    def run(self, pods: Iterable[OpenbPod]) -> Iterator[Step]:
        requested = 0
        for pod in pods:
            requested += pod.requested_milli
            self._place(pod)
            yield Step(requested, self._allocated_milli)

    def _place(self, pod: OpenbPod) -> None:
        if not pod.gpus:
            self._place_cpu_only(pod)
            return
        if self._hosts is None:
            avoid = frozenset(name for name in self._cpu if not self._fits(pod, name))
            request = replace(_request(pod), avoid_nodes=avoid)
        else:
            request = _stating(pod)
            self._mix.note(request)
        snapshot = ClusterSnapshot(nodes=self._gpu_nodes, index=self._index, hosts=self._hosts)
        for assignment in self._policy.schedule(snapshot, [request]):
            self._index.add(RunningJob(request, assignment.node, assignment.gpu_indices))
            self._take(pod, assignment.node)

    def _place_cpu_only(self, pod: OpenbPod) -> None:
        if self._hosts is not None:
            request = _stating(pod)
            node = least_costly_host(self._mix, request, self._states.grouped(self._index, self._hosts.get))
            if node is not None:
                self._take(pod, node)
            return
        fitting = [name for name in self._cpu if self._fits(pod, name)]
        if fitting:
            self._take(pod, min(fitting, key=lambda name: (self._gpu_left[name], self._cpu[name])))

    def _fits(self, pod: OpenbPod, node: str) -> bool:
        return (
            self._cpu[node] >= pod.cpu_milli
            and self._memory[node] >= pod.memory_mib
            and (not pod.gpu_spec or self._models[node] in pod.gpu_spec)
        )

    def _take(self, pod: OpenbPod, node: str) -> None:
        self._cpu[node] -= pod.cpu_milli
        self._memory[node] -= pod.memory_mib
        if self._hosts is not None:
            self._hosts[node] = HostRoom(self._cpu[node], self._memory[node])
        self._gpu_left[node] -= pod.requested_milli
        self._allocated_milli += pod.requested_milli


def _request(pod: OpenbPod) -> JobRequest:
    """The pod's GPU ask: its stated share (1000 and maxSlowdown 1.0 for whole GPUs)."""
    return JobRequest(
        key=pod.name,
        workload=Workload(STATED_MODEL, pod.gpu_milli),
        gpus=pod.gpus,
        max_slowdown=1.0 if pod.gpu_milli >= WHOLE_GPU_MILLI else defaults.MAX_SLOWDOWN,
        gpu_milli=pod.gpu_milli,
    )


def _stating(pod: OpenbPod) -> JobRequest:
    """The same, stating its CPU, memory and GPU models too."""
    return replace(
        _request(pod), cpu_milli=pod.cpu_milli, host_memory_mib=pod.memory_mib, gpu_products=pod.gpu_spec
    )


def allocation_at(steps: Sequence[Step], capacity_milli: int, requested_percent: int = 100) -> float | None:
    """FGD's allocation ratio (%) at `requested_percent` % requested: the mean over the steps whose
    requested ratio rounds to it (to within 1 where none does), each rounded to 2 decimals as FGD does."""

    def percent(milli: int) -> float:
        return 100.0 * milli / capacity_milli

    for width in (0, 1):
        near = [
            round(percent(step.allocated_milli), 2)
            for step in steps
            if abs(round(percent(step.requested_milli)) - requested_percent) <= width
        ]
        if near:
            return round(sum(near) / len(near), 2)
    return None
