"""The local control plane: compiled etcd-backed kube-apiserver, kube-controller-manager,
kube-scheduler and kwok running as plain loopback processes, with fake GPU nodes.

A shell around the core: it drives processes and the compiled kubectl (subprocess), checks health
over HTTPS (urllib), and never imports the Kubernetes client libraries or kopf.

    from horus_operator import devcluster
    cluster = devcluster.LocalCluster(path, pools=[devcluster.GpuNodePool(count=2)]).up()
    cluster.kubectl("get", "nodes")        # CompletedProcess[str]
    cluster.kubeconfig                     # Path of the admin kubeconfig
    cluster.add_nodes(devcluster.GpuNodePool(count=100, name_prefix="bench"))
    cluster.down()
"""

from horus_operator.devcluster.binaries import ControlPlane, ControlPlaneMissingError, kubectl_path
from horus_operator.devcluster.cluster import ClusterError, ClusterStatus, LocalCluster, default_state_dir
from horus_operator.devcluster.nodes import GPU_RESOURCE, GpuNodePool, gfd_labels

__all__ = [
    "GPU_RESOURCE",
    "ClusterError",
    "ClusterStatus",
    "ControlPlane",
    "ControlPlaneMissingError",
    "GpuNodePool",
    "LocalCluster",
    "default_state_dir",
    "gfd_labels",
    "kubectl_path",
]
