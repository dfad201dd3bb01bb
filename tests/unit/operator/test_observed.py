from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from horus_operator.api.defaults import SETTLED_S
from horus_operator.operator.telemetry import observed

STAMP = "2026-12-02T17:00:00Z"
T0 = datetime(2026, 12, 2, 17, 0, 0, tzinfo=UTC)


def gpunode(*gpus: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1"},
        "status": {"gpus": [{"index": i, "pods": pods} for i, pods in enumerate(gpus)]},
    }


def pod(job: str | None, *, utilization: float = 0.4, memory: int = 2000, rate: float | None = None) -> dict:
    entry: dict[str, Any] = {
        "namespace": "ns",
        "name": f"{job}-0",
        "uid": f"u-{job}",
        "utilization": utilization,
        "memoryMiB": memory,
    }
    if job:
        entry["job"] = job
    if rate is not None:
        entry["stepsPerSecond"] = rate
    return entry


def observe(body: dict[str, Any]) -> dict[str, observed.JobObservation]:
    return observed.observe_jobs(observed.pods_on_gpus(body))


def test_jobs_sharing_a_gpu_see_each_other_and_pods_of_no_job_are_ignored() -> None:
    jobs = observe(
        gpunode([pod("a", rate=10.0), pod("b"), pod(None)], [pod("c", utilization=0.9, memory=9000)])
    )

    assert sorted(jobs) == ["ns/a", "ns/b", "ns/c"]
    assert jobs["ns/a"] == observed.JobObservation(
        utilization=0.4, memory_mib=2000, steps_per_second=10.0, cotenants=("ns/b",)
    )
    assert jobs["ns/c"].cotenants == ()


def test_a_multi_gpu_job_averages_utilization_and_takes_the_largest_memory() -> None:
    jobs = observe(
        gpunode([pod("a", utilization=0.2, memory=1000)], [pod("a", utilization=0.6, memory=3000)])
    )

    assert (jobs["ns/a"].utilization, jobs["ns/a"].memory_mib) == (0.4, 3000)


def status(
    body: dict[str, Any], previous: dict[str, Any], *, at: float = 0.0, job: str = "ns/a"
) -> dict[str, Any]:
    return observed.observed_status(
        observe(body)[job], previous, gpu_type="v100", now=T0 + timedelta(seconds=at)
    )


def test_alone_then_shared_gives_the_observed_slowdown() -> None:
    alone = status(gpunode([pod("a", rate=12.0)]), {})
    joined = status(gpunode([pod("a", rate=12.0), pod("b")]), alone, at=5)
    shared = status(gpunode([pod("a", rate=8.0), pod("b")]), joined, at=10)

    assert (alone["slowdown"], alone["aloneStepsPerSecond"], alone["sharedRuns"]) == (1.0, 12.0, None)
    assert shared["slowdown"] == 1.5  # 12 / 8
    assert shared["sharedRuns"] == {
        "ns/b": {"gpu": "v100", "stepsPerSecond": 8.0, "since": "2026-12-02T17:00:05Z"}
    }
    assert observed.shared_since(shared, "ns/b") == T0 + timedelta(seconds=5)
    assert observed.shared_since(shared, "ns/c") is None
    assert shared["sharingWith"] == ["ns/b"]


def test_the_rate_reported_before_a_cotenant_came_is_not_taken_as_the_shared_rate() -> None:
    alone = status(gpunode([pod("a", rate=12.0)]), {})
    joined = status(gpunode([pod("a", rate=12.0), pod("b")]), alone, at=5)
    still_stale = status(gpunode([pod("a", rate=12.0), pod("b")]), joined, at=5 + SETTLED_S - 1)
    settled = status(gpunode([pod("a", rate=12.0), pod("b")]), still_stale, at=5 + SETTLED_S)

    assert (joined["slowdown"], joined["sharedRuns"], joined["stateSince"]) == (
        None,
        None,
        "2026-12-02T17:00:05Z",
    )
    assert still_stale["sharedRuns"] is None
    assert settled["sharedRuns"] == {
        "ns/b": {"gpu": "v100", "stepsPerSecond": 12.0, "since": "2026-12-02T17:00:05Z"}
    }  # it really did not slow
    assert settled["slowdown"] == 1.0


