"""Model graphs read off the scheduling loop (operator/jobs/graphs.py): a job whose ONNX graph is being read
waits while every other job is placed; a namespace's burst of graphs is read a few at a time; a graph's
features are remembered by its content; a final job is never resolved again; and sizes beyond any GPU
node are refused with the field named."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from operator_builders import FakeKube
from test_operator_loop import _catalog, _cluster, _loop, _settle

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator.cache import job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.jobs.graphs import GraphQueue, GraphReader
from horus_operator.operator.jobs.reading import READING_GRAPH
from horus_operator.operator.loop import SchedulingLoop
from horus_operator.prediction.api import Workload
from horus_operator.testing.builders import DLJobBuilder


def _onnx_job(name: str, namespace: str = "team-a") -> JobSpec:
    return dljob.parse(DLJobBuilder.stored(name, namespace).model(onnx={"configMap": "g"}).obj())


def test_a_namespaces_burst_of_graphs_is_read_a_few_at_a_time_and_others_go_first() -> None:
    reading: dict[str, int] = {"team-a": 0, "team-b": 0}
    most: dict[str, int] = {"team-a": 0, "team-b": 0}
    order: list[str] = []

    async def scenario() -> None:
        gate = asyncio.Event()  # holds team-a's reads until the test lets them finish

        async def resolve(job: JobSpec) -> Workload:
            reading[job.namespace] += 1
            most[job.namespace] = max(most[job.namespace], reading[job.namespace])
            if job.namespace == "team-a":
                await gate.wait()
            reading[job.namespace] -= 1
            return Workload(model="custom", batch_size=1)

        queue = GraphQueue(resolve, order.append, per_namespace=2)
        burst = [_onnx_job(f"a{i}") for i in range(6)]
        assert all(queue.verdict(job) is None for job in burst)
        assert queue.verdict(_onnx_job("b0", "team-b")) is None
        await asyncio.sleep(0.01)
        assert order == ["team-b/b0"], "another namespace is not held behind team-a's burst"
        gate.set()
        while len(order) < 7:
            await asyncio.sleep(0.01)
        assert all(isinstance(queue.verdict(job), Workload) for job in burst)

    asyncio.run(scenario())
    assert most == {"team-a": 2, "team-b": 1}


def test_an_invalid_graph_is_a_verdict_and_a_failing_api_server_is_retried() -> None:
    calls: list[str] = []

    async def scenario() -> None:
        async def resolve(job: JobSpec) -> Workload:
            calls.append(job.name)
            if job.name == "flaky" and calls.count("flaky") == 1:
                raise ConnectionError("API server gone")
            raise InvalidJob("spec.model.onnx", "team-a/g[model.onnx]", "unreadable ONNX graph")

        queue = GraphQueue(resolve, lambda key: None)
        for name in ("bad", "flaky"):
            assert queue.verdict(_onnx_job(name)) is None
        await asyncio.sleep(0.01)
        assert isinstance(queue.verdict(_onnx_job("bad")), InvalidJob)
        assert queue.verdict(_onnx_job("flaky")) is None, "read again, not failed"
        await asyncio.sleep(0.01)
        assert isinstance(queue.verdict(_onnx_job("flaky")), InvalidJob)

    asyncio.run(scenario())
    assert calls == ["bad", "flaky", "flaky"]


def _features(data: bytes, batch_size: int) -> Mapping[str, float]:
    return {"flops_per_batch": float(len(data) * batch_size)}


def test_a_graphs_features_are_computed_in_another_process_once_per_content_and_batch() -> None:
    reader = GraphReader(_features, capacity=2)
    try:
        first = reader(b"graph", 4)
        assert first == {"flops_per_batch": 20.0}
        assert reader(b"graph", 4) is first, "the same bytes at the same batch are not parsed again"
        assert reader(b"graph", 8) == {"flops_per_batch": 40.0}
        reader(b"other", 1)
        assert reader(b"graph", 4) is not first, "the oldest entry left once over capacity"
    finally:
        reader.close()


def _loop_with_graphs(kube: FakeKube, parsed: list[str]) -> SchedulingLoop:
    def parse(data: bytes, batch_size: int) -> dict[str, float]:
        parsed.append(data.decode())
        return {"flops_per_batch": 1e9 * batch_size}

    resolver = jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"graph", onnx_features=parse)
    return _loop(kube, resolver=resolver)


def test_a_job_waits_while_its_graph_is_read_and_is_placed_once_it_is() -> None:
    kube, parsed = _cluster(jobs=1, gpus=2), []
    body = DLJobBuilder.stored("net").model(onnx={"configMap": "g"}).obj()
    kube.jobs[job_key(body)] = body
    loop = _loop_with_graphs(kube, parsed)

    async def first_cycle() -> None:
        await loop.resync()
        await loop.cycle()
        await loop.settle()
        assert kube.jobs["team-a/job-0"]["status"]["phase"] == "Scheduled"
        assert kube.jobs["team-a/net"]["status"]["message"] == READING_GRAPH
        await _settle(loop)

    asyncio.run(first_cycle())
    assert kube.jobs["team-a/net"]["status"]["phase"] == "Scheduled"
    assert parsed == ["graph"]


def test_a_final_job_is_never_resolved_again() -> None:
    kube, parsed = FakeKube(), []
    body = DLJobBuilder.stored("net").model(onnx={"configMap": "g"}).status(phase="Failed").obj()
    kube.jobs[job_key(body)] = body
    asyncio.run(_settle(_loop_with_graphs(kube, parsed)))
    assert parsed == [] and kube.jobs["team-a/net"]["status"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("features", "field"),
    [
        ({"flops_per_batch": 4.7e49}, "spec.model.features.flops_per_batch"),
        ({"params": 1e14}, "spec.model.features.params"),
        ({"activation_bytes_per_batch": 1e16}, "spec.model.features.activation_bytes_per_batch"),
    ],
)
def test_sizes_beyond_any_gpu_node_are_refused_naming_the_feature(features: dict, field: str) -> None:
    job = dljob.parse(DLJobBuilder.stored("bomb").model(features=features).obj())
    resolver = jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {})
    with pytest.raises(InvalidJob) as refused:
        resolver.workload(job)
    assert refused.value.field_path == field


def test_a_graph_whose_shapes_say_more_than_any_node_holds_is_refused_as_the_onnx_field() -> None:
    job = dljob.parse(DLJobBuilder.stored("bomb").model(onnx={"configMap": "g"}).obj())
    resolver = jobspec.WorkloadResolver(
        _catalog, read_onnx=lambda *_: b"x", onnx_features=lambda d, b: {"flops_per_batch": 4.7e49}
    )
    with pytest.raises(InvalidJob) as refused:
        resolver.workload(job)
    assert refused.value.field_path.startswith("spec.model.onnx") and "flops_per_batch" in str(refused.value)
