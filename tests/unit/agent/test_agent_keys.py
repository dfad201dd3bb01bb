"""The agent and the operator cannot import each other (sibling shells); the strings they share are
checked here instead."""

from horus_operator.agent import fake, resourceslice, summary
from horus_operator.operator import keys


def test_the_agent_reads_the_pod_keys_the_operator_writes() -> None:
    assert fake.PREDICTED_ANNOTATION == keys.ANNOTATION_PREDICTED
    assert fake.GPUS_ANNOTATION == keys.ANNOTATION_GPUS
    assert fake.REQUEST_ANNOTATION == keys.ANNOTATION_REQUEST
    assert summary.JOB_LABEL == keys.LABEL_JOB
    assert (fake.GFD_COUNT_LABEL, fake.GFD_PRODUCT_LABEL, fake.GFD_MEMORY_LABEL) == (
        keys.LABEL_GPU_COUNT,
        keys.LABEL_GPU_PRODUCT,
        keys.LABEL_GPU_MEMORY,
    )


def test_the_operator_reads_the_resource_slices_the_fake_agent_writes() -> None:
    assert resourceslice.DRIVER == keys.GPU_DRIVER
    assert resourceslice.GPU_DEVICE_TYPE == keys.GPU_DEVICE_TYPE
    assert (resourceslice.GROUP, resourceslice.VERSION) == (keys.DRA_GROUP, keys.DRA_VERSION)