def test_a_shorter_settle_period_counts_an_unchanged_rate_sooner() -> None:
    """`horus run --observed-settle-seconds`: where an agent reports the current co-tenancy's rate from
    its first reading (the e2e tests' fake agents), the operator need not wait the default minute."""
    alone = status(gpunode([pod("a", rate=12.0)]), {})
    joined = status(gpunode([pod("a", rate=12.0), pod("b")]), alone, at=5)
    unchanged = observe(gpunode([pod("a", rate=12.0), pod("b")]))["ns/a"]

    def five_seconds_on(settle_s: float) -> dict[str, Any]:
        at = T0 + timedelta(seconds=10)
        return observed.observed_status(unchanged, joined, gpu_type="v100", now=at, settle_s=settle_s)

    assert five_seconds_on(5.0)["sharedRuns"] == {
        "ns/b": {"gpu": "v100", "stepsPerSecond": 12.0, "since": "2026-12-02T17:00:05Z"}
    }
    assert five_seconds_on(6.0)["sharedRuns"] is None
    reported = {"stateSince": STAMP, "sharingWith": [], "utilization": 0.5}
    assert observed.settled_alone(reported, T0 + timedelta(seconds=5), settle_s=5.0) == STAMP
    assert observed.settled_alone(reported, T0 + timedelta(seconds=5)) is None  # SETTLED_S by default
    assert observed.settled_alone(reported, T0 + timedelta(seconds=SETTLED_S)) == STAMP


def test_without_progress_or_alone_rate_the_slowdown_is_unknown() -> None:
    started_shared = status(gpunode([pod("a", rate=8.0), pod("b")]), {})
    silent = status(gpunode([pod("a")]), {})

    assert started_shared["slowdown"] is None  # None in a merge patch removes a stale value
    assert started_shared["sharedRuns"]["ns/b"]["stepsPerSecond"] == 8.0  # first observation: taken as is
    assert (silent["slowdown"], silent["aloneStepsPerSecond"]) == (None, None)


def test_a_new_timestamp_alone_is_not_a_change() -> None:
    status = {"utilization": 0.4, "slowdown": None, "lastUpdate": STAMP}

    assert not observed.changed({**status, "lastUpdate": "later"}, {"utilization": 0.4, "lastUpdate": STAMP})
    assert observed.changed({**status, "utilization": 0.5}, status)


def test_a_pair_with_both_rates_known_on_both_sides_makes_one_csv_row() -> None:
    a_status = {"aloneStepsPerSecond": 12.0, "sharedRuns": {"ns/b": {"gpu": "v100", "stepsPerSecond": 8.0}}}
    b_status = {"aloneStepsPerSecond": 5.0, "sharedRuns": {"ns/a": {"gpu": "v100", "stepsPerSecond": 4.0}}}

    a = observed.pair_side(a_status, "ns/b", uid="ua", model="resnet50", batch_size=64)
    b = observed.pair_side(b_status, "ns/a", uid="ub", model="lstm", batch_size=20)

    assert a is not None and b is not None
    assert observed.colocation_row(observed.pair_gpu(a_status, "ns/b"), a, b) == (
        "v100",
        "lstm",
        "20",
        "resnet50",
        "64",
        "5",
        "12",
        "4",
        "8",
    )
    assert observed.pair_id(a, b) == observed.pair_id(b, a) == "ua+ub"
    assert (
        observed.pair_side({"aloneStepsPerSecond": 5.0}, "ns/a", uid="ub", model="lstm", batch_size=20)
        is None
    )


def test_rows_fill_chunks_up_to_the_size_cap_and_a_pair_is_recorded_once() -> None:
    row = ("v100", "a", "1", "b", "2", "1", "1", "1", "1")
    chunks: tuple[observed.Chunk, ...] = ()
    for n in range(5):
        chunks = observed.appended(chunks, row, f"pair-{n}", max_bytes=70)
    again = observed.appended(chunks, row, "pair-0", max_bytes=70)

    assert again == chunks
    assert [len(c.rows) for c in chunks] == [2, 2, 1]  # 2 rows + 2 pair ids = 60 bytes fit in 70
    kept, dropped = observed.dropped_oldest(chunks, max_chunks=2)
    assert ([c.index for c in kept], [c.index for c in dropped]) == ([1, 2], [0])


def test_the_export_is_the_colocation_csv_format_oldest_first() -> None:
    chunks = (observed.Chunk(1, ("r2",), ("p2",)), observed.Chunk(0, ("r1",), ("p1",)))

    assert observed.export_csv(chunks) == (
        "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared\nr1\nr2\n"
    )
