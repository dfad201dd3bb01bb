"""What the agent keeps of a pod the API server lists (kubernetes client models, no server)."""

from kubernetes import client

from horus_operator.agent import kube


def listed_pod(
    *envs: list[client.V1EnvVar] | None, annotations: dict[str, str] | None = None
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid="u1", namespace="ns", name="p", labels={"horus.dev/dljob": "j"}, annotations=annotations
        ),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name=f"c{i}", env=env) for i, env in enumerate(envs)]
        ),
    )


def test_a_pods_cdi_gpu_annotations_name_its_gpus_instead_of_its_void_variable() -> None:
    annotations = {
        "cdi.k8s.io/horus_gpus": "nvidia.com/gpu=GPU-b,nvidia.com/gpu=GPU-a",
        "cdi.k8s.io/other_nic": "example.com/nic=eth1",  # not a GPU
        "horus.dev/gpus": "0",
    }
    void = [client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="void")]
    assert kube._pod_info(listed_pod(void, annotations=annotations)).visible_devices == ("GPU-b", "GPU-a")
    assert kube._pod_info(listed_pod(void, annotations={"horus.dev/gpus": "0"})).visible_devices == ("void",)


def test_visible_devices_of_all_containers_are_merged_in_order_without_repeats() -> None:
    pod = kube._pod_info(
        listed_pod(
            [client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="GPU-a, GPU-b")],
            [
                client.V1EnvVar(name="OTHER", value="x"),
                client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="GPU-b"),
            ],
            None,
        )
    )

    assert pod.visible_devices == ("GPU-a", "GPU-b")
    assert (pod.key, pod.uid, dict(pod.labels), dict(pod.annotations)) == (
        "ns/p",
        "u1",
        {"horus.dev/dljob": "j"},
        {},
    )
