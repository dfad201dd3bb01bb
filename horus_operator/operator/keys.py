"""Names shared by everything the operator writes: the DLJob resource, and the labels and annotations
that link a pod to its DLJob and its GPU assignment (the API server is the operator's only memory)."""

from __future__ import annotations

GROUP = "horus.dev"
VERSION = "v1alpha1"
PLURAL = "dljobs"
KIND = "DLJob"
API_VERSION = f"{GROUP}/{VERSION}"

# On pods Horus creates.
LABEL_JOB = "horus.dev/dljob"  # the DLJob's name (same namespace)
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "horus"
ANNOTATION_ATTEMPT = "horus.dev/attempt"
ANNOTATION_NODE = "horus.dev/node"
ANNOTATION_GPUS = "horus.dev/gpus"  # "0,1": indices on the node
ANNOTATION_GPU_UUIDS = "horus.dev/gpu-uuids"  # "GPU-…,GPU-…" when known
ANNOTATION_REQUEST = "horus.dev/request"  # JSON of the job request, so a pod alone says what runs on a GPU
ANNOTATION_PREDICTED = "horus.dev/predicted"  # JSON {utilization, memoryMiB, slowdown}
ANNOTATION_COLOCATED = "horus.dev/colocated-with"  # "ns/a,ns/b"

# GPU Feature Discovery node labels.
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"  # MiB per GPU
LABEL_HOSTNAME = "kubernetes.io/hostname"

# kwok stage annotations (fake nodes only; see docs/local-cluster.md).
KWOK_COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
KWOK_FAIL_DELAY = "pod-fail.stage.kwok.x-k8s.io/delay"
