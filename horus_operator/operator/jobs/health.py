"""A DLJob's health as GitOps tools read it: the conditions `Ready`, `Reconciling` and `Stalled`.

Pure. Flux (kstatus, sigs.k8s.io/cli-utils) decides a custom resource's health from these alone, after
`status.observedGeneration`: `Reconciling` True is InProgress, `Stalled` True is Failed, `Ready` True is
Current; a resource with none of them is Current, which is what every DLJob was before they were written
(so `wait: true` passed at once and a failed job never failed a pipeline). Argo CD reads them through
`manifests/argocd/dljob-health.lua`. They stand beside `Scheduled`, `Running`, `Complete` and `Failed`,
which are unchanged. Per phase (docs/operator.md, "Health for GitOps tools"):

| phase | Ready | Reconciling | Stalled | kstatus | Argo CD |
|---|---|---|---|---|---|
| Queued, Scheduled | False | True | False | InProgress | Progressing |
| Running, Succeeded | True | False | False | Current | Healthy |
| Failed | False | False | True | Failed | Degraded |

Each condition's reason is the phase, or for Failed the failure's reason (`BackoffLimitExceeded`,
`InvalidSpec`, `Unsatisfiable`, ...); the True ones and Ready carry the status message.
"""

from __future__ import annotations

READY, RECONCILING, STALLED = "Ready", "Reconciling", "Stalled"
TYPES = (READY, RECONCILING, STALLED)

_PROGRESSING = frozenset({"Queued", "Scheduled"})
_DONE = frozenset({"Running", "Succeeded"})


def conditions(phase: str, reason: str, message: str) -> dict[str, tuple[str, str, str]]:
    """The three conditions (type -> status, reason, message) of a job in `phase`. `reason` is the
    phase's, or for Failed the failure's; `message` the status message."""
    if phase in _PROGRESSING:
        return {
            READY: ("False", reason, message),
            RECONCILING: ("True", reason, message),
            STALLED: ("False", reason, ""),
        }
    if phase in _DONE:
        return {
            READY: ("True", reason, message),
            RECONCILING: ("False", reason, ""),
            STALLED: ("False", reason, ""),
        }
    if phase == "Failed":
        return {
            READY: ("False", reason, message),
            RECONCILING: ("False", reason, ""),
            STALLED: ("True", reason, message),
        }
    raise ValueError(f"no health for phase {phase!r}")
