"""The health endpoint's body (kopf serves the probe's dict at --liveness): a replica that does not lead
is alive, and says why it does not lead."""

from __future__ import annotations

from types import SimpleNamespace

from horus_operator.operator import handlers
from horus_operator.operator.leader import LeaderElector, LeaseConfig, namespace_missing


def _memo(elector: LeaderElector) -> SimpleNamespace:
    return SimpleNamespace(runtime=SimpleNamespace(tasks=[], elector=elector, cache=SimpleNamespace(jobs={})))


def test_a_replica_without_its_lease_namespace_is_alive_and_says_which_namespace_is_missing() -> None:
    config = LeaseConfig(namespace="horus-system")
    elector = LeaderElector(kube=None, config=config)  # type: ignore[arg-type]
    elector._report(namespace_missing(config))
    body = handlers.scheduling_alive(memo=_memo(elector))  # type: ignore[arg-type]
    assert body["leading"] is False
    assert "namespace horus-system does not exist" in body["notLeading"]


def test_the_leader_has_no_reason_not_to_lead() -> None:
    elector = LeaderElector(kube=None, config=LeaseConfig(namespace="horus-system"))  # type: ignore[arg-type]
    elector.not_leading = None
    elector.leading.set()
    body = handlers.scheduling_alive(memo=_memo(elector))  # type: ignore[arg-type]
    assert body == {"leading": True, "notLeading": None, "jobs": 0}
