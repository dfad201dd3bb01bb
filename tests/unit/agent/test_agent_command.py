import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from horus_operator.agent import kube
from horus_operator.agent.fake import FakeBackend, FakeInventory
from horus_operator.agent.fakereserve import ReservationReporter
from horus_operator.api import keys
from horus_operator.cli import main
from horus_operator.commands import agent as agent_command


def test_the_agent_needs_a_node_or_all_nodes_but_not_both() -> None:
    runner = CliRunner()

    neither = runner.invoke(main, ["agent", "--backend", "fake"], env={"HORUS_NODE_NAME": ""})
    both = runner.invoke(main, ["agent", "--node", "n1", "--all-nodes"])

    assert neither.exit_code == both.exit_code == 2
    assert "--all-nodes" in neither.output and "--all-nodes" in both.output


def test_backend_and_intervals_come_from_the_environment_too() -> None:
    result = CliRunner().invoke(main, ["agent", "--help"])

    assert result.exit_code == 0
    for variable in (
        "HORUS_NODE_NAME",
        "HORUS_NVML_BACKEND",
        "HORUS_SAMPLE_INTERVAL",
        "HORUS_PUBLISH_INTERVAL",
    ):
        assert variable in result.output


def test_fake_unhealthy_gpus_need_the_fake_backend_and_node_colon_index() -> None:
    runner = CliRunner()

    with_nvml = runner.invoke(main, ["agent", "--node", "n1", "--fake-unhealthy-gpu", "n1:0"])
    malformed = runner.invoke(
        main, ["agent", "--node", "n1", "--backend", "fake", "--fake-unhealthy-gpu", "n1-gpu0"]
    )

    assert with_nvml.exit_code == malformed.exit_code == 2
    assert "--backend fake" in with_nvml.output
    assert "--fake-unhealthy-gpu" in malformed.output and "n1-gpu0" in malformed.output


def test_truth_is_only_for_the_fake_backend_and_must_be_a_measured_pairs_csv(tmp_path: Path) -> None:
    runner = CliRunner()
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("gpu,model_a\nv100,resnet50\n")

    on_nvml = runner.invoke(main, ["agent", "--node", "n1", "--backend", "nvml", "--truth", str(pairs)])
    malformed = runner.invoke(main, ["agent", "--node", "n1", "--backend", "fake", "--truth", str(pairs)])

    assert on_nvml.exit_code == malformed.exit_code == 2
    assert "--truth is for --backend fake" in on_nvml.output
    assert "--truth" in malformed.output and "not a measured-pairs CSV" in malformed.output


def test_the_fake_agents_reservations_are_told_the_gpus_its_backend_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    labels = {keys.LABEL_GPU_COUNT: "2", keys.LABEL_GPU_PRODUCT: "Tesla-V100-SXM2-16GB"}
    monkeypatch.setattr(kube, "read_node", lambda name: kube.NodeInfo(name, f"uid-{name}", labels))
    reporters: list[ReservationReporter] = []
    monkeypatch.setattr(ReservationReporter, "run_forever", lambda self, stop: reporters.append(self))

    agent_command._report_reservations(["n1", "n2"], threading.Event())

    (reporter,) = reporters
    backend = FakeBackend(FakeInventory.from_node_labels("n1", labels))
    assert [g.uuid for g in backend.sample([], 0.0).gpus] == list(reporter.uuids["n1"])
    assert set(reporter.uuids) == {"n1", "n2"} and reporter.uuids["n1"] != reporter.uuids["n2"]
