"""The cache keeps `all_pods` between changes; after any sequence of watch events and resyncs it equals
the list derived afresh from the jobs and pods it holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.api import keys
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods

JOBS = ("a", "b", "c")
UIDS = ("uid-1", "uid-2")  # a DLJob deleted and made again under its name gets another uid


def job(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid, "resourceVersion": "1"}, "spec": {}}


def pod(name: str, attempt: int, owner_uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": f"{name}-{attempt}",
            "uid": f"p-{name}-{attempt}",
            "resourceVersion": "1",
            "labels": {keys.LABEL_JOB: name},
            "ownerReferences": [pods.owner_reference(name, owner_uid)],
        },
        "status": {"phase": "Running"},
    }


EVENTS = st.one_of(
    st.tuples(st.just("put_job"), st.sampled_from(JOBS), st.sampled_from(UIDS)),
    st.tuples(st.just("drop_job"), st.sampled_from(JOBS), st.sampled_from(UIDS)),
    st.tuples(st.just("put_pod"), st.sampled_from(JOBS), st.sampled_from(UIDS), st.integers(0, 2)),
    st.tuples(st.just("drop_pod"), st.sampled_from(JOBS), st.sampled_from(UIDS), st.integers(0, 2)),
    st.tuples(st.just("resync")),
)


def _apply(cache: ClusterCache, event: tuple[Any, ...]) -> None:
    match event:
        case ("put_job", name, uid):
            cache.put_job(job(name, uid))
        case ("drop_job", name, uid):
            cache.drop_job(job(name, uid))
        case ("put_pod", name, uid, attempt):
            cache.put_pod(pod(name, attempt, uid))
        case ("drop_pod", name, uid, attempt):
            cache.drop_pod(pod(name, attempt, uid))
        case ("resync",):  # the listing shows what the cache holds, a job short
            jobs = [body for key, body in sorted(cache.jobs.items()) if key != "ns/a"]
            with cache.resyncing():
                cache.replace_all(jobs=jobs, pods=[], nodes=[])


@settings(max_examples=150, deadline=None)
@given(st.lists(EVENTS, max_size=25))
def test_the_kept_pod_list_equals_one_derived_afresh(events: list[tuple[Any, ...]]) -> None:
    cache = ClusterCache()
    for event in events:
        _apply(cache, event)
        fresh = [p for key in cache.pods for p in cache.job_pods(key)]
        assert cache.all_pods() == fresh


def test_callers_get_a_list_of_their_own() -> None:
    cache = ClusterCache()
    cache.put_job(job("a", "uid-1"))
    cache.put_pod(pod("a", 0, "uid-1"))

    cache.all_pods().clear()

    assert len(cache.all_pods()) == 1
