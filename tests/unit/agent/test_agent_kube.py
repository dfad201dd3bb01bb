"""What the agent keeps of a pod the API server lists (kubernetes client models, no server)."""

from kubernetes import client

from horus_operator.agent import kube


def listed_pod(*envs: list[client.V1EnvVar]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid="u1", namespace="ns", name="p", labels={"horus.dev/dljob": "j"}, annotations=None
        ),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name=f"c{i}", env=env) for i, env in enumerate(envs)]
        ),
    )


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
