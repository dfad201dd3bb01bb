"""The pod route: pods of any controller (a Job's, a PyTorchJob's, one made by hand) placed by Horus.

`admission` (pure) judges and changes a pod as it is created (the webhook `handlers` serves, through
kopf): it refuses one whose annotations or spec Horus cannot run, naming the field, and holds the others
at the scheduling gate `horus.dev/placement`, their containers reading `NVIDIA_VISIBLE_DEVICES` from
the pod's own annotation (env binding) or referencing ResourceClaims of their own, named at admission
(dra binding). `release` (pure) reads a managed pod and builds the one patch that releases it to the
GPUs the scheduling cycle chose. `route` keeps the managed pods, hands the gated ones to the scheduling
loop as waiting requests, creates a DRA-bound pod's claims for its GPUs, and releases them; released
pods hold their GPUs in every snapshot, as a DLJob's pods do.
"""
