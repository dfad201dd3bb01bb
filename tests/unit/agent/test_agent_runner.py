"""The loop with the fake backend and a stand-in for our own API adapter (`kube.NodeApi`)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from agent_builders import inventory, pod

from horus_operator.agent import resourceslice
from horus_operator.agent.fake import FakeBackend
from horus_operator.agent.metrics import AgentMetrics
from horus_operator.agent.pacing import Backoff, PublishPacer
from horus_operator.agent.readings import NvmlUnavailableError, PodInfo, Sample
from horus_operator.agent.runner import Agent


class Refused(Exception):
    pass


class RecordingApi:
    def __init__(self, pods: list[PodInfo]) -> None:
        self.pod_list = pods
        self.published: list[dict[str, Any]] = []
        self.devices: list[dict[str, Any]] = []
        self.refusing = False
        self.refusing_devices = False

    def pods(self) -> list[PodInfo]:
        if self.refusing:
            raise Refused("connection refused")
        return self.pod_list

    def publish(self, status: dict[str, Any]) -> None:
        if self.refusing:
            raise Refused("connection refused")
        self.published.append(status["status"])

    def publish_devices(self, body: dict[str, Any]) -> None:
        if self.refusing_devices:
            raise Refused("resourceslices is forbidden")
        self.devices.append(body)


class BreakableBackend(FakeBackend):
    broken = False

    def sample(self, pods: Any, now: float) -> Sample:
        if self.broken:
            raise NvmlUnavailableError("NVML: driver gone")
        return super().sample(pods, now)


def make_agent(
    api: RecordingApi,
    backend: FakeBackend | None = None,
    devices: dict[str, Any] | None = None,
) -> Agent:
    return Agent(
        node="node-a",
        backend=backend or FakeBackend(inventory()),
        api=api,
        api_error=Refused,
        metrics=AgentMetrics(),
        pacer=PublishPacer(interval=10.0, backoff=Backoff(base=1.0, cap=4.0, rng=random.Random(0))),
        sample_interval=1.0,
        devices=devices,
    )


def test_samples_every_step_and_publishes_once_per_interval() -> None:
    api = RecordingApi([pod("a", utilization=0.4)])
    agent = make_agent(api)

    for second in range(21):
        agent.step(float(second))

    assert len(api.published) == 3  # at 0, 10 and 20
    assert api.published[-1]["gpus"][0]["utilization"] == 0.4
    assert api.published[-1]["windowSeconds"] == 9.0  # samples 11..20


def test_nvml_failure_publishes_unhealthy_gpus_at_once_and_recovers() -> None:
    api = RecordingApi([pod("a")])
    backend = BreakableBackend(inventory())
    agent = make_agent(api, backend)
    agent.step(0.0)

    backend.broken = True
    agent.step(1.0)
    backend.broken = False
    agent.step(2.0)

    assert [(s["nvmlAvailable"], s["healthyGpus"]) for s in api.published] == [
        (True, 2),
        (False, 0),
        (True, 2),
    ]
    assert agent.metrics.nvml_errors._value.get() == 1


def test_api_errors_back_off_and_the_loop_keeps_sampling(caplog: pytest.LogCaptureFixture) -> None:
    api = RecordingApi([pod("a", utilization=0.4)])
    agent = make_agent(api)
    api.refusing = True

    summaries = [agent.step(float(second)) for second in range(4)]
    api.refusing = False
    agent.step(10.0)

    assert len([r for r in caplog.records if "retrying" in r.message]) < 4  # backed off, not every step
    assert all(s.gpus[0].utilization == 0.0 for s in summaries)  # no pods known yet: idle GPUs
    assert agent.metrics.publishes.labels(result="error")._value.get() == 0  # never got past the pod list
    # the window held 4 samples without known pods (idle GPU) and 1 with the pod at 0.4
    assert len(api.published) == 1 and api.published[0]["gpus"][0]["utilization"] == 0.4 / 5


def test_the_resource_slice_is_published_once_after_the_gpunode_and_retried_until_it_lands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = RecordingApi([])
    slice_body = resourceslice.fake_slice(inventory(), "node-uid")
    agent = make_agent(api, devices=slice_body)
    api.refusing_devices = True

    for second in (0, 10, 20):  # three publishes, each retrying the slice
        agent.step(float(second))
    api.refusing_devices = False
    for second in (30, 40):
        agent.step(float(second))

    assert len(api.published) == 5
    assert api.devices == [slice_body]  # once it landed, never again
    assert len([r for r in caplog.records if "ResourceSlice" in r.message and "failed" in r.message]) == 1


def test_without_devices_nothing_but_the_gpunode_is_published() -> None:
    api = RecordingApi([])
    make_agent(api).step(0.0)

    assert len(api.published) == 1 and api.devices == []
