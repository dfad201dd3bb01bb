"""The cache finds its DRA-bound pods without walking every job's pods; after any sequence of watch events
and resyncs it finds exactly the DRA-bound ones of `all_pods`."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.api import keys
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods

JOBS = ("a", "b", "c")
UIDS = ("uid-1", "uid-2")  # a DLJob deleted and made again under its name gets another uid
BINDINGS = ("env", "dra")


def job(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid, "resourceVersion": "1"}, "spec": {}}


def pod(name: str, attempt: int, owner_uid: str, binding: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": f"{name}-{attempt}",
            "uid": f"p-{name}-{attempt}",
            "resourceVersion": "1",
            "labels": {keys.LABEL_JOB: name},
            "annotations": {keys.ANNOTATION_BINDING: binding},
            "ownerReferences": [pods.owner_reference(name, owner_uid)],
        },
        "status": {"phase": "Running"},
    }


POD = (st.sampled_from(JOBS), st.sampled_from(UIDS), st.integers(0, 2), st.sampled_from(BINDINGS))
EVENTS = st.one_of(
    st.tuples(st.just("put_job"), st.sampled_from(JOBS), st.sampled_from(UIDS)),
    st.tuples(st.just("drop_job"), st.sampled_from(JOBS), st.sampled_from(UIDS)),
    st.tuples(st.just("put_pod"), *POD),
    st.tuples(st.just("drop_pod"), *POD),
    st.tuples(st.just("resync"), st.sampled_from(JOBS)),
)


class Cluster:
    """The cache, and the bodies the API server would list."""

    def __init__(self) -> None:
        self.cache = ClusterCache()
        self.pods: dict[str, dict[str, Any]] = {}

    def apply(self, event: tuple[Any, ...]) -> None:
        match event:
            case ("put_job", name, uid):
                self.cache.put_job(job(name, uid))
            case ("drop_job", name, uid):
                self.cache.drop_job(job(name, uid))
            case ("put_pod", name, uid, attempt, binding):
                self.pods[f"{name}-{attempt}"] = body = pod(name, attempt, uid, binding)
                self.cache.put_pod(body)
            case ("drop_pod", name, uid, attempt, binding):
                self.pods.pop(f"{name}-{attempt}", None)
                self.cache.drop_pod(pod(name, attempt, uid, binding))
            case ("resync", missing):  # the listings show what the cache holds, a job and its pods short
                jobs = [body for key, body in sorted(self.cache.jobs.items()) if key != f"ns/{missing}"]
                listed = [
                    body
                    for body in self.pods.values()
                    if body["metadata"]["labels"][keys.LABEL_JOB] != missing
                ]
                with self.cache.resyncing():
                    self.cache.replace_all(jobs=jobs, pods=listed, nodes=[])


def _names(views: list[pods.PodView]) -> list[tuple[str, str]]:
    return sorted((view.job_key, view.name) for view in views)


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENTS, max_size=25))
def test_the_dra_pods_are_the_dra_bound_of_all_pods(events: list[tuple[Any, ...]]) -> None:
    cluster = Cluster()
    for event in events:
        cluster.apply(event)
        every = [view for view in cluster.cache.all_pods() if view.binding == "dra"]
        assert _names(cluster.cache.dra_pods()) == _names(every)
