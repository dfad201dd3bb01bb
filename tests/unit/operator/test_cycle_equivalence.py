"""The operator and the simulator decide alike: same cluster and queue in, same assignments out.

Random clusters (node count, GPUs per node, GPU memory, cordoned nodes), queues (model, GPUs,
maxSlowdown, priority, creation time, whether its first pod ran out of GPU memory beside a co-tenant)
and queue orders (with a starvation bound some jobs have passed) go through the operator's scheduling
loop against the fake API adapter (DLJob, Node and failed pod objects in, pods out) and through the
simulator's decision round (a scenario in, started jobs out; a crashed job queued as the simulator
re-queues one, `placement/oom.py`). Both must place the same jobs on the same GPUs (a crashed one with
the same memory), and reject the same ones.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from operator_builders import FakeKube, PodBuilder, gpu_node

from horus_operator.api import keys
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement import oom
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.queueorder import Ordering, QueueOrder, Starvation
from horus_operator.placement.registry import POLICIES, make_policy
from horus_operator.placement.types import Gpu, JobRequest, Node
from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.engine import Simulation
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, SimJob
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CREATED = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
PRODUCT_LABEL = "Tesla-V100-SXM2-16GB"  # GFD's label; the operator normalises it to "v100"
# model -> (utilization, memory MiB); giant is predicted larger than any GPU, so both shells reject it
JOBS = {"good": (0.4, 4000.0), "fair": (0.5, 4000.0), "poor": (0.9, 4000.0), "huge": (0.6, 12000.0)}
JOBS["giant"] = (0.9, 40000.0)
MODELS = tuple(JOBS)
# Where each job was placed (node, GPUs) and the peak memory it was placed with where it was raised
Placed = tuple[str, tuple[int, ...], float | None]
# Jobs created in the first two minutes have waited past it at NOW, the later ones not.
MAX_WAIT_S = (timedelta(hours=2) - timedelta(minutes=2)).total_seconds()


def ordering(order: QueueOrder) -> Ordering:
    return Ordering(order, starvation=Starvation(max_wait_s=MAX_WAIT_S))


def predictor() -> TablePredictor:
    """Every pair predicted (slowdown grows with the partner's utilization), so a policy that ignores
    slowdowns (binpack) never places a pair the simulator's truth calls impossible."""
    pairs = {
        (a, b): (1.0 + 0.8 * JOBS[b][0], 1.0 + 0.8 * JOBS[a][0])
        for a, b in itertools.combinations_with_replacement(MODELS, 2)
    }
    return TablePredictor(jobs=JOBS, pairs=pairs)


node_specs = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from((16384, 32768)), st.booleans()), min_size=1, max_size=3
)
job_specs = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.integers(1, 3),  # GPUs
        st.sampled_from((1.0, 1.5, 2.0, 3.0)),  # maxSlowdown
        st.integers(0, 2),  # priority
        st.integers(0, 3),  # creation, minutes after CREATED (ties broken by name)
        st.booleans(),  # its first pod ran out of memory on node-0 GPU 0 beside a job gone since
    ),
    min_size=1,
    max_size=10,
)


