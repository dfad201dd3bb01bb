from agent_builders import gpu, pod, process, sample

from horus_operator.agent import gpunode, summary


def test_status_lists_each_gpu_with_its_pods_and_node_totals() -> None:
    node = summary.summarize(
        node="n",
        backend="fake",
        samples=[
            sample(
                0.0,
                gpu(0, utilization=0.5, memory_used_mib=1000.4),
                gpu(1, utilization=0.1),
                processes=(process("uid-a", utilization=0.5, memory_mib=999.6),),
            )
        ],
        pods=[pod("a", job="train-a")],
    )

    status = gpunode.status_body(node, sample_interval=1.0)["status"]

    assert status["lastUpdate"] == "1970-01-01T00:00:00Z"
    assert (status["gpuCount"], status["healthyGpus"], status["utilization"]) == (2, 2, 0.3)
    assert (status["memoryUsedMiB"], status["memoryTotalMiB"]) == (2000, 32768)
    assert (status["utilizationByGpu"], status["memoryUsedMiBByGpu"]) == ("50%,10%", "1000,1000")
    assert status["gpus"][0] == {
        "index": 0,
        "uuid": "GPU-0",
        "product": "Tesla V100-SXM2-16GB",
        "memoryTotalMiB": 16384,
        "memoryUsedMiB": 1000,
        "utilization": 0.5,
        "memoryUtilization": 0.25,
        "healthy": True,
        "pods": [
            {
                "namespace": "default",
                "name": "a",
                "uid": "uid-a",
                "job": "train-a",
                "utilization": 0.5,
                "memoryMiB": 1000,
            }
        ],
    }


def test_unknown_readings_are_left_out_rather_than_null() -> None:
    node = summary.unavailable(node="n", backend="nvml", now=60.0, message="NVML: gone", known_gpus=[gpu(0)])

    status = gpunode.status_body(node, sample_interval=1.0)["status"]

    assert status["gpus"] == [
        {
            "index": 0,
            "uuid": "GPU-0",
            "product": "Tesla V100-SXM2-16GB",
            "memoryTotalMiB": 16384,
            "healthy": False,
            "pods": [],
        }
    ]
    assert (status["nvmlAvailable"], status["message"], status["healthyGpus"]) == (False, "NVML: gone", 0)
    assert (status["utilizationByGpu"], status["memoryUsedMiBByGpu"]) == ("-", "-")
    assert status["utilization"] is None  # a merge patch with null removes the stale node mean


def test_a_new_gpunode_is_owned_by_its_node() -> None:
    body = gpunode.new_object("n", "node-uid")

    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "node-uid"}
    ]
    assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == (
        "horus.dev/v1alpha1",
        "GPUNode",
        "n",
    )
