"""Builders for placement test objects: `cluster(nodes=2, gpus=4)`, `job("a", "resnet50")`."""

from __future__ import annotations

from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, RunningJob
from horus_operator.prediction.api import Workload

GPU_MEMORY_MIB = 16384


def nodes(count: int = 1, gpus: int = 2, **gpu_fields: object) -> tuple[Node, ...]:
    return tuple(
        Node(
            name=f"n{n}",
            gpus=tuple(
                Gpu(node=f"n{n}", index=i, product="v100", memory_mib=GPU_MEMORY_MIB, **gpu_fields)  # type: ignore[arg-type]
                for i in range(gpus)
            ),
        )
        for n in range(count)
    )


def job(key: str, model: str, *, max_slowdown: float = 2.0, gpus: int = 1, at: float = 0.0) -> JobRequest:
    return JobRequest(
        key=key,
        workload=Workload(model=model, batch_size=32),
        gpus=gpus,
        max_slowdown=max_slowdown,
        submitted_at=at,
    )


def running(request: JobRequest, node: str, *indices: int) -> RunningJob:
    return RunningJob(request=request, node=node, gpu_indices=tuple(indices))


def snapshot(node_list: tuple[Node, ...], *jobs: RunningJob, now: float = 0.0) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=node_list, running=tuple(jobs), now=now)


def predictor() -> TablePredictor:
    """Four models with hand-picked interference (worked examples in the tests rely on these numbers).

    good+fair pair well, good+poor and poor+fair do not fit within the default maxSlowdown of 2.0 in the
    right way; see each test for the arithmetic."""
    return TablePredictor(
        jobs={
            "good": (0.4, 4000.0),
            "fair": (0.5, 4000.0),
            "poor": (0.9, 4000.0),
            "huge": (0.6, 12000.0),
            "giant": (0.9, 20000.0),  # predicted larger than a GPU
        },
        pairs={
            ("good", "fair"): (1.2, 1.2),  # throughput 1/1.2 + 1/1.2 = 1.67
            ("good", "poor"): (2.0, 2.0),  # throughput 1.0: sharing gains nothing
            ("fair", "poor"): (1.1, 1.5),  # throughput 0.91 + 0.67 = 1.58
            ("good", "good"): (1.3, 1.3),
            ("fair", "fair"): (1.4, 1.4),
            ("poor", "poor"): (1.9, 1.9),
            ("huge", "good"): (1.1, 1.1),  # memory decides: 12000 + 4000 + 500 > 16384
        },
    )
