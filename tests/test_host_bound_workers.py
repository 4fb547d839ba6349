"""A submission's mostly host-bound case is timed in as many fresh workers as the reference's.

A host-bound call's time is its host time, and that moves from one worker process to the next
by more than one worker's samples show: on an H100, identity's 1 M-element copy, the
reference's own code, read 10.3 µs in the example's one worker against 4.8 µs in each of the
reference's three. The judge gives such a case the reference's treatment: the median of as many
fresh workers, its interval widened by their spread. These tests drive SubmissionEvaluation
with a judge whose workers read given times, as a GPU's would.
"""

from __future__ import annotations

from types import SimpleNamespace

from pytest_kernelboard.evaluation.submission import SubmissionEvaluation
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.stats.scoring import rank_us, tied

REFERENCE = {"rank_us": 4.8, "rank_ci95_us": [4.75, 4.85], "clock": "cuda_event", "n": 50}


def gpu_timing(us: float, host_bound_calls: int, n: int = 50) -> dict:
    return {
        "clock": "cuda_event",
        "n": n,
        "host_bound_calls": host_bound_calls,
        "rank_us": us,
        "rank_ci95_us": [0.99 * us, 1.01 * us],
    }


class WorkersReading:
    """A judge whose successive fresh workers read the given timings; counts closed workers."""

    def __init__(self, *timings: dict | CaseOutcome):
        self.timings = list(timings)
        self.closed = 0
        self.timed = 0

    def benchmark_case(
        self, case, timeout_s, plan, progress=None, reference=None, checked=None, timer=None
    ):
        read = self.timings[self.timed]
        self.timed += 1
        if isinstance(read, CaseOutcome):
            return read
        ref = reference(case)
        return CaseOutcome(
            "passed", timing=read, reference_timing=ref, speedup=rank_us(ref) / rank_us(read)
        )

    def close(self) -> None:
        self.closed += 1


def evaluation(
    judge: WorkersReading, workers: int, candidate_workers: int = 1, multi_gpu: bool = False
) -> SubmissionEvaluation:
    found = SimpleNamespace(timing=REFERENCE, summary=REFERENCE, provenance={"run_id": "r"})
    session = SimpleNamespace(
        host_bound_workers=workers,
        candidate_workers=candidate_workers,
        references=SimpleNamespace(
            get=lambda task, case: found,
            failure=lambda task, case: None,
            settled=lambda task, case: True,
        ),
        paired_turns=0,
        timeout=lambda task, kind: 10.0,
        plan=lambda task: None,
        _progress_for=lambda task, case, reference: None,
    )
    # lang "cu": judged by kernelboard, not by an eval.py of its own (judge/evalpy.py).
    task = SimpleNamespace(name="identity", multi_gpu=multi_gpu, lang="cu")
    evaluated = SubmissionEvaluation(session, task, ref=None)
    evaluated._judge = judge
    return evaluated


CASE = SimpleNamespace(id="size=1048576", kind="benchmark")


def test_a_host_bound_case_is_timed_in_fresh_workers_and_ties_the_reference():
    # The first worker reads the slow host time; the next two the reference's.
    judge = WorkersReading(gpu_timing(10.3, 42), gpu_timing(4.9, 12), gpu_timing(5.0, 14))
    outcome = evaluation(judge, workers=3)._benchmark(CASE)
    assert outcome.passed
    assert judge.timed == 3 and judge.closed == 2  # each timing after the first: a fresh worker
    assert outcome.timing["rank_us_by_worker"] == [10.3, 4.9, 5.0]
    assert rank_us(outcome.timing) == 5.0  # the median worker's
    assert outcome.speedup == 4.8 / 5.0
    # Their spread widens the interval, as the reference's workers' spread widens its own.
    assert outcome.timing["between_workers_rsd"] > 0.3
    assert tied(5.0, outcome.timing["rank_ci95_us"], 4.8, REFERENCE["rank_ci95_us"])


