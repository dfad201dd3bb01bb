"""Evaluate a trained XGBoost regression model from its JSON file with numpy alone.

Importing xgboost costs seconds (it pulls in scipy and pandas); the operator and the simulator only
need to add up tree leaves. All trees are flattened into one node table and walked together, one
vectorised step per tree level. Results match `xgboost.Booster.inplace_predict` (float32 splits,
missing values follow each node's default direction); tests check that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SUPPORTED_OBJECTIVES = frozenset({"reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror"})


@dataclass(frozen=True)
class TreeEnsemble:
    feature_names: tuple[str, ...]
    base_score: float
    roots: np.ndarray  # node index of each tree's root
    left: np.ndarray  # child node indices; -1 marks a leaf
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray  # float32; go left when value < threshold
    default_left: np.ndarray  # bool: where a missing value goes
    leaf_value: np.ndarray  # float32, the leaf's contribution (0 for inner nodes)
    depth: int

    @classmethod
    def from_json(cls, path: str | Path) -> TreeEnsemble:
        learner = json.loads(Path(path).read_text())["learner"]
        objective = learner["objective"]["name"]
        if objective not in SUPPORTED_OBJECTIVES:
            raise ValueError(f"{path}: objective {objective!r} is not an identity-link regression")
        trees = learner["gradient_booster"]["model"]["trees"]
        offsets = np.cumsum([0] + [len(tree["left_children"]) for tree in trees])
        left = np.concatenate(
            [_children(tree, "left_children", offset) for tree, offset in zip(trees, offsets, strict=False)]
        )
        right = np.concatenate(
            [_children(tree, "right_children", offset) for tree, offset in zip(trees, offsets, strict=False)]
        )
        conditions = np.concatenate(
            [np.asarray(tree["split_conditions"], dtype=np.float32) for tree in trees]
        )
        leaf = left < 0
        return cls(
            feature_names=tuple(learner.get("feature_names", [])),
            base_score=_base_score(learner["learner_model_param"]["base_score"]),
            roots=offsets[:-1].astype(np.int64),
            left=left,
            right=right,
            feature=np.concatenate([np.asarray(tree["split_indices"], dtype=np.int64) for tree in trees]),
            threshold=conditions,
            default_left=np.concatenate([np.asarray(tree["default_left"], dtype=bool) for tree in trees]),
            leaf_value=np.where(leaf, conditions, np.float32(0.0)).astype(np.float32),
            depth=max(_depth(tree) for tree in trees),
        )

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """Raw predictions (base score + sum of leaves) for rows of features."""
        values = np.asarray(matrix, dtype=np.float32)
        nodes = np.broadcast_to(self.roots, (len(values), len(self.roots))).copy()
        rows = np.arange(len(values))[:, None]
        for _ in range(self.depth):
            inner = self.left[nodes] >= 0
            if not inner.any():
                break
            value = values[rows, self.feature[nodes]]
            go_left = np.where(np.isnan(value), self.default_left[nodes], value < self.threshold[nodes])
            nodes = np.where(inner, np.where(go_left, self.left[nodes], self.right[nodes]), nodes)
        return self.base_score + self.leaf_value[nodes].sum(axis=1, dtype=np.float32).astype(np.float64)


def _children(tree: dict[str, Any], key: str, offset: int) -> np.ndarray:
    children = np.asarray(tree[key], dtype=np.int64)
    return np.where(children >= 0, children + offset, -1)


def _depth(tree: dict[str, Any]) -> int:
    left, right = tree["left_children"], tree["right_children"]
    depth, frontier = 0, [0]
    while any(left[node] >= 0 for node in frontier):
        frontier = [child for node in frontier if left[node] >= 0 for child in (left[node], right[node])]
        depth += 1
    return depth


def _base_score(text: str) -> float:
    # xgboost 2 writes "5E-1", xgboost 3 "[5E-1]"
    return float(str(text).strip("[]"))
