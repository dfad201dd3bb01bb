"""A DLJob as the scheduling cycle reads it: its workload (or why it cannot run), the platform team's
tenancy rules it must keep, its binding, and the request the cycle places.

A workload is resolved once per generation of the job: from the catalog at once, or off the loop for an
ONNX graph or a Hugging Face config read from a ConfigMap (`graphs.GraphQueue`: the job is re-decided
once it is read). The tenancy ConfigMap is read again every resync period; a change re-judges every job.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator import metrics
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.config import LoopConfig
from horus_operator.operator.dra import claims
from horus_operator.operator.jobs import jobspec, oom, pods, template, tenancy
from horus_operator.operator.jobs.graphs import GraphQueue
from horus_operator.operator.jobs.jobspec import WorkloadResolver
from horus_operator.operator.kube import Kube
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves import preemption
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)

READING_GRAPH = "waiting: reading its model graph (spec.model.onnx)"
READING_CONFIG = "waiting: reading its model config (spec.model.huggingface.configMap)"
COUNTING_SHAPE = "waiting: counting its model at spec.model.inputShape"


class JobReader:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        resolver: WorkloadResolver,
        cycle: SchedulingCycle,
        config: LoopConfig,
        metrics: OperatorMetrics,
    ) -> None:
        self._kube, self._cache, self._resolver, self._cycle = kube, cache, resolver, cycle
        self._config, self._metrics = config, metrics
        self._graphs = GraphQueue(
            lambda job: kube.call(resolver.workload, job),
            lambda key: cache.mark([key]),
            per_namespace=config.graphs_per_namespace,
        )
        self._workloads: dict[tuple[str, int], Workload | InvalidJob] = {}  # (uid, generation) -> verdict
        self.tenancy = tenancy.Tenancy()
        self._tenancy_read_at: datetime | None = None

    @property
    def reading(self) -> int:
        """Jobs whose graph or config is being read."""
        return self._graphs.reading

    async def read_tenancy(self, now: datetime, *, due_only: bool = False) -> None:
        """The platform team's tenancy setting (`due_only`: only once a resync period has passed since
        the last read); a change re-judges every job."""
        if due_only and (now - (self._tenancy_read_at or now)).total_seconds() < self._config.resync_every:
            return
        self._tenancy_read_at = now
        data = await self._kube.read_config_map_data(self._config.own_namespace, tenancy.CONFIG_MAP)
        read = tenancy.parse(data)
        if read != self.tenancy:
            log.info("tenancy: %s", read)
            self.tenancy = read
            self._cache.mark(self._cache.jobs)

    def binding(self, job: JobSpec) -> str:
        return dljob.binding_of(job, default=self._config.binding, dra_served=self._config.dra_served)

    def beyond_tenancy(
        self, job: JobSpec, workload: Workload | None, job_pods: Sequence[pods.PodView]
    ) -> InvalidJob | None:
        """What a DLJob-only tenant's template may not ask (tenancy.py). Judged at each decision of a job
        not yet placed, since the platform team's setting may change; a job already running goes on."""
        if workload is None or job_pods:
            return None
        try:
            tenancy.check_job(job, self.tenancy)
        except InvalidJob as invalid:
            return invalid
        return None

    def workload(self, job: JobSpec) -> Workload | InvalidJob | None:
        """The job's workload, or why it cannot run; None while its ONNX graph or Hugging Face config is
        read from its ConfigMap, or its graph counted at spec.model.inputShape, in the background
        (`graphs.GraphQueue`: the job is re-decided once it is)."""
        cache_key = (job.uid, job.generation)
        if cache_key not in self._workloads:
            try:
                template.check(job.template)
                self.binding(job)  # a binding this cluster cannot give fails the job like a bad model
                verdict = self._graphs.verdict(job) if job.resolved_off_loop else self._resolver.workload(job)
            except InvalidJob as invalid:
                verdict = invalid
            if verdict is None:
                return None
            if isinstance(verdict, InvalidJob):
                self._metrics.refused(metrics.INVALID_SPEC)
            if isinstance(verdict, Workload):  # what the pod may keep busy beside its training loop
                verdict = dataclasses.replace(verdict, host_cpus=template.host_cpus(job.template))
            self._workloads[cache_key] = verdict
        return self._workloads[cache_key]

    def refuse(self, job: JobSpec, invalid: InvalidJob) -> None:
        """This generation of `job` cannot run, found after its workload was read (its pod refused)."""
        self._workloads[(job.uid, job.generation)] = invalid
        self._cache.mark([job.key])

    def request(
        self,
        job: JobSpec,
        workload: Workload,
        body: Mapping[str, Any],
        current: Mapping[str, Any],
        avoid: frozenset[str],
    ) -> JobRequest:
        """What the cycle places; from its status as decided (`current`): its attained service and when
        it queued again after a preemption (`moves/preemption.py`), and whether it runs alone since it
        ran out of memory (`jobs/oom.py`); past the nodes that refused its pods lately (`avoid`)."""
        binding = self.binding(job)
        request = self.shared(jobspec.request(job, workload, dljob.created_at(body), binding), binding)
        return dataclasses.replace(
            oom.as_recorded(request, current),
            remaining_s=self._length_s(job, workload),
            attained_gpu_s=preemption.attained_gpu_s(current),
            queued_at=preemption.queued_at(current),
            avoid_nodes=avoid,
        )

    def shared(self, request: JobRequest, binding: str) -> JobRequest:
        """`request`, its workload saying whether its GPU's co-tenants time-slice (`claims.time_slices`):
        the placement's predictor keeps those within the GPU's time (`runtime.deciding_predictor`)."""
        if not claims.time_slices(self._config.sharing, binding):
            return request
        sliced = dataclasses.replace(request.workload, time_sliced=True)
        return dataclasses.replace(request, workload=sliced)

    def _length_s(self, job: JobSpec, workload: Workload) -> float | None:
        """The job's work alone, as the queue orders read it: `spec.totalSteps` at the predicted step
        time on the cluster's most common GPU type; None without totalSteps or a step model."""
        gpu = self._cache.nodes_summary().common_gpu
        if not job.total_steps or gpu is None:
            return None
        step_s = self._cycle.step_s(workload, gpu)
        return job.total_steps * step_s if step_s else None


def waiting_message(job: JobSpec) -> str:
    """What a job resolved off the loop waits for meanwhile (`graphs.GraphQueue`)."""
    if job.onnx is not None:
        return READING_GRAPH
    if job.config_map_field:
        return READING_CONFIG
    return COUNTING_SHAPE if job.input_shape is not None else ""
