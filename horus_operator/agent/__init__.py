"""Agent: the per-node GPU telemetry daemon (`horus agent`).

Contract: samples the node's GPUs through an `NvmlBackend` (real NVML, or a fake one driven by the pods
Horus placed on the node), aggregates the samples over a publish window, and publishes the summary as the
node's `GPUNode` custom resource (group `horus.dev`) and as Prometheus metrics. Only `kube.py` talks to
the API server and only `nvml.py` imports pynvml; everything else is pure and takes its clock as an
argument. The agent never crashes on NVML or API errors: it reports GPUs unavailable and backs off.
Depends on nothing else of `horus_operator` (the operator reads the GPUNode by its documented schema).
"""
