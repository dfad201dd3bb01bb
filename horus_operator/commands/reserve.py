"""`horus reserve`: a `reserve` binding's reservation pod reports the GPU the device plugin gave it, then
holds it until deleted (agent/reserve.py; docs/operator.md, "reserve binding")."""

from __future__ import annotations

import os
import signal
import threading

import click

from horus_operator.agent import kube
from horus_operator.agent.readings import NvmlUnavailableError
from horus_operator.agent.reserve import reserved_uuid
from horus_operator.api import keys


@click.command()
def reserve() -> None:
    """Report this reservation pod's GPU (NVML) on the pod, then hold it until the pod is deleted."""
    namespace, name = os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", "")
    if not namespace or not name:
        raise click.UsageError("POD_NAMESPACE and POD_NAME must name this pod (the downward API sets them)")
    import pynvml

    try:
        uuid = reserved_uuid(pynvml)
    except NvmlUnavailableError as error:
        raise click.ClickException(
            str(error)
        ) from error  # the pod restarts; Horus replaces it if it never reports
    kube.load_config()
    kube.annotate_pod(namespace, name, {keys.ANNOTATION_RESERVED_GPU: uuid})
    click.echo(f"{namespace}/{name} holds GPU {uuid}")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
