"""Operator: the kopf process that watches DLJobs, places their pods on GPUs and reports in their status
(`horus run`).

Contract: a shell around `placement` and `prediction`. Rooms by concern:
- here: the adapter (`kube.py`, `apierrors.py`, `leader.py`), the cache and its snapshot
  (`cache.py`, `cluster_view.py`), the scheduling loop (`loop.py`), the one status writer
  (`reports.py`, with `status.py` saying who owns which field), the Prometheus metrics (`metrics.py`:
  the registry; the others tell it what happened), the wiring (`entry.py`, `handlers.py`,
  `runtime.py`, `config.py`);
- `jobs/`: one DLJob's decisions (workload, template, next state, its pod);
- `dra/`: ResourceClaims and ResourceSlices under DRA binding;
- `moves/`: moving running jobs;
- `telemetry/`: the agents' GPUNodes, observed status, the observed dataset and the online correction.
What each module may touch:
- `kube.py` is the only module that talks to the API server: it alone imports the Kubernetes client,
  and its callers see plain dicts, its `Lease`, and `apierrors` (never the client's exceptions).
- `entry.py`, `handlers.py`, `dra/handlers.py` and `telemetry/handlers.py` are the only modules that
  import kopf: they feed watch events to the cache and hand the settings (`config.OperatorConfig`, built
  once by `horus run`) to `runtime.build`, which wires everything on one injected clock.
- The decision modules (`jobs.reconcile`, `jobs.refusals`, `jobs.volumes`, `jobs.jobspec`, `jobs.pods`,
  `jobs.template`, `jobs.tenancy`, `dra.claims`, `dra.slices`, `moves.migration`, `telemetry.gpunodes`,
  `telemetry.observed`, `cluster_view`, …) are pure: API dicts in, decisions out, the time passed in;
  they import no adapter, no kopf, no asyncio, no metrics.
`.importlinter` checks these rules (`make lint`).
"""
