"""Placement: cluster/GPU state types and the scheduling policies.

Contract: pure and deterministic. A policy reads an immutable `ClusterSnapshot` and a queue and returns
assignments; it never mutates its inputs, never reads a clock or global RNG (both are injected), and
imports nothing of Kubernetes. Depends only on `horus_operator.prediction`.
"""
