"""The agent and the operator cannot import each other (sibling shells); the strings they share are
checked here instead."""

from horus_operator.agent import fake, summary
from horus_operator.operator import keys


def test_the_agent_reads_the_pod_keys_the_operator_writes() -> None:
    assert fake.PREDICTED_ANNOTATION == keys.ANNOTATION_PREDICTED
    assert fake.GPUS_ANNOTATION == keys.ANNOTATION_GPUS
    assert summary.JOB_LABEL == keys.LABEL_JOB
    assert (fake.GFD_COUNT_LABEL, fake.GFD_PRODUCT_LABEL, fake.GFD_MEMORY_LABEL) == (
        keys.LABEL_GPU_COUNT,
        keys.LABEL_GPU_PRODUCT,
        keys.LABEL_GPU_MEMORY,
    )
