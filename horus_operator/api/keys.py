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

# The pod route (docs/operator.md, "Pods of other controllers"): a pod opts in with the label (or its
# namespace does, for pods that name their model), says what the DLJob spec says in annotations
# (`pod_spec.py`), is held by the scheduling gate until Horus places it, and reads its GPUs from the
# visible-devices annotation through the downward API.
LABEL_MANAGED = "horus.dev/managed"  # "true" on a pod (or a namespace) whose GPU pods Horus places
SCHEDULING_GATE = "horus.dev/placement"
ANNOTATION_VISIBLE_DEVICES = "horus.dev/visible-devices"  # NVIDIA_VISIBLE_DEVICES, written at release
CONDITION_PLACED = "horus.dev/Placed"  # the pod condition that says why a gated pod waits
# The pod condition (pods/status: the operator's to write, not the pod owner's) that Horus sets just before
# it releases a pod, its message the digest of the placement record it writes: a record that no longer
# matches was not written by Horus (`podroute/release.py`).
CONDITION_RELEASED = "horus.dev/Released"
ANNOTATION_MODEL = "horus.dev/model"  # catalog name, onnx:<configmap>[/<key>] or huggingface:<…>
ANNOTATION_BATCH_SIZE = "horus.dev/batch-size"
ANNOTATION_PRECISION = "horus.dev/precision"
ANNOTATION_FRAMEWORK = "horus.dev/framework"  # pytorch | tensorflow
ANNOTATION_MAX_SLOWDOWN = "horus.dev/max-slowdown"
ANNOTATION_GPU_COUNT = "horus.dev/gpu-count"  # `gpus` is the placement record (indices), so another name
ANNOTATION_PRIORITY = "horus.dev/priority"
ANNOTATION_TOTAL_STEPS = "horus.dev/total-steps"
ANNOTATION_INPUT_SHAPE = "horus.dev/input-shape"  # "3x32x32"
ANNOTATION_SEQUENCE_LENGTH = "horus.dev/sequence-length"  # with huggingface:
ANNOTATION_OPTIMIZER = "horus.dev/optimizer"
ANNOTATION_LORA_RANK = "horus.dev/lora-rank"
ANNOTATION_LORA_TARGETS = "horus.dev/lora-target-modules"  # "q_proj,v_proj"
ANNOTATION_GRADIENT_CHECKPOINTING = "horus.dev/gradient-checkpointing"  # "true"
ANNOTATION_WEIGHTS_DTYPE = "horus.dev/weights-dtype"  # bf16 | fp16 | fp32 | nf4
ANNOTATION_ATTENTION = "horus.dev/attention"  # sdpa | eager
ANNOTATION_OPTIMIZER_IN_BACKWARD = "horus.dev/optimizer-in-backward"  # "true"
ANNOTATION_LOSS_CHUNKS = "horus.dev/loss-chunks"  # "8"
ANNOTATION_ACTIVATION_OFFLOADING = "horus.dev/activation-offloading"  # "true"
ANNOTATION_SHARDING = "horus.dev/sharding"  # none | fsdp | zero2
ANNOTATION_LORA_DROPOUT = "horus.dev/lora-dropout"  # "0.05"
ANNOTATION_GRADIENT_ACCUMULATION_STEPS = "horus.dev/gradient-accumulation-steps"  # "4"
ANNOTATION_SYNC_EACH_BATCH = "horus.dev/sync-each-batch"  # "true"
# Gangs (`pod_spec.group`): pods placed all or none. A group named by hand, or a workload's own label.
ANNOTATION_GROUP = "horus.dev/group"
ANNOTATION_GROUP_SIZE = "horus.dev/group-size"  # its pods in all (a PyTorchJob's or JobSet's too)
LABEL_PYTORCHJOB = "training.kubeflow.org/job-name"  # Kubeflow's training operator, on its pods
LABEL_JOBSET = "jobset.sigs.k8s.io/jobset-name"  # JobSet's controller, on its pods

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
ANNOTATION_BINDING = "horus.dev/binding"  # on pods: env, dra or reserve (a routed pod asks; Horus records)
ANNOTATION_CLAIMS = "horus.dev/claims"  # on dra pods: the claims they reference, in GPU order

# `reserve` binding (operator/binding/reserve.py): a reservation pod per Horus GPU slot, asking the device
# plugin for one GPU so the kubelet's books hold it; it reports the GPU it was given.
RESERVATION_NAMESPACE = "horus-reservation"
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"
LABEL_RESERVATION_NODE = "horus.dev/reservation-node"  # on a reservation pod: the node of its slot
ANNOTATION_RESERVATION_SLOT = "horus.dev/reservation-slot"  # on a reservation pod: its slot's GPU index
# Written by the reservation pod itself (`horus reserve`, or the fake agent on a local cluster): the UUID
# of the GPU the device plugin gave it. Outside horus.dev/, which only the operator may write on a pod
# (manifests/pod-records.yaml); only the reservation's ServiceAccount may patch pods of its namespace.
ANNOTATION_RESERVED_GPU = "reservation.horus.dev/gpu-uuid"

# Written by a training job on its own pod: its progress in steps per second (float), read by the agent.
ANNOTATION_PROGRESS = "horus.dev/progress-steps-per-second"
# On the ConfigMaps the operator keeps its datasets in (the correction, the observed co-locations).
LABEL_DATASET = "horus.dev/dataset"
# On the GPUNode and ResourceSlices the agent writes: their node.
LABEL_NODE = "horus.dev/node"
# GPU Feature Discovery's mark of a node with NVIDIA GPUs: the nodes an agent serves.
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
