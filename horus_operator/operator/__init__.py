"""Operator: the kopf process that watches DLJobs, places their pods on GPUs and reports in their status
(`horus run`).

Contract: a shell around `placement` and `prediction`. What each module may touch:
- `kube.py` is the only module that talks to the API server: it alone imports the Kubernetes client,
  and its callers see plain dicts, its `Lease`, and `apierrors` (never the client's exceptions).
- `entry.py`, `handlers.py` and `observed_handlers.py` are the only modules that import kopf: they feed
  watch events to the cache and hand the settings (`config.OperatorConfig`, built once by `horus run`)
  to `runtime.build`, which wires everything on one injected clock.
- `status.py` is the one writer of DLJob status; `loop.py` decides and places, `observing.py` writes
  observed telemetry; both write through it.
- Everything else reaches the API server only through a `kube.Kube` it is given (`leader`,
  `observed_store`, the two above). The decision modules (`reconcile`, `jobspec`, `pods`, `cluster_view`,
  `observed`, `telemetry`, `feasibility`) are pure: API dicts in, decisions out, the time passed in.
`.importlinter` checks the import rules (`make lint`).
"""
