"""Prediction: model-graph features, GPU utilization / memory and co-location slowdown models.

Contract: pure computation over data files shipped in this package. No Kubernetes, no network, no
subprocesses, and nothing here imports another part of `horus_operator`. The operator and the simulator
call the same `Predictor`.
"""

from horus_operator.prediction.predictor import load_predictor

__all__ = ["load_predictor"]
