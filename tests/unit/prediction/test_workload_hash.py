"""A `Workload` keeps the hash of the fields it compares (it keys every cache of placement)."""

from __future__ import annotations

import dataclasses
import pickle

from horus_operator.prediction.api import Workload


def test_equal_workloads_hash_alike_and_a_compared_field_changes_it() -> None:
    workload = Workload("resnet50", 64)
    assert hash(workload) == hash(Workload("resnet50", 64, features={"flops": 1.0}))  # not compared
    assert hash(dataclasses.replace(workload, busy=0.4)) == hash(Workload("resnet50", 64, busy=0.4))
    assert workload != dataclasses.replace(workload, busy=0.4)


def test_unpickled_it_hashes_again_as_its_process_would() -> None:
    """Another process may hash strings with another seed: a kept hash must not travel."""
    workload = Workload("resnet50", 64, precision="amp")
    object.__setattr__(workload, "_hash", 12345)  # what a process with another seed might have kept
    copy = pickle.loads(pickle.dumps(workload))
    assert copy == workload and hash(copy) == hash(Workload("resnet50", 64, precision="amp"))
