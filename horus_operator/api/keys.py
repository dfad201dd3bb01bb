"""Names shared by everything the operator writes: the DLJob resource, and the labels and annotations
that link a pod to its DLJob and its GPU assignment (the API server is the operator's only memory)."""

from __future__ import annotations

GROUP = "horus.dev"
PREFIX = f"{GROUP}/"  # of every label and annotation Horus writes
VERSION = "v1alpha1"
PLURAL = "dljobs"
KIND = "DLJob"
API_VERSION = f"{GROUP}/{VERSION}"
GPUNODE_PLURAL = "gpunodes"  # the agent's per-node telemetry (cluster-scoped, named after the node)
GPUNODE_KIND = "GPUNode"

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

# Dynamic Resource Allocation (resource.k8s.io/v1) and NVIDIA's DRA driver for GPUs (names as in the
# driver's source: its driver name, DeviceClass and attribute domain are all "gpu.nvidia.com").
DRA_GROUP = "resource.k8s.io"
DRA_VERSION = "v1"
DRA_API_VERSION = f"{DRA_GROUP}/{DRA_VERSION}"
RESOURCE_SLICE_PLURAL = "resourceslices"
GPU_DRIVER = "gpu.nvidia.com"
GPU_DEVICE_CLASS = "gpu.nvidia.com"
GPU_DEVICE_TYPE = "gpu"  # the driver's `type` attribute of a whole GPU ("mig" for MIG devices)
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"  # the driver's opaque claim parameters
GPU_CONFIG_KIND = "GpuConfig"
LABEL_CLAIM_NODE = "horus.dev/node"  # on the ResourceClaims Horus owns: the node of their GPU
ANNOTATION_CLAIM_UUID = "horus.dev/gpu-uuid"  # on Horus's claims: the GPU they select
ANNOTATION_SHARING = "horus.dev/sharing"  # on Horus's claims: the sharing config they were created with
ANNOTATION_DESIRED_SHARING = "horus.dev/desired-sharing"  # the config the claim's tenants now call for
ANNOTATION_BINDING = "horus.dev/binding"  # on pods: env or dra
ANNOTATION_CLAIMS = "horus.dev/claims"  # on dra pods: the claims they reference, in GPU order

# Written by a training job on its own pod: its progress in steps per second (float), read by the agent.
ANNOTATION_PROGRESS = "horus.dev/progress-steps-per-second"
# On the ConfigMaps the operator keeps its datasets in (the correction, the observed co-locations).
LABEL_DATASET = "horus.dev/dataset"
# On the GPUNode and ResourceSlices the agent writes: their node.
LABEL_NODE = "horus.dev/node"
# GPU Feature Discovery's mark of a node with NVIDIA GPUs: the nodes an agent serves.
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
