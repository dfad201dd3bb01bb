"""Jobs described by a Hugging Face config or a catalog model at an input shape, through the operator:
resolved off the scheduling loop with a message saying what they wait for, and the shape counted kept
with the prediction."""

from __future__ import annotations

import asyncio

from test_operator_loop import FirstFreeGpu, _catalog, _cluster, _settle

from horus_operator.api import dljob
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec, pods
from horus_operator.operator.jobs.reading import COUNTING_SHAPE, READING_CONFIG
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.types import Assignment
from horus_operator.prediction.api import Workload
from horus_operator.prediction.features import PROFILE_NAMES
from horus_operator.testing.builders import DLJobBuilder

GPT2_SMALL = b'{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128}'


def _shaped(name: str, shape: tuple[int, ...], batch_size: int) -> Workload:
    return Workload(f"{name}@small", batch_size, dict.fromkeys(PROFILE_NAMES, 1.0), f"shape:{name}")


def _first_cycle_message(model: dict[str, object]) -> tuple[str, str]:
    """The job's status message after the first cycle (another job placed meanwhile), and its phase
    once the background resolution is done."""
    kube = _cluster(jobs=1, gpus=2)
    body = DLJobBuilder.stored("described").model(**model).obj()
    kube.jobs[job_key(body)] = body
    resolver = jobspec.WorkloadResolver(
        _catalog, read_onnx=lambda *_: GPT2_SMALL, onnx_features=lambda d, b: {}, workload_at_shape=_shaped
    )
    loop = SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=FirstFreeGpu(),
        resolver=resolver,
        config=LoopConfig(),
    )
    message: list[str] = []

    async def run() -> None:
        await loop.resync()
        await loop.cycle()
        await loop.settle()
        assert kube.jobs["team-a/job-0"]["status"]["phase"] == "Scheduled"
        message.append(kube.jobs["team-a/described"]["status"]["message"])
        await _settle(loop)

    asyncio.run(run())
    return message[0], kube.jobs["team-a/described"]["status"]["phase"]


def test_a_hugging_face_config_in_a_config_map_is_read_off_the_loop() -> None:
    model = {"huggingface": {"configMap": "c", "sequenceLength": 128}}
    assert _first_cycle_message(model) == (READING_CONFIG, "Scheduled")


def test_a_catalog_model_at_an_input_shape_is_counted_off_the_loop() -> None:
    model = {"architecture": "resnet50", "inputShape": [3, 32, 32]}
    assert _first_cycle_message(model) == (COUNTING_SHAPE, "Scheduled")


def _placement(body: dict) -> pods.Placement:
    job = dljob.parse(body)
    return pods.Placement(
        job=job,
        request=jobspec.request(job, Workload(model="vgg16", batch_size=job.batch_size), 5.0),
        assignment=Assignment(job=job.key, node="gpu-node-0", gpu_indices=(0,), predicted_memory_mib=3884.0),
        attempt=0,
        hostname="gpu-node-0",
        gpu_uuids=(),
    )


def test_the_input_shape_a_prediction_counted_is_recorded_with_it() -> None:
    body = DLJobBuilder.stored("cifar").model(architecture="vgg16", inputShape=[3, 32, 32]).obj()
    assert pods.view(pods.build_pod(_placement(body))).predicted["inputShape"] == [3, 32, 32]
    plain = pods.view(pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj())))
    assert "inputShape" not in plain.predicted
