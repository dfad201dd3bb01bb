import dataclasses

import pytest
from agent_builders import gpu, pod, process, sample

from horus_operator.agent import summary
from horus_operator.api import keys


def test_gpu_utilization_is_the_window_mean_and_memory_the_window_peak() -> None:
    samples = [
        sample(0.0, gpu(0, utilization=0.2, memory_used_mib=1000)),
        sample(1.0, gpu(0, utilization=0.6, memory_used_mib=3000)),
        sample(2.0, gpu(0, utilization=0.4, memory_used_mib=2000)),
    ]

    node = summary.summarize(node="n", backend="fake", samples=samples, pods=[])

    (only,) = node.gpus
    assert only.utilization == pytest.approx(0.4)
    assert only.memory_used_mib == 3000
    assert (node.taken_at, node.window_seconds, node.nvml_available, only.healthy) == (2.0, 2.0, True, True)


def test_a_gpus_health_is_the_newest_samples() -> None:
    failing = dataclasses.replace(gpu(0), healthy=False)

    went_bad = summary.summarize(
        node="n", backend="fake", samples=[sample(0.0, gpu(0)), sample(1.0, failing)], pods=[]
    )
    recovered = summary.summarize(
        node="n", backend="fake", samples=[sample(0.0, failing), sample(1.0, gpu(0))], pods=[]
    )

    assert (went_bad.gpus[0].healthy, recovered.gpus[0].healthy) == (False, True)


def test_a_pod_idle_in_some_samples_counts_as_zero_there() -> None:
    a = pod("a", job="train-a", steps_per_second=12.5)
    samples = [
        sample(0.0, gpu(0), processes=(process("uid-a", utilization=0.6, memory_mib=800),)),
        sample(1.0, gpu(0)),
    ]

    (usage,) = summary.summarize(node="n", backend="fake", samples=samples, pods=[a]).gpus[0].pods

    assert (usage.utilization, usage.memory_mib, usage.job, usage.steps_per_second) == (
        0.3,
        800,
        "train-a",
        12.5,
    )


def test_processes_of_one_pod_add_up_and_processes_outside_known_pods_are_dropped() -> None:
    samples = [
        sample(
            0.0,
            gpu(0),
            processes=(
                process("uid-a", utilization=0.2, memory_mib=100, pid=1),
                process("uid-a", utilization=0.3, memory_mib=200, pid=2),
                process(None, utilization=0.9, memory_mib=900, pid=3),
                process("uid-gone", utilization=0.9, memory_mib=900, pid=4),
            ),
        )
    ]

    pods = summary.summarize(node="n", backend="nvml", samples=samples, pods=[pod("a")]).gpus[0].pods

    assert [(p.name, p.utilization, p.memory_mib) for p in pods] == [("a", 0.5, 300)]


def test_unavailable_reports_the_known_gpus_unhealthy_with_unknown_readings() -> None:
    node = summary.unavailable(
        node="n", backend="nvml", now=9.0, message="NVML: gone", known_gpus=[gpu(0), gpu(1)]
    )

    assert node.nvml_available is False
    assert [(g.index, g.healthy, g.utilization, g.memory_used_mib) for g in node.gpus] == [
        (0, False, None, None),
        (1, False, None, None),
    ]


@pytest.mark.parametrize("value", ["", "fast", "-1", "0"])
def test_unusable_progress_annotations_are_ignored(value: str) -> None:
    base = pod("a")
    annotated = type(base)(
        uid=base.uid,
        namespace=base.namespace,
        name=base.name,
        annotations={keys.ANNOTATION_PROGRESS: value},
    )

    assert summary.reported_progress(annotated) is None


def test_a_rate_the_backend_knows_stands_in_only_where_the_job_reports_none() -> None:
    silent, reporting = pod("a"), pod("b", devices=("1",), steps_per_second=7.0)
    samples = [
        sample(0.0, gpu(0), gpu(1), processes=(process("uid-a", steps_per_second=3.0),)),
        sample(
            1.0,
            gpu(0),
            gpu(1),
            processes=(
                process("uid-a", steps_per_second=4.0),
                process("uid-b", gpu_index=1, steps_per_second=9.0),
            ),
        ),
    ]

    node = summary.summarize(node="n", backend="fake", samples=samples, pods=[silent, reporting])

    assert [p.steps_per_second for g in node.gpus for p in g.pods] == [4.0, 7.0]