def test_even_two_slow_workers_of_three_stay_tied_by_their_spread():
    judge = WorkersReading(gpu_timing(10.3, 42), gpu_timing(9.8, 40), gpu_timing(4.9, 12))
    outcome = evaluation(judge, workers=3)._benchmark(CASE)
    assert rank_us(outcome.timing) == 9.8
    assert tied(9.8, outcome.timing["rank_ci95_us"], 4.8, REFERENCE["rank_ci95_us"])


def test_a_case_that_is_not_host_bound_keeps_its_one_worker():
    judge = WorkersReading(gpu_timing(5.0, 16, n=107))
    outcome = evaluation(judge, workers=3)._benchmark(CASE)
    assert judge.timed == 1 and judge.closed == 0
    assert "rank_us_by_worker" not in outcome.timing


def test_a_host_bound_case_keeps_its_one_worker_where_the_reference_has_one():
    judge = WorkersReading(gpu_timing(10.3, 42))
    outcome = evaluation(judge, workers=1)._benchmark(CASE)
    assert judge.timed == 1
    assert rank_us(outcome.timing) == 10.3


def test_a_host_clock_is_never_host_bound():
    # On a CPU every time is the host's: nothing to learn from another worker.
    cpu = {**gpu_timing(10.3, 0), "clock": "host"}
    judge = WorkersReading(cpu)
    evaluation(judge, workers=3)._benchmark(CASE)
    assert judge.timed == 1


def test_a_failure_in_a_later_worker_fails_the_case_and_says_why():
    crashed = CaseOutcome("crashed", "the worker exited with code 139")
    judge = WorkersReading(gpu_timing(10.3, 42), crashed)
    outcome = evaluation(judge, workers=3)._benchmark(CASE)
    assert outcome.status == "crashed"
    assert "timed again in a fresh worker" in outcome.message
    assert "exited with code 139" in outcome.message


# candidate_workers: every timed case in K fresh workers (a sweep asking whether identical code
# ties across processes: KernelBench L2 61's one worker read 3.461 ms against the reference's
# five at 3.218 - 3.224 ms on an H200).


def test_candidate_workers_time_every_case_in_that_many_workers():
    judge = WorkersReading(gpu_timing(3461.0, 0), gpu_timing(3221.0, 0), gpu_timing(3219.0, 0))
    outcome = evaluation(judge, workers=1, candidate_workers=3)._benchmark(CASE)
    assert judge.timed == 3 and judge.closed == 2
    assert outcome.timing["rank_us_by_worker"] == [3461.0, 3221.0, 3219.0]
    assert rank_us(outcome.timing) == 3221.0


def test_a_case_slow_in_every_worker_stays_slow():
    judge = WorkersReading(*(gpu_timing(us, 0) for us in (3461.0, 3458.0, 3463.0)))
    outcome = evaluation(judge, workers=1, candidate_workers=3)._benchmark(CASE)
    assert rank_us(outcome.timing) == 3461.0
    reference = {**REFERENCE, "rank_us": 3220.0, "rank_ci95_us": [3218.0, 3222.0]}
    assert not tied(3461.0, outcome.timing["rank_ci95_us"], 3220.0, reference["rank_ci95_us"])


def test_a_host_bound_case_gets_the_larger_of_the_two_counts():
    judge = WorkersReading(*(gpu_timing(us, 42) for us in (10.3, 4.9, 5.0, 5.1, 5.2)))
    evaluation(judge, workers=5, candidate_workers=3)._benchmark(CASE)
    assert judge.timed == 5


def test_a_multi_gpu_case_keeps_its_one_rank_group():
    judge = WorkersReading(gpu_timing(50.0, 0))
    evaluation(judge, workers=1, candidate_workers=3, multi_gpu=True)._benchmark(CASE)
    assert judge.timed == 1


def test_a_later_worker_s_failure_says_how_many_workers_were_asked_for():
    crashed = CaseOutcome("crashed", "the worker exited with code 139")
    judge = WorkersReading(gpu_timing(3461.0, 0), crashed)
    outcome = evaluation(judge, workers=1, candidate_workers=3)._benchmark(CASE)
    assert outcome.status == "crashed"
    assert "timed again in a fresh worker, one of 3 workers" in outcome.message
