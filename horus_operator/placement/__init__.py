"""Placement: cluster/GPU state types, the scheduling policies, and the one scheduling cycle
(`cycle.py`: queue order, feasibility, cooldowns, policy calls until settled) that the operator and the
simulator both run.

Contract: pure and deterministic. A policy reads an immutable `ClusterSnapshot` and a queue and returns
assignments; it never mutates its inputs, never reads a clock or global RNG (both are injected), and
imports nothing of Kubernetes. Depends only on `horus_operator.prediction`.
"""