def _operator(policy: str, order: QueueOrder, nodes: list, jobs: list) -> dict[str, Placed]:
    kube = FakeKube()
    for n, (gpus, memory_mib, cordoned) in enumerate(nodes):
        body = gpu_node(f"node-{n}", count=gpus, product=PRODUCT_LABEL, memory_mib=memory_mib)
        body["spec"]["unschedulable"] = cordoned
        kube.nodes[f"node-{n}"] = body
    for i, (model, gpus, max_slowdown, priority, minutes, crashed) in enumerate(jobs):
        if crashed:
            kube.pods[f"team-a/job-{i}-0"] = _crashed(f"job-{i}", model)
        body = (
            DLJobBuilder.stored(f"job-{i}")
            .model(architecture=model)
            .spec(gpus=gpus, maxSlowdown=max_slowdown, priority=priority)
            .obj()
        )
        body["metadata"]["creationTimestamp"] = (CREATED + timedelta(minutes=minutes)).isoformat()
        kube.jobs[job_key(body)] = body
    believed = predictor()
    loop = SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=make_policy(policy, predictor=believed),
        resolver=jobspec.WorkloadResolver(
            lambda n: n, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}
        ),
        config=LoopConfig(ordering=ordering(order)),
        clock=lambda: NOW,
    )

    async def one_cycle() -> None:
        await loop.resync()
        await loop.cycle()
        await loop.settle()

    asyncio.run(one_cycle())
    placed = {}
    for pod in kube.pods.values():
        if pod["status"]["phase"] == "Failed":  # a crashed job's first pod: none of this cycle's
            continue
        annotations = pod["metadata"]["annotations"]
        gpus = tuple(int(g) for g in annotations[keys.ANNOTATION_GPUS].split(","))
        placed[f"team-a/{pod['metadata']['labels'][keys.LABEL_JOB]}"] = (
            annotations[keys.ANNOTATION_NODE],
            gpus,
            json.loads(annotations[keys.ANNOTATION_REQUEST]).get("peakMemoryMiB"),
        )
    return placed


def _crashed(job: str, model: str) -> dict:
    """The job's first pod, placed with the table's memory on node-0 GPU 0 beside a job since gone, that
    died of CUDA OOM."""
    failed = PodBuilder(job).on("node-0", 0).bound().predicted({"memoryMiB": JOBS[model][1]})
    pod = failed.failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.").obj()
    pod["metadata"]["annotations"][keys.ANNOTATION_COLOCATED] = "team-a/gone"
    return pod


def _simulator(policy: str, order: QueueOrder, nodes: list, jobs: list) -> dict[str, Placed]:
    cluster = tuple(
        Node(f"node-{n}", tuple(Gpu(f"node-{n}", i, "v100", memory_mib) for i in range(gpus)), not cordoned)
        for n, (gpus, memory_mib, cordoned) in enumerate(nodes)
    )
    sim_jobs = tuple(
        SimJob(
            JobRequest(
                f"team-a/job-{i}",
                Workload(model, 32),
                gpus,
                max_slowdown,
                priority,
                (CREATED + timedelta(minutes=minutes)).timestamp(),
            ),
            total_steps=100.0,
            steps_per_s_alone=1.0,
        )
        for i, (model, gpus, max_slowdown, priority, minutes, _) in enumerate(jobs)
    )
    believed = predictor()
    # An empty truth table: every co-location is judged by the same predictor the policy decides with,
    # so no placement crashes and the round's starts are exactly the cycle's assignments.
    truth = Truth(TruthTable(isolated={}, pairs={}), fallback=believed)
    sim = Simulation(
        Scenario("equivalence", sim_jobs, cluster, "v100"),
        SchedulingCycle(make_policy(policy, predictor=believed), ordering=ordering(order)),
        truth,
    )
    sim.now = NOW.timestamp()
    node_0_memory = nodes[0][1]
    for job, (model, *_, crashed) in zip(sim_jobs, jobs, strict=True):
        # as the engine re-queues a job that crashed out of memory beside a co-tenant (`_restart_alone`)
        raised = oom.raised_memory_mib(JOBS[model][1], capacity_mib=node_0_memory)
        sim.queue.add(oom.retried_alone(job.request, raised) if crashed else job.request)
    sim.decide()
    return {
        key: (active.node, active.gpu_indices, active.request.workload.peak_memory_mib)
        for key, active in sim.active.items()
    }


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    order=st.sampled_from(list(QueueOrder)),
    nodes=node_specs,
    jobs=job_specs,
)
def test_operator_and_simulator_place_the_same_jobs_on_the_same_gpus(
    policy: str, order: QueueOrder, nodes: list, jobs: list
) -> None:
    operator = _operator(policy, order, nodes, jobs)
    assert operator == _simulator(policy, order, nodes, jobs)
