"""What the operator's API adapter (`kube.py`) raises: the API server's answers as the project's own
exceptions, so no other module needs the Kubernetes client to tell a conflict from an outage."""

from __future__ import annotations

import json
from dataclasses import dataclass

MESSAGE_LIMIT = 500  # characters of the API server's message a status or an Event repeats


class ApiError(Exception):
    """The API server answered with an error status. `reason` is its one-line reason phrase; `body` the
    message it gave (for a refused object, what the user must fix)."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"{status} {reason}")
        self.status, self.reason, self.body = status, reason, body


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: the object exists already, or was written since it was read (a stale resourceVersion)."""


class Rejected(ApiError):
    """400, 403 or 422: the request itself is refused; repeating it changes nothing."""


class NamespaceMissing(NotFound):
    """A create in a namespace that does not exist: the one case the API server answers a create 404."""

    def __init__(self, namespace: str) -> None:
        super().__init__(404, f"namespace {namespace} not found")
        self.namespace = namespace


class ApiUnavailable(Exception):
    """No answer at all (connection refused, reset, timed out); `cause` names the transport's error."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"API server unreachable ({cause})")
        self.cause = cause


def of_status(status: int, reason: str, body: str = "") -> ApiError:
    """The exception for an answer with `status`."""
    kind = {404: NotFound, 409: Conflict, 400: Rejected, 403: Rejected, 422: Rejected}.get(status, ApiError)
    return kind(status, reason, body)


@dataclass(frozen=True)
class Cause:
    """One complaint of a refusal's Status (`details.causes[]`) that names a field of the object."""

    field: str
    message: str


def explained(body: str) -> tuple[str, tuple[Cause, ...]]:
    """What a refusal's body says, never the body itself: the Status's `message` on one line ("" where
    it gives none) and its causes that name a field. A body that is no JSON (a proxy's error page) is
    its first `MESSAGE_LIMIT` characters on one line."""
    try:
        status = json.loads(body)
    except ValueError:
        return _one_line(body), ()
    if not isinstance(status, dict):
        return "", ()
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    named = tuple(
        Cause(str(c["field"]), _one_line(str(c.get("message") or "")))
        for c in causes or ()
        if isinstance(c, dict) and c.get("field")
    )
    return _one_line(str(status.get("message") or "")), named


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"
