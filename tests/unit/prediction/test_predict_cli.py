"""`horus predict pairs|job` and `horus train`: the batch interface other tools depend on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from horus_operator.cli import main
from horus_operator.prediction import load_predictor, slowdown
from horus_operator.prediction.api import Workload

REPO = Path(__file__).resolve().parents[3]
HEADER = "gpu,model_a,batch_a,model_b,batch_b\n"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _pairs(tmp_path: Path, body: str, header: str = HEADER) -> tuple[int, str, Path]:
    source, target = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text(header + body)
    code, output = _run("predict", "pairs", "--input", str(source), "--output", str(target))
    return code, output, target


def _rows(tmp_path: Path, body: str, header: str = HEADER) -> list[dict[str, str]]:
    """The output rows of a `predict pairs` run that must succeed."""
    code, output, target = _pairs(tmp_path, body, header)
    assert code == 0, output
    with target.open() as handle:
        return list(csv.DictReader(handle))


# The interface other tools read: exactly these columns, in this order (extend, never rename).
OUTPUT_COLUMNS = ["gpu", "model_a", "batch_a", "model_b", "batch_b", "slowdown_a", "slowdown_b", "feasible"]


def test_pairs_output_repeats_input_and_adds_predictions(tmp_path: Path) -> None:
    code, output, target = _pairs(tmp_path, "v100,resnet50,64,lstm-lm,20\nk80,resnet50,128,resnet50,128\n")
    assert code == 0, output
    with target.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == OUTPUT_COLUMNS
    assert rows[0]["model_b"] == "lstm-lm" and rows[0]["batch_b"] == "20"
    assert all(float(row[column]) >= 1.0 for row in rows for column in ("slowdown_a", "slowdown_b"))
    assert [row["feasible"] for row in rows] == ["true", "false"]  # two ResNet-50/128 exceed a K80's 12 GiB
    expected = load_predictor().slowdowns("v100", [Workload("resnet50", 64), Workload("lstm-lm", 20)])
    assert expected is not None
    assert float(rows[0]["slowdown_a"]) == pytest.approx(expected[0], abs=1e-4)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("v100,resnet50,64,lstm-lm,20\nv100,resnet51,64,lstm-lm,20\n", ["row 2", "model_a", "'resnet51'"]),
        (
            "v100,resnet50,64,lstm-lm,20\nv100,resnet50,64,lstm-lm,20\nx900,resnet50,64,lstm-lm,20\n",
            ["row 3", "'x900'"],
        ),
        ("v100,resnet50,64,lstm-lm,zero\n", ["row 1", "batch_b", "'zero'"]),
        ("v100,resnet50,64,notanet,8\n", ["row 1", "model_b", "'notanet'"]),
    ],
)
def test_pairs_errors_name_row_and_value_and_write_nothing(
    tmp_path: Path, body: str, expected: list[str]
) -> None:
    code, output, target = _pairs(tmp_path, body)
    assert code != 0
    for fragment in expected:
        assert fragment in output
    assert not target.exists()


def test_pairs_precision_columns_are_optional_and_repeated_when_given(tmp_path: Path) -> None:
    body = "h100,bert,64,lstm-lm,20,amp,\nNVIDIA-H100-80GB-HBM3,bert,64,lstm-lm,20,bf16,fp32\n"
    rows = _rows(tmp_path, body, header=HEADER.strip() + ",precision_a,precision_b\n")
    assert list(rows[0]) == [*OUTPUT_COLUMNS, "precision_a", "precision_b"]
    assert [(row["precision_a"], row["precision_b"]) for row in rows] == [("amp", "fp32"), ("bf16", "fp32")]
    assert rows[1]["gpu"] == "NVIDIA-H100-80GB-HBM3"  # input repeated as given
    predictor = load_predictor()
    for row, precision in zip(rows, ("amp", "bf16"), strict=True):
        workloads = [Workload("bert", 64, precision=precision), Workload("lstm-lm", 20)]
        expected = predictor.slowdowns("h100", workloads)
        assert expected is not None
        assert float(row["slowdown_a"]) == pytest.approx(expected[0], abs=1e-4)


def test_pairs_without_precision_columns_predict_fp32(tmp_path: Path) -> None:
    plain = _pairs(tmp_path, "h100,bert,64,lstm-lm,20\n")
    (tmp_path / "out.csv").rename(tmp_path / "plain.csv")
    explicit = _pairs(tmp_path, "h100,bert,64,lstm-lm,20,fp32\n", header=HEADER.strip() + ",precision_a\n")
    assert plain[0] == explicit[0] == 0
    with (tmp_path / "plain.csv").open() as handle:
        plain_row = next(csv.DictReader(handle))
    with explicit[2].open() as handle:
        explicit_row = next(csv.DictReader(handle))
    assert list(plain_row)[-1] == "feasible" and list(explicit_row)[-1] == "precision_a"
    assert plain_row == {key: value for key, value in explicit_row.items() if key != "precision_a"}


def test_pairs_bad_precision_names_row_and_value(tmp_path: Path) -> None:
    code, output, target = _pairs(
        tmp_path,
        "v100,resnet50,64,lstm-lm,20,amp\nv100,resnet50,64,lstm-lm,20,fp16\n",
        header=HEADER.strip() + ",precision_b\n",
    )
    assert code != 0
    for fragment in ("row 2", "precision_b", "'fp16'"):
        assert fragment in output
    assert not target.exists()


def test_pairs_framework_columns_reach_the_memory_rule_and_are_repeated(tmp_path: Path) -> None:
    # Two small CNNs share a V100 under PyTorch; under TensorFlow each one's arena takes half of it.
    body = "v100,resnet50,16,mobilenet_v2,16,,\nv100,resnet50,16,mobilenet_v2,16,tensorflow,tensorflow\n"
    rows = _rows(tmp_path, body, header=HEADER.strip() + ",framework_a,framework_b\n")
    assert list(rows[0]) == [*OUTPUT_COLUMNS, "framework_a", "framework_b"]
    assert [(row["framework_a"], row["feasible"]) for row in rows] == [
        ("pytorch", "true"),
        ("tensorflow", "false"),
    ]
    (tmp_path / "out.csv").unlink()
    code, output, target = _pairs(
        tmp_path, "v100,resnet50,16,mobilenet_v2,16,jax\n", header=HEADER.strip() + ",framework_a\n"
    )
    assert code != 0 and not target.exists()
    for fragment in ("row 1", "framework_a", "'jax'"):
        assert fragment in output


def test_pairs_host_cpu_columns_reach_the_prior_and_are_repeated(tmp_path: Path) -> None:
    # A saturating CNN beside a co-runner that keeps four cores busy: its host work is contended.
    body = "rtx-3090,resnet18,32,ppo,64,,4\nrtx-3090,resnet18,32,ppo,64,0,0\n"
    rows = _rows(tmp_path, body, header=HEADER.strip() + ",host_cpus_a,host_cpus_b\n")
    assert list(rows[0]) == [*OUTPUT_COLUMNS, "host_cpus_a", "host_cpus_b"]
    assert [(row["host_cpus_a"], row["host_cpus_b"]) for row in rows] == [("0", "4"), ("0", "0")]
    assert float(rows[0]["slowdown_a"]) > float(rows[1]["slowdown_a"])


def test_pairs_bad_host_cpus_names_row_and_value(tmp_path: Path) -> None:
    code, output, target = _pairs(
        tmp_path, "v100,resnet50,64,lstm-lm,20,-2\n", header=HEADER.strip() + ",host_cpus_a\n"
    )
    assert code != 0
    for fragment in ("row 1", "host_cpus_a", "'-2'"):
        assert fragment in output
    assert not target.exists()


def test_pairs_measured_utilization_replaces_the_graph_s_and_is_repeated(tmp_path: Path) -> None:
    """A job the graph calls saturating that the input says keeps the GPU 5 % busy slows its partner
    less (the slowdown prior's busy fraction), as the operator's observed profile does."""
    body = "h200,resnet50,64,resnet18,64,,\nh200,resnet50,64,resnet18,64,0.05,\n"
    rows = _rows(tmp_path, body, header=HEADER.strip() + ",util_a_alone,util_b_alone\n")
    assert list(rows[0]) == [*OUTPUT_COLUMNS, "util_a_alone", "util_b_alone"]
    assert [(row["util_a_alone"], row["util_b_alone"]) for row in rows] == [("", ""), ("0.05", "")]
    assert float(rows[1]["slowdown_b"]) < float(rows[0]["slowdown_b"])
    expected = load_predictor().slowdowns(
        "h200", [Workload("resnet50", 64, busy=0.05), Workload("resnet18", 64)]
    )
    assert expected is not None
    assert float(rows[1]["slowdown_b"]) == pytest.approx(expected[1], abs=1e-4)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "busy", "nan"])
def test_pairs_bad_utilization_names_row_and_value(tmp_path: Path, value: str) -> None:
    code, output, target = _pairs(
        tmp_path, f"v100,resnet50,64,lstm-lm,20,{value}\n", header=HEADER.strip() + ",util_b_alone\n"
    )
    assert code != 0
    for fragment in ("row 1", "util_b_alone", repr(value)):
        assert fragment in output
    assert not target.exists()


def test_time_sliced_pairs_raise_the_busier_job_to_its_fair_share(tmp_path: Path) -> None:
    """Beside a job measured 45 % busy, a saturating one keeps at most 55 % of a time-sliced GPU: 1.82×,
    where the model's even split says about 1.5× for both. The light one, served all the time it
    asks, only waits for turns: at most the time-sharing prior's answer, not the model's."""
    source, plain, sliced = tmp_path / "in.csv", tmp_path / "plain.csv", tmp_path / "sliced.csv"
    source.write_text(HEADER.strip() + ",util_a_alone,util_b_alone\nh200,gpt2,4,resnet18,64,1.0,0.45\n")
    for target, flags in ((plain, []), (sliced, ["--time-sliced"])):
        code, output = _run("predict", "pairs", *flags, "--input", str(source), "--output", str(target))
        assert code == 0, output
    with plain.open() as handle:
        before = next(csv.DictReader(handle))
    with sliced.open() as handle:
        after = next(csv.DictReader(handle))
    assert float(before["slowdown_a"]) < 1 / 0.55
    assert float(after["slowdown_a"]) == pytest.approx(1 / 0.55, abs=1e-4)
    light = Workload("resnet18", 64, busy=0.45)
    prior = load_predictor().prior_slowdowns("h200", [light, Workload("gpt2", 4, busy=1.0)])[0]
    assert 1.0 <= prior < float(before["slowdown_b"])
    assert float(after["slowdown_b"]) == pytest.approx(prior, abs=1e-4)


def test_pairs_missing_column_is_named(tmp_path: Path) -> None:
    code, output, target = _pairs(
        tmp_path, "v100,resnet50,64,lstm-lm\n", header="gpu,model_a,batch_a,model_b\n"
    )
    assert code != 0
    assert "batch_b" in output
    assert not target.exists()


def test_job_json() -> None:
    code, output = _run(
        "predict", "job", "--model", "ResNet-50", "--batch-size", "64", "--gpu", "v100", "--json"
    )
    assert code == 0, output
    result = json.loads(output)
    assert result["model"] == "resnet50" and result["gpu"] == "v100"
    assert 0 <= result["utilization"] <= 1 and result["memory_mib"] > 0


def test_job_precision_defaults_to_fp32_and_is_printed() -> None:
    args = ["predict", "job", "--model", "bert", "--batch-size", "32", "--gpu", "NVIDIA-H100-80GB-HBM3"]
    code, output = _run(*args, "--json")
    assert code == 0, output
    assert json.loads(output)["precision"] == "fp32" and json.loads(output)["gpu"] == "h100"
    code, output = _run(*args, "--json", "--precision", "amp")
    assert code == 0, output
    result = json.loads(output)
    expected = load_predictor().job(Workload("bert", 32, precision="amp"), "h100")
    assert result["precision"] == "amp"
    assert result["utilization"] == pytest.approx(expected.utilization, abs=1e-4)


def test_job_unknown_precision_is_refused() -> None:
    code, output = _run(
        "predict", "job", "--model", "bert", "--batch-size", "32", "--gpu", "h100", "--precision", "fp16"
    )
    assert code != 0
    assert "'fp16'" in output and "--precision" in output


def test_job_framework_defaults_to_pytorch_and_reaches_the_memory() -> None:
    args = ["predict", "job", "--model", "resnet50", "--batch-size", "64", "--gpu", "a100", "--json"]
    code, output = _run(*args)
    assert code == 0, output
    pytorch = json.loads(output)
    code, output = _run(*args, "--framework", "tensorflow")
    assert code == 0, output
    tensorflow = json.loads(output)
    expected = load_predictor().job(Workload("resnet50", 64, framework="tensorflow"), "a100")
    assert (pytorch["framework"], tensorflow["framework"]) == ("pytorch", "tensorflow")
    assert tensorflow["memory_mib"] == pytest.approx(expected.memory_mib, abs=0.1)
    assert tensorflow["memory_mib"] > pytorch["memory_mib"]
    code, output = _run(*args, "--framework", "jax")
    assert code != 0 and "'jax'" in output and "--framework" in output


def test_job_unknown_gpu() -> None:
    code, output = _run("predict", "job", "--model", "resnet50", "--batch-size", "64", "--gpu", "x900")
    assert code != 0
    assert "x900" in output


def test_train_slowdown_writes_a_loadable_models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slowdown, "ROUNDS", 40)  # the wiring is under test here, not the fit
    # A small calibration set: the K80 pairs among three architectures.
    rows = list(csv.DictReader((REPO / "data" / "colocation" / "gavel_pairs_train.csv").open()))
    chosen = [
        row
        for row in rows
        if row["gpu"] == "k80" and {row["model_a"], row["model_b"]} <= {"resnet18", "resnet50", "lstm-lm"}
    ]
    data = tmp_path / "mine.csv"
    with data.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(chosen)
    code, output = _run("train", "slowdown", "--data", str(data), "--out", str(tmp_path / "models"))
    assert code == 0, output
    metadata = json.loads((tmp_path / "models" / "metadata.json").read_text())
    assert metadata["slowdown"]["data_file"] == "mine.csv"
    predictor = load_predictor(tmp_path / "models")
    assert predictor is not load_predictor()
    assert predictor.models.metadata["sources"]["utilization"] != str(tmp_path / "models")
    slowdowns = predictor.slowdowns("k80", [Workload("resnet18", 32), Workload("lstm-lm", 10)])
    assert slowdowns is not None and min(slowdowns) >= 1.0


def test_train_refuses_csv_without_the_columns(tmp_path: Path) -> None:
    data = tmp_path / "bad.csv"
    data.write_text("gpu,model\nv100,resnet50\n")
    code, output = _run("train", "slowdown", "--data", str(data), "--out", str(tmp_path / "models"))
    assert code != 0
    assert "tput_a_alone" in output


HF_LLAMA = REPO / "examples" / "huggingface" / "llama-3-8b.json"


def _hf_job(*extra: str) -> tuple[int, str]:
    args = ["predict", "job", "--hf-config", str(HF_LLAMA), "--batch-size", "1", "--gpu", "h100"]
    return _run(*args, "--precision", "bf16", "--json", *extra)


def test_job_from_a_hugging_face_config_counts_lora_and_checkpointing() -> None:
    code, output = _hf_job("--sequence-length", "2048")
    assert code == 0, output
    full = json.loads(output)
    assert full["params"] == full["trainable_params"] == 8_030_261_248  # the published count
    code, output = _hf_job("--sequence-length", "2048", "--lora-rank", "16", "--gradient-checkpointing")
    assert code == 0, output
    lora = json.loads(output)
    assert lora["trainable_params"] < full["trainable_params"] / 1000
    assert lora["memory_mib"] < full["memory_mib"] / 2
    assert lora["sequence_length"] == 2048 and lora["precision"] == "bf16"


def test_job_from_a_hugging_face_config_takes_the_memory_savings() -> None:
    lora = ("--sequence-length", "2048", "--lora-rank", "16", "--gradient-checkpointing")
    memory = {}
    for name, extra in {
        "lora": (),
        "qlora": ("--weights-dtype", "nf4"),
        "saving": ("--optimizer", "paged_adamw8bit", "--optimizer-in-backward", "--loss-chunks", "8"),
        "offloaded": ("--activation-offloading",),
        "fsdp": ("--sharding", "fsdp", "--gpus", "8"),
        "dropout": ("--lora-dropout", "0.05"),
    }.items():
        code, output = _hf_job(*lora, *extra)
        assert code == 0, output
        memory[name] = json.loads(output)["memory_mib"]
    assert all(memory[name] < memory["lora"] for name in ("qlora", "saving", "offloaded", "fsdp"))
    assert memory["dropout"] > memory["lora"]
    full = ("--sequence-length", "2048", "--gradient-checkpointing")
    _, output = _hf_job(*full)
    _, sharded = _hf_job(*full, "--sharding", "zero2", "--gpus", "4")
    assert json.loads(sharded)["memory_mib"] < json.loads(output)["memory_mib"]
    fsdp = (*full, "--sharding", "fsdp", "--gpus", "4", "--gradient-accumulation-steps", "4")
    _, no_sync = _hf_job(*fsdp)
    _, synced = _hf_job(*fsdp, "--sync-each-batch")
    assert json.loads(synced)["memory_mib"] < json.loads(no_sync)["memory_mib"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ((), "--sequence-length"),
        (("--sequence-length", "512", "--weights-dtype", "nf4"), "weightsDtype: nf4"),
        (("--sequence-length", "512", "--optimizer", "lion"), "--optimizer"),
        (("--sequence-length", "512", "--lora-target", "q_proj"), "--lora-rank"),
        (("--sequence-length", "512", "--lora-rank", "8", "--lora-target", "c_attn"), "lora.targetModules"),
        (("--sequence-length", "512", "--model", "bert"), "exactly one of --model and --hf-config"),
    ],
)
def test_job_from_a_hugging_face_config_names_what_is_wrong(extra: tuple[str, ...], named: str) -> None:
    code, output = _hf_job(*extra)
    assert code != 0
    assert named in output


def test_job_at_an_input_shape_predicts_less_memory_and_names_a_shape_it_cannot_take() -> None:
    args = ["predict", "job", "--model", "vgg16", "--batch-size", "128", "--gpu", "a100", "--json"]
    code, output = _run(*args, "--input-shape", "3x32x32")
    assert code == 0, output
    cifar = json.loads(output)
    assert cifar["input_shape"] == [3, 32, 32]
    code, output = _run(*args)
    assert code == 0, output
    assert cifar["memory_mib"] < json.loads(output)["memory_mib"] / 3
    code, output = _run(*args, "--input-shape", "3x16x16")
    assert code != 0
    assert "--input-shape [3, 16, 16]: vgg16 cannot take it" in output
