"""The DLJob API and the names every shell shares: the resource and its spec's defaults and checks
(`dljob`, `defaults`), the labels and annotations on pods, nodes and ConfigMaps (`keys`), and the pod
annotations' one encoder and decoder (`annotations`).

The bottom layer (.importlinter): standard library only, so the operator, the agent, the simulator
and the pure core read one definition instead of keeping copies in step.
"""
