"""The trained models: file round trips, the numpy tree evaluator, the Predictor's rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from horus_operator.prediction import artifacts, catalog, datasets, load_predictor, slowdown
from horus_operator.prediction.api import Workload
from horus_operator.prediction.memory import MemoryModel
from horus_operator.prediction.predictor import XGBoostPredictor
from horus_operator.prediction.training import common
from horus_operator.prediction.trees import TreeEnsemble


def _tiny_booster(objective: str = "reg:squarederror") -> tuple[xgb.Booster, np.ndarray]:
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(200, 4)).astype(np.float32)
    target = matrix[:, 0] * 2 + np.sin(matrix[:, 1]) + rng.normal(scale=0.1, size=200)
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0}
    return xgb.train(params, xgb.DMatrix(matrix, label=target), num_boost_round=20), matrix


@pytest.mark.parametrize("objective", ["reg:squarederror", "reg:absoluteerror"])
def test_tree_ensemble_matches_xgboost(tmp_path: Path, objective: str) -> None:
    booster, matrix = _tiny_booster(objective)
    booster.save_model(tmp_path / "model.json")
    matrix[::7, 1] = np.nan  # missing values follow each split's default branch
    ensemble = TreeEnsemble.from_json(tmp_path / "model.json")
    np.testing.assert_allclose(
        ensemble.predict(matrix), booster.inplace_predict(matrix), rtol=1e-5, atol=1e-5
    )


def test_tree_ensemble_refuses_non_identity_objectives(tmp_path: Path) -> None:
    booster, _ = _tiny_booster()
    document = json.loads(booster.save_raw("json"))
    document["learner"]["objective"]["name"] = "binary:logistic"
    (tmp_path / "model.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="binary:logistic"):
        TreeEnsemble.from_json(tmp_path / "model.json")


def test_artifacts_round_trip_and_fallback_to_shipped(tmp_path: Path) -> None:
    booster, matrix = _tiny_booster()
    artifacts.save_booster(tmp_path, "slowdown", booster, {"cv": {"note": "test"}})
    artifacts.save_memory(tmp_path, MemoryModel(overhead_mib=100.0, activation_factor=1.5), {})
    loaded = artifacts.load(tmp_path)
    np.testing.assert_allclose(
        loaded.slowdown.predict(matrix), booster.inplace_predict(matrix), rtol=1e-5, atol=1e-5
    )
    assert loaded.memory == MemoryModel(overhead_mib=100.0, activation_factor=1.5)
    assert loaded.metadata["slowdown"] == {"cv": {"note": "test"}}
    # utilization.json was not written here: it comes from the shipped models
    assert loaded.metadata["sources"]["utilization"] == str(artifacts.SHIPPED_DIR)


def test_shipped_metadata_describes_the_shipped_data() -> None:
    metadata = json.loads((artifacts.SHIPPED_DIR / artifacts.METADATA_FILE).read_text())

    repo = Path(__file__).resolve().parents[3]
    pairs = repo / "data" / "colocation" / "gavel_pairs_train.csv"
    assert metadata["slowdown"]["data_sha256"] == datasets.sha256_of(pairs)
    # Trained on today's catalog features; after regenerating the catalog run hack/train_models.py.
    assert metadata["slowdown"]["catalog_sha256"] == datasets.sha256_of(common.CATALOG_FILE)
    neighbours_file = artifacts.SHIPPED_DIR / metadata["slowdown"]["neighbours_file"]
    assert metadata["slowdown"]["neighbours_sha256"] == datasets.sha256_of(neighbours_file)
    cv = metadata["slowdown"]["cv"]
    for split in ("by_row", "by_pair", "by_configuration"):
        assert cv[split]["mape"] < cv[split]["baseline_mape"]
    assert cv["by_row"]["mape"] < cv["by_row_without_neighbours"]["mape"]


def test_shipped_predictor_answers_the_protocol() -> None:
    predictor = load_predictor()
    assert load_predictor() is predictor  # cached
    job = predictor.job(Workload("resnet50", 64), "Tesla-V100-SXM2-16GB")
    assert 0.0 <= job.utilization <= 1.0
    assert 0 < job.memory_mib < 16 * 1024
    pair = predictor.slowdowns("v100", [Workload("resnet50", 64), Workload("lstm-lm", 20)])
    assert pair is not None and all(value >= 1.0 for value in pair)


def test_set_slowdown_adds_pairwise_excesses() -> None:
    predictor = load_predictor()
    jobs = [Workload("resnet18", 32), Workload("lstm-lm", 10), Workload("recommendation", 1024)]
    triple = predictor.slowdowns("p100", jobs)
    assert triple is not None
    pairwise = [[predictor.slowdowns("p100", [a, b])[0] if a != b else 1.0 for b in jobs] for a in jobs]
    assert triple == pytest.approx(slowdown.combine(pairwise))


def test_combine_time_slicing_identity() -> None:
    # k identical jobs time-slicing: each pair halves throughput (s = 2); the set gives s = k
    assert slowdown.combine([[1.0, 2.0, 2.0], [2.0, 1.0, 2.0], [2.0, 2.0, 1.0]]) == (3.0, 3.0, 3.0)


def test_memory_rule_rejects_sets_that_do_not_fit_but_never_a_single_job() -> None:
    predictor = load_predictor()
    big = Workload("resnet50", 128)
    memory = predictor.job(big, "k80").memory_mib
    assert predictor.slowdowns("k80", [big]) == (1.0,)
    assert 2 * memory > 12 * 1024
    assert predictor.slowdowns("k80", [big, big]) is None


def test_custom_features_predict_like_the_catalog() -> None:
    predictor = load_predictor()
    profile = dict(catalog.entry("resnet18")["profile"])
    custom = Workload("my-net", 64, features=profile, features_key="sha256:abc")
    assert predictor.job(custom, "v100") == predictor.job(Workload("resnet18", 64), "v100")


def test_feature_source_is_injectable() -> None:
    calls: list[tuple[str, int]] = []

    def source(model: str, batch_size: int) -> dict[str, float]:
        calls.append((model, batch_size))
        return catalog.lookup("resnet18", batch_size)

    predictor = XGBoostPredictor(artifacts.load(), feature_source=source)
    predictor.job(Workload("x", 16), "k80")
    predictor.job(Workload("x", 16), "k80")
    assert calls == [("x", 16)]  # cached per (gpu, workload)
