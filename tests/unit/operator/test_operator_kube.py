"""The operator's API adapter answers in the project's own exceptions: callers never see the client's."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import Any, NoReturn

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from horus_operator.operator import apierrors, kube


def _answering(status: int, reason: str) -> Any:
    def call(*_: Any, **__: Any) -> NoReturn:
        raise ApiException(status=status, reason=reason)

    return call


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (404, apierrors.NotFound),
        (409, apierrors.Conflict),
        (422, apierrors.Rejected),
        (403, apierrors.Rejected),
        (503, apierrors.ApiError),
    ],
)
def test_an_error_answer_becomes_ours_with_its_status_and_reason(
    status: int, kind: type[apierrors.ApiError]
) -> None:
    with pytest.raises(kind) as raised:
        kube._json(_answering(status, "Why"))
    assert type(raised.value) is kind
    assert (raised.value.status, raised.value.reason) == (status, "Why")


def test_an_unreachable_api_server_is_api_unavailable_naming_the_transport_error() -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused
    configuration.retries = False
    adapter = kube.Kube(kubernetes.client.ApiClient(configuration), workers=1)
    try:
        with pytest.raises(apierrors.ApiUnavailable) as raised:
            adapter.read_lease("horus-system", "horus-operator")
        with pytest.raises(apierrors.ApiUnavailable):
            asyncio.run(adapter.list_nodes())
    finally:
        adapter.close()
    assert "Error" in raised.value.cause  # e.g. MaxRetryError: urllib3's, not an OSError


def test_repeated_writes_are_successes() -> None:
    """Creating a pod that exists returns the stored one; deleting one that is gone does nothing."""

    class Core:
        def create_namespaced_pod(self, *_: Any, **__: Any) -> NoReturn:
            raise ApiException(status=409, reason="AlreadyExists")

        def read_namespaced_pod(self, *_: Any, **__: Any) -> Any:
            return type("Response", (), {"data": b'{"metadata": {"name": "p"}}'})()

        def delete_namespaced_pod(self, *_: Any, **__: Any) -> NoReturn:
            raise ApiException(status=404, reason="NotFound")

    adapter = kube.Kube(kubernetes.client.ApiClient(kubernetes.client.Configuration()), workers=1)
    adapter._core = Core()  # type: ignore[assignment]
    try:
        pod = {"metadata": {"namespace": "ns", "name": "p"}}
        assert asyncio.run(adapter.create_pod(pod)) == ({"metadata": {"name": "p"}}, False)
        asyncio.run(adapter.delete_pod("ns", "p"))
    finally:
        adapter.close()


def test_a_request_on_a_connection_that_never_answers_fails_instead_of_waiting_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A server that accepts and reads but never answers: what a stalled connection looks like.
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.getsockname()[1]}"
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", (1.0, 0.2))
    started = time.monotonic()
    try:
        with pytest.raises(apierrors.ApiUnavailable):
            kube._json(kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration)).list_node)
    finally:
        server.close()
        for connection in held:
            connection.close()
    assert time.monotonic() - started < 10  # the client's retries included


def test_claims_are_listed_in_the_operators_namespace_or_in_all() -> None:
    """PersistentVolumeClaims (jobs/volumes.py): a namespaced operator lists only its namespace's."""
    asked: list[tuple[str, tuple[Any, ...]]] = []

    def listing(name: str) -> Any:
        def call(*args: Any, **_: Any) -> Any:
            asked.append((name, args))
            return type("Response", (), {"data": b'{"items": [{"metadata": {"name": "data"}}]}'})()

        return call

    class Core:
        list_namespaced_persistent_volume_claim = staticmethod(listing("namespaced"))
        list_persistent_volume_claim_for_all_namespaces = staticmethod(listing("all"))

    adapter = kube.Kube(kubernetes.client.ApiClient(kubernetes.client.Configuration()), workers=1)
    adapter._core = Core()  # type: ignore[assignment]
    try:
        assert asyncio.run(adapter.list_volume_claims("team-a")) == [{"metadata": {"name": "data"}}]
        asyncio.run(adapter.list_volume_claims(None))
    finally:
        adapter.close()
    assert asked == [("namespaced", ("team-a",)), ("all", ())]
