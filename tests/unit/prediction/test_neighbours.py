"""Neighbour columns: what the measured relatives of a pair say, the row's own measurement left out."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from horus_operator.prediction import artifacts, catalog, design, neighbours, roofline, slowdown
from horus_operator.prediction.api import Workload
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.memory import MemoryModel
from horus_operator.prediction.neighbours import NEIGHBOUR_COLUMNS, NeighbourTable
from horus_operator.prediction.predictor import XGBoostPredictor
from horus_operator.prediction.training import slowdown_fit

# Slowdowns made up for the tests (not measurements): resnet50 at batch 16 and 64 with lstm-lm@20.
MEASUREMENTS = [
    ("k80", "resnet50", 16, "lstm-lm", 20, 1.5),
    ("k80", "lstm-lm", 20, "resnet50", 16, 2.0),
    ("k80", "resnet50", 64, "lstm-lm", 20, 3.0),
    ("k80", "lstm-lm", 20, "resnet50", 64, 4.0),
    ("p100", "resnet50", 32, "lstm-lm", 20, 1.2),
]


def _column(row: list[float], name: str) -> float:
    return row[NEIGHBOUR_COLUMNS.index(name)]


def test_the_same_pair_on_other_gpu_types() -> None:
    row = NeighbourTable(MEASUREMENTS).row("k80", ("resnet50", 32), ("lstm-lm", 20))
    assert _column(row, "nb_pair_p100") == pytest.approx(math.log(1.2))
    assert _column(row, "nb_pair_mean") == pytest.approx(math.log(1.2))
    assert math.isnan(_column(row, "nb_pair_k80"))  # the row's own GPU type
    assert math.isnan(_column(row, "nb_pair_v100"))


def test_an_unmeasured_batch_size_interpolates_in_log_batch_size() -> None:
    row = NeighbourTable(MEASUREMENTS).row("k80", ("resnet50", 32), ("lstm-lm", 20))
    # 32 lies halfway between 16 and 64 in log2: the mean of the logs of 1.5 and 3.0
    halfway = (math.log(1.5) + math.log(3.0)) / 2
    assert _column(row, "nb_own_batch") == pytest.approx(halfway)
    assert _column(row, "nb_victim_batches") == pytest.approx(halfway)
    assert math.isnan(_column(row, "nb_victim"))  # resnet50@32 was never measured on the K80
    reverse = NeighbourTable(MEASUREMENTS).row("k80", ("lstm-lm", 20), ("resnet50", 32))
    assert _column(reverse, "nb_other_batch") == pytest.approx((math.log(2.0) + math.log(4.0)) / 2)


def test_a_row_never_sees_its_own_measurement() -> None:
    table = NeighbourTable(MEASUREMENTS)
    row = table.row("k80", ("resnet50", 16), ("lstm-lm", 20))
    assert math.isnan(_column(row, "nb_victim"))  # its only partner is the pair itself
    assert _column(row, "nb_own_batch") == pytest.approx(math.log(3.0))  # batch 64, flat beyond
    assert _column(row, "nb_aggressor") == pytest.approx(math.log(3.0))  # lstm-lm's other victim


def test_the_direct_estimate_prefers_neighbouring_batch_sizes() -> None:
    table = NeighbourTable(MEASUREMENTS)
    rows = table.matrix([("k80", ("resnet50", 32), ("lstm-lm", 20)), ("k80", ("cyclegan", 1), ("a3c", 1))])
    direct = neighbours.direct_estimate(rows)
    assert direct[0] == pytest.approx((math.log(1.5) + math.log(3.0)) / 2)
    assert math.isnan(direct[1])


def test_beside_a_new_architecture_the_measured_job_speaks_for_the_pair() -> None:
    table = NeighbourTable(MEASUREMENTS)
    rows = table.matrix(
        [
            ("k80", ("cyclegan", 1), ("lstm-lm", 20)),  # new victim: lstm-lm's aggressor score
            ("k80", ("lstm-lm", 20), ("cyclegan", 1)),  # new co-runner: lstm-lm's victim score
            ("k80", ("resnet50", 16), ("lstm-lm", 20)),  # both measured: nb_additive exists instead
            ("k80", ("cyclegan", 1), ("a3c", 1)),  # neither measured
        ]
    )
    one_sided = neighbours.one_sided_estimate(rows)
    assert one_sided[0] == pytest.approx((math.log(1.5) + math.log(3.0)) / 2)
    assert one_sided[1] == pytest.approx((math.log(2.0) + math.log(4.0)) / 2)
    assert math.isnan(one_sided[2]) and not math.isnan(_column(list(rows[2]), "nb_additive"))
    assert math.isnan(one_sided[3])


def test_a_one_sided_estimate_enters_the_prior_blend_with_the_direct_weight() -> None:
    table = NeighbourTable(MEASUREMENTS)
    neighbour_columns = table.matrix([("k80", ("cyclegan", 1), ("lstm-lm", 20))])
    matrix = np.hstack([np.zeros((1, len(slowdown.GRAPH_COLUMNS))), neighbour_columns])
    residual, prior, law = np.array([0.2]), np.array([1.0]), slowdown.SlowdownPrior()
    without = prior + slowdown.UNVOUCHED_RESIDUAL_WEIGHT * residual  # within the bound
    one_sided = neighbours.one_sided_estimate(neighbour_columns)
    expected = (1 - slowdown.DIRECT_WEIGHT) * without + slowdown.DIRECT_WEIGHT * one_sided
    assert slowdown.blended(residual, matrix, prior, law) == pytest.approx(expected)


def test_a_new_architecture_gets_no_neighbours() -> None:
    row = NeighbourTable(MEASUREMENTS).row("k80", ("cyclegan", 1), ("a3c", 1))
    assert all(math.isnan(value) for value in row)


LAW = slowdown.SlowdownPrior(contention=0.4)


def _busy(gpu: str, model: str, batch: int) -> float:
    return roofline.estimate(
        catalog.lookup(model, batch), GPU_SPECS[gpu], "fp32", artifacts.load_roofline(artifacts.SHIPPED_DIR)
    ).busy


def _save_models(directory: Path) -> tuple[xgb.Booster, np.ndarray, np.ndarray]:
    """A tiny slowdown model with neighbour columns, its table, prior and a memory model in `directory`;
    the booster, its rows of slowdown.COLUMNS and their prior log slowdowns."""
    table = NeighbourTable(MEASUREMENTS)
    artifacts.save_neighbours(directory, table)
    queries = [(gpu, (a, batch_a), (b, batch_b)) for gpu, a, batch_a, b, batch_b, _ in MEASUREMENTS]
    jobs = [(design.job_row(catalog.lookup(*own), gpu), design.job_row(catalog.lookup(*other), gpu))
            for gpu, own, other in queries]  # fmt: skip
    demands = [(_busy(gpu, *own), _busy(gpu, *other), 0.0, 0.0) for gpu, own, other in queries]
    rows, prior = slowdown.tree_inputs(design.pair_matrix(jobs), np.array(demands), LAW)
    matrix = slowdown_fit.with_neighbours(rows, queries, table)
    target = np.array([value for *_, value in MEASUREMENTS])
    booster = slowdown_fit.fit_slowdown(
        matrix, slowdown.label(target) - prior, params=slowdown.PARAMS, rounds=5
    )
    assert booster.feature_names == list(slowdown.COLUMNS)
    artifacts.save_booster(directory, "slowdown", booster, {})
    artifacts.save_prior(directory, LAW, {})
    artifacts.save_memory(directory, MemoryModel(overhead_mib=0.0, activation_factor=0.0), {})
    return booster, matrix, prior


def test_the_table_round_trips_exactly(tmp_path: Path) -> None:
    table = NeighbourTable(MEASUREMENTS)
    path = artifacts.save_neighbours(tmp_path, table)
    assert artifacts.read_neighbours(path).measurements() == table.measurements()


def test_the_predictor_builds_the_neighbour_columns_it_was_trained_with(tmp_path: Path) -> None:
    booster, matrix, prior = _save_models(tmp_path)
    loaded = artifacts.load(tmp_path)
    assert loaded.neighbours is not None
    # An alias of a measured model finds its measurements under the catalog name.
    got = XGBoostPredictor(loaded).pairs([("k80", Workload("ResNet-50", 16), Workload("lstm-lm", 20))])[0]
    # Both rows have a neighbour estimate (the other batch size): the prior with the residual, blended.
    residual = booster.inplace_predict(matrix[:2])
    expected = slowdown.from_raw(slowdown.blended(residual, matrix[:2], prior[:2], LAW))
    assert (got.slowdown_a, got.slowdown_b) == pytest.approx(tuple(expected), rel=1e-5)


def test_a_slowdown_model_with_neighbour_columns_needs_its_table(tmp_path: Path) -> None:
    _save_models(tmp_path)
    (tmp_path / artifacts.NEIGHBOURS_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=r"slowdown_neighbours\.csv"):
        artifacts.load(tmp_path)
