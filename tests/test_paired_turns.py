"""A case whose reference timing is host-bound is timed in turns with a worker of the
reference's, and its speedup is those turns' (evaluation/paired.py, stats/paired.py).

On a CPU no timing is host-bound, so the end-to-end tests ask the session to pair every case;
the judge, the workers and the leaderboard are the real ones.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import FIXTURES

from pytest_kernelboard.batch.records import case_feedback
from pytest_kernelboard.evaluation import paired
from pytest_kernelboard.evaluation.paired import LATER_TURN_WARMUP, STRIDE, PairedTiming
from pytest_kernelboard.evaluation.session import JudgingSession
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.judge.measure import Measurement, TimingPlan
from pytest_kernelboard.spec.cases import BENCHMARK, Case, task_cases
from pytest_kernelboard.spec.discovery import SubmissionRef
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.paired import (
    ReferenceSpread,
    TurnNoise,
    paired_ratio,
    run_to_run_half_log,
    split_interval,
    unshared_fraction,
)
from pytest_kernelboard.stats.scoring import speedup_interval, tied
from pytest_kernelboard.stats.stats import student_t_critical
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.failures import WorkerFailure

# -- the statistics ----------------------------------------------------------------------------


def test_the_same_code_in_turns_reads_one_whatever_the_host_does_between_turns():
    # The host's speed changes from turn to turn by up to 2x; within a turn both sides see it.
    speeds = [1.0, 2.0, 1.1, 1.9, 1.0, 2.1]
    candidate = [[100 * s, 101 * s, 99 * s] for s in speeds]
    reference = [[100.5 * s, 99.5 * s, 100 * s] for s in speeds]
    ratio = paired_ratio(candidate, reference)
    low, high = ratio.interval
    assert low <= 1.0 <= high
    assert high / low < 1.03  # the moments cancel: the ratio is known to about 1%
    assert len(ratio.ratios) == len(speeds)


def test_a_candidate_twice_as_fast_reads_two_with_a_narrow_interval():
    speeds = [1.0, 1.8, 1.2, 2.0]
    candidate = [[50 * s, 51 * s] for s in speeds]
    reference = [[100 * s, 101 * s] for s in speeds]
    ratio = paired_ratio(candidate, reference)
    assert ratio.speedup == pytest.approx(100.5 / 50.5, rel=0.05)
    assert ratio.interval[0] > 1.9


def test_turn_ratios_that_disagree_widen_the_interval():
    candidate = [[100.0], [100.0], [100.0]]
    reference = [[80.0], [125.0], [100.0]]
    low, high = paired_ratio(candidate, reference).interval
    assert low < 0.8 and high > 1.25


def test_a_candidate_whose_pairs_agree_by_chance_gets_the_runs_pooled_spread():
    noise = TurnNoise()
    noisy = [[100.0]] * 6
    for wobble in (0.8, 1.25, 0.9, 1.1):  # earlier candidates on the case: pairs that disagree
        paired_ratio(noisy, [[100.0 * wobble], [100.0 / wobble]] * 3, noise)
    lucky = paired_ratio([[100.0]] * 6, [[108.0], [108.5], [107.5]] * 2, noise)
    alone = paired_ratio([[100.0]] * 6, [[108.0], [108.5], [107.5]] * 2)
    assert alone.interval[0] > 1.05  # its own five degrees of freedom: faster
    assert lucky.sd_log < lucky.pooled_sd_log
    assert lucky.interval[0] < 1.0 < lucky.interval[1]  # the case's noise: a tie
    assert noise.df == 5 * 5
    # A candidate noisier than the pool keeps its own spread.
    wild = paired_ratio([[100.0]] * 6, [[60.0], [170.0]] * 3, noise)
    assert wild.half_log > lucky.half_log and wild.sd_log > wild.pooled_sd_log


def test_turns_need_two_pairs_of_positive_times():
    with pytest.raises(ValueError, match="at least 2"):
        paired_ratio([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="same number"):
        paired_ratio([[1.0], [1.0]], [[1.0]])
    with pytest.raises(ValueError, match="not positive"):
        paired_ratio([[0.0], [1.0]], [[1.0], [1.0]])


def test_the_split_intervals_give_the_pairs_own_speedup_interval():
    candidate = {"rank_us": 50.0, "rank_ci95_us": [49.0, 51.0]}
    reference = {"rank_us": 100.0, "rank_ci95_us": [98.0, 103.0]}
    half = 0.1
    low, high = speedup_interval(
        50.0,
        split_interval(candidate, half)["rank_ci95_us"],
        100.0,
        split_interval(reference, half)["rank_ci95_us"],
    )
    assert low == pytest.approx(2.0 * math.exp(-half))
    assert high == pytest.approx(2.0 * math.exp(half))
    assert split_interval(candidate, half)["rank_ci95_within_us"] == [49.0, 51.0]


def test_the_slower_side_s_unshared_time_is_the_same_either_way_round():
    assert unshared_fraction(1.0) == 0.0
    assert unshared_fraction(4.0) == pytest.approx(0.75)
    assert unshared_fraction(0.25) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="positive"):
        unshared_fraction(0.0)


def test_the_run_to_run_part_grows_with_unshared_work_and_the_host_s_spread():
    # Identical work moves with the host as the reference does: nothing to add.
    assert run_to_run_half_log(1.0, 0.2, 4) == 0.0
    # A tenth of the reference's time: 0.9 of the candidate's is work the reference does not do.
    expected = student_t_critical(4) * 0.1 * 0.9**2
    assert run_to_run_half_log(0.1, 0.1, 4) == pytest.approx(expected)
    assert run_to_run_half_log(10.0, 0.1, 4) == pytest.approx(expected)
    assert run_to_run_half_log(1.2, 0.1, 4) < 0.01  # near 1 it stays small: u^2
    assert run_to_run_half_log(0.1, 0.2, 4) == pytest.approx(2 * expected)
    # A spread measured on fewer times is less sure: a wider t.
    assert run_to_run_half_log(0.1, 0.1, 2) > run_to_run_half_log(0.1, 0.1, 4)
    assert run_to_run_half_log(0.1, 0.1, 0) == 0.0


def test_the_reference_s_spread_over_a_run_starts_from_its_workers_and_grows_with_its_turns():
    spread = ReferenceSpread([100.0, 100.0])
    assert spread.measured is None  # two times: no spread yet worth the name
    spread.add(150.0)
    sd, df = spread.measured
    assert df == 2
    assert sd == pytest.approx(statistics.stdev([math.log(100), math.log(100), math.log(150)]))
    spread.add(0.0)  # no time, no moment
    assert spread.measured[1] == 2


def test_a_run_keeps_one_reference_spread_per_case_from_its_first_workers_times(tmp_path):
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", root)
    task = load_task(root / "leaderboards" / "addone" / "task.yml")
    (case,) = [c for c in task_cases(task) if c.kind == BENCHMARK][:1]
    session = JudgingSession("benchmark", root)
    try:
        first = session.reference_spread(task, case, [100.0, 110.0, 120.0])
        again = session.reference_spread(task, case, [500.0, 500.0, 500.0])
        assert again is first  # the workers' times are the first timing's
        assert first.measured[1] == 2
    finally:
        session.close()


def test_pooled_turns_keep_every_sample_and_sum_their_counts():
    first = Measurement(clock="cuda_event", samples_us=[1.0, 2.0], warmup_calls=2)
    first.flags, first.cpus, first.details = ["slow clocks"], {3}, {"scrub_wait_ms": 1.0}
    second = Measurement(clock="cuda_event", samples_us=[3.0], warmup_calls=1, checked_calls=1)
    second.flags, second.cpus, second.details = ["slow clocks"], {3}, {"scrub_wait_ms": 2.5}
    pooled = Measurement.pooled([first, second], "turns")
    assert pooled.samples_us == [1.0, 2.0, 3.0]
    assert (pooled.warmup_calls, pooled.checked_calls) == (3, 1)
    assert pooled.flags == ["slow clocks"] and pooled.cpus == {3}
    assert pooled.details["scrub_wait_ms"] == 3.5
    assert pooled.to_record()["stop_reason"] == "turns"


# -- the turns ---------------------------------------------------------------------------------


class TurnsOf:
    """A judge whose every turn reads `us` a call; it notes who timed which inputs when."""

    def __init__(
        self,
        name: str,
        us: float,
        log: list,
        fail_on_turn: int | None = None,
        cpu: int = 7,
        ends_warm: Iterator[bool] | None = None,
    ):
        self.name, self.us, self.log, self.cpu = name, us, log, cpu
        self.ends_warm = ends_warm  # whether each turn ends with its calls warmed (none: never)
        self.warm_start_per_turn: list[bool] = []  # each turn's plan: no warm-up, warm at once?
        self.use_cuda = False
        self.snapshots_per_turn: list[bool] = []  # each turn's plan: its own NVML snapshots?
        self.wake_per_turn: list[bool] = []  # each turn's plan: the GPU spun awake first?
        self.fail_on_turn = fail_on_turn
        self.pool = SimpleNamespace(quiet=_nothing)
        self.closed = self.released = 0
        self.is_stopped = False
        self.stopped_while: list[bool] = []  # the other side's state at each of its turns
        self.cpus_asked: list[int | None] = []  # the CPU each of its turns was told to time on

    @contextmanager
    def stopped(self):
        self.is_stopped = True
        try:
            yield
        finally:
            self.is_stopped = False

    def worker(self):
        return None

    def time_case(self, case, plan, timeout_s, progress=None, first_call=1, cpu=None):
        self.stopped_while.append(self.other.is_stopped)
        self.cpus_asked.append(cpu)
        turn = sum(1 for who, *_ in self.log if who == self.name)
        self.log.append((self.name, first_call, plan.warmup, plan.rule.max_samples))
        self.snapshots_per_turn.append(plan.snapshots)
        self.wake_per_turn.append(plan.wake)
        self.warm_start_per_turn.append(plan.warm_start)
        if turn == self.fail_on_turn:
            raise WorkerFailure("crashed", "the reference's worker exited with code 139")
        calls = plan.rule.max_samples
        measured = Measurement(clock="host", samples_us=[self.us] * calls, checked_calls=calls)
        measured.cpus = {self.cpu if cpu is None else cpu}
        measured.ends_warm = next(self.ends_warm) if self.ends_warm is not None else False
        return measured

    def close(self):
        self.closed += 1

    def release_cached_memory(self, windows=False):
        self.released += 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


PLAN = TimingPlan(rule=StoppingRule(), warmup=Warmup(), flush_bytes=0)


def test_turns_alternate_who_goes_first_and_share_inputs_no_worker_saw():
    log: list = []
    candidate, reference = TurnsOf("candidate", 50.0, log), TurnsOf("reference", 100.0, log)
    candidate.other, reference.other = reference, candidate
    timing = PairedTiming(candidate, reference, 60.0, pairs=4, calls=3)
    measured = timing(None, PLAN, 60.0)
    assert [who for who, *_ in log] == ["reference", "candidate", "candidate", "reference"] * 2
    firsts = [first for _, first, *_ in log]
    assert (
        firsts
        == [1, 1, 1 + STRIDE, 1 + STRIDE, 1 + 2 * STRIDE, 1 + 2 * STRIDE] + [1 + 3 * STRIDE] * 2
    )
    # A side's first turn warms up as any timing does; a later one warms its call once.
    assert [warmup for _, _, warmup, _ in log[:2]] == [PLAN.warmup] * 2
    assert all(warmup == LATER_TURN_WARMUP for _, _, warmup, _ in log[2:])
    assert all(calls == 3 for *_, calls in log)
    assert measured.samples_us == [50.0] * 12 and measured.stop_reason == "turns"
    turns = measured.details["turns"]
    assert (turns["pairs"], turns["calls"], turns["ratios"]) == (4, 3, [2.0] * 4)
    assert turns["reference_s"] == 0.0  # the fake reference's loops took no time
    assert timing.ratio.speedup == pytest.approx(2.0) and timing.reference["n"] == 12
    assert reference.released == 1  # its windows let go once the turns are over
    # The candidate's worker is stopped through every turn of the reference's, and only then.
    assert reference.stopped_while == [True] * 4 and candidate.stopped_while == [False] * 4
    # Both sides on one CPU: the one the reference's worker chose in its first turn.
    assert reference.cpus_asked == [None] * 4 and candidate.cpus_asked == [7] * 4
    assert measured.cpus == {7}


def test_a_later_turn_of_a_side_that_ended_warm_skips_its_warm_up_call():
    """A side whose last turn's calls were warmed by the worker's untimed call needs no warm-up
    call in its next turn (the untimed call warms its first call too); one whose last turn
    ended cold (long calls, large inputs) warms up once as before. Each side by its own turns."""
    log: list = []
    candidate = TurnsOf("candidate", 50.0, log, ends_warm=iter([True, False, True, True]))
    reference = TurnsOf("reference", 100.0, log, ends_warm=iter([True] * 4))
    candidate.other, reference.other = reference, candidate
    PairedTiming(candidate, reference, 60.0, pairs=4, calls=3)(None, PLAN, 60.0)
    assert reference.warm_start_per_turn == [False, True, True, True]
    assert candidate.warm_start_per_turn == [False, True, False, True]
    # A plan that starts warm still names the later turn's warm-up, used where it is not.
    assert [w for who, _, w, _ in log if who == "candidate"][1:] == [LATER_TURN_WARMUP] * 3


def test_turns_take_the_gpu_s_state_once_around_all_of_them(monkeypatch):
    """Not around each turn (eight NVML queries a snapshot, where a host-bound turn's three
    calls take a millisecond): one snapshot before the first turn and one after the last,
    on both sides' pooled timings, and a clock drop between them flags both."""
    from pytest_kernelboard.evaluation import paired

    states = iter([{"sm_mhz": 1980, "throttle_reasons": []}, {"sm_mhz": 1200}])
    taken: list[dict] = []
    monkeypatch.setattr(
        paired.devices, "gpu_state", lambda: taken.append(next(states)) or taken[-1]
    )
    log: list = []
    candidate, reference = TurnsOf("candidate", 50.0, log), TurnsOf("reference", 100.0, log)
    candidate.other, reference.other = reference, candidate
    candidate.use_cuda = True

    def on_the_gpu(judge):
        original = judge.time_case

        def time_case(*args, **kwargs):
            measured = original(*args, **kwargs)
            measured.clock = "cuda_event"
            return measured

        judge.time_case = time_case

    on_the_gpu(candidate)
    on_the_gpu(reference)
    timing = PairedTiming(candidate, reference, 60.0, pairs=3, calls=2)
    measured = timing(None, PLAN, 60.0)
    assert len(taken) == 2
    assert candidate.snapshots_per_turn == [False] * 3 == reference.snapshots_per_turn
    # Host-bound turns after the other worker's calls: no wake spin on either side.
    assert candidate.wake_per_turn == [False] * 3 == reference.wake_per_turn
    assert PLAN.wake  # a case timed alone keeps it
    assert (measured.clocks_before, measured.clocks_after) == (taken[0], taken[1])
    drop = "clocks dropped during the case: SM clock fell from 1980 MHz to 1200 MHz"
    assert measured.flags == [drop]
    assert timing.reference["clocks_before"] == taken[0] and drop in timing.reference["flags"]


def test_a_reference_on_no_one_cpu_leaves_the_candidate_its_own_choice():
    log: list = []
    candidate, reference = TurnsOf("candidate", 50.0, log), TurnsOf("reference", 100.0, log)
    candidate.other, reference.other = reference, candidate
    reference.cpu = -1
    original = reference.time_case

    def on_no_cpu(*args, **kwargs):  # a CPU judge, or a worker that could not pin
        measured = original(*args, **kwargs)
        measured.cpus = set()
        return measured

    reference.time_case = on_no_cpu
    PairedTiming(candidate, reference, 60.0, pairs=2, calls=3)(None, PLAN, 60.0)
    assert candidate.cpus_asked == [None, None]


def test_a_reference_worker_failing_a_turn_leaves_the_candidate_timed_alone():
    log: list = []
    candidate = TurnsOf("candidate", 50.0, log)
    reference = TurnsOf("reference", 100.0, log, fail_on_turn=1)
    candidate.other, reference.other = reference, candidate
    timing = PairedTiming(candidate, reference, 60.0, pairs=3, calls=2)
    measured = timing(None, PLAN, 60.0)
    assert timing.ratio is None and timing.reference is None
    assert "exited with code 139" in timing.unpaired
    assert reference.closed == 1
    assert log[-1][0] == "candidate" and log[-1][3] == PLAN.rule.max_samples  # the usual timing
    assert measured.samples_us == [50.0] * PLAN.rule.max_samples


def test_a_batch_counts_the_reference_s_turns_in_the_case_s_timing():
    from pytest_kernelboard.batch.phases import PhaseClock

    clock = PhaseClock()
    timing = {"elapsed_s": 0.3, "wall_s": {"worker": 0.2}, "turns": {"reference_s": 0.25}}
    clock.timed_case(timing, total_s=0.6, reference_s=0.0, calibrate_s=0.01)
    assert clock.seconds["timing"] == pytest.approx(0.55)
    assert clock.seconds["timing_reference_turns"] == pytest.approx(0.25)
    assert clock.seconds["benchmark_check"] == pytest.approx(0.04)


def test_the_pairs_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(paired.PAIRS_VARIABLE, "0")
    assert paired.default_pairs() == 0
    monkeypatch.setenv(paired.PAIRS_VARIABLE, "4")
    assert paired.default_pairs() == 4
    monkeypatch.setenv(paired.PAIRS_VARIABLE, "1")
    with pytest.raises(ValueError, match="KERNELBOARD_PAIRED_TURNS"):
        paired.default_pairs()
    monkeypatch.delenv(paired.PAIRS_VARIABLE)
    assert paired.default_pairs() == paired.PAIRS


def test_a_batch_record_carries_the_turn_ratios():
    timing = {"rank_us": 50.0, "rank_ci95_us": [49.0, 51.0], "clock": "host", "n": 6}
    timing["turns"] = {"pairs": 2, "calls": 3, "ratios": [1.98, 2.02]}
    reference = {"rank_us": 100.0, "rank_ci95_us": [99.0, 101.0], "clock": "host", "n": 6}
    outcome = CaseOutcome("passed", timing=timing, reference_timing=reference, speedup=2.0)
    case = Case(BENCHMARK, 0, {"size": 8})
    assert case_feedback(case, outcome).turn_ratios == (1.98, 2.02)
    assert "run_to_run_half_log" not in case_feedback(case, outcome).to_json()
    timing["turns"]["run_to_run_half_log"] = 0.0  # identical work: kept, zero
    assert case_feedback(case, outcome).run_to_run_half_log == 0.0
    del timing["turns"]
    assert "turn_ratios" not in case_feedback(case, outcome).to_json()


# -- end to end, real workers --------------------------------------------------------------------

SLOW = """
import time

def custom_kernel(data):
    x, out = data
    # Far beyond a loaded 2-core machine's scheduling delays, which a 10 us reference's
    # turns can read as milliseconds.
    time.sleep(0.1)
    return out.copy_(x + 1)
"""


# Stopped, or inside a system call with the stop pending: a process in uninterruptible sleep
# ("D", a page read from a loaded disk, say) runs no code of its own before the stop takes it.
STOPPED = {"T", "t", "D"}


def judged_in_turns(
    tmp_path: Path,
    source: str,
    states: list[str] | None = None,
    pair_every_case: bool = True,
    pairs: int = 3,
    reference_workers: int = 1,
) -> CaseOutcome:
    """The addone leaderboard's benchmark case of `source`, its reference timed in this run;
    `states`, where given, gets the candidate's worker processes' states at each of the
    reference's timing loops."""
    import shutil

    from pytest_kernelboard.supervisor.pausing import python_processes
    from pytest_kernelboard.supervisor.proctree import process_state

    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", root)
    task = load_task(root / "leaderboards" / "addone" / "task.yml")
    path = tmp_path / "submission.py"
    path.write_text(source)
    session = JudgingSession(
        "benchmark",
        root,
        precision=0.2,
        paired_turns=pairs,
        calls_per_turn=3,
        pair_every_case=pair_every_case,
        reference_workers=reference_workers,
    )
    try:
        evaluation = session.evaluation(task, SubmissionRef(path, task.name, "alice"))
        reference = session.reference_judge(task)
        time_reference = reference.time_case

        def noting_states(*args, **kwargs):
            worker = evaluation.judge._worker
            if states is not None and worker is not None:
                states.extend(process_state(p) for p in python_processes(worker.process.pid))
            return time_reference(*args, **kwargs)

        reference.time_case = noting_states
        (case,) = [c for c in evaluation.cases() if c.kind == BENCHMARK]
        try:
            return evaluation.run(case)
        finally:
            evaluation.close()
    finally:
        session.close()


def test_the_reference_s_own_code_in_turns_ties_it(tmp_path):
    source = (FIXTURES / "core" / "submissions" / "addone" / "alice" / "submission.py").read_text()
    states: list[str] = []
    outcome = judged_in_turns(tmp_path, source, states)
    # The candidate's worker was stopped through every timing of the reference's (its first
    # workers' and each turn): nothing of it ran beside the reference's calls.
    assert len(states) >= 3 and set(states) <= STOPPED, states
    assert outcome.passed, outcome.message
    timing, reference = outcome.timing, outcome.reference_timing
    assert timing["turns"]["pairs"] == 3 and len(timing["turns"]["ratios"]) == 3
    assert timing["stop_reason"] == reference["stop_reason"] == "turns"
    assert timing["n"] == reference["n"] == 9  # three turns of three calls each
    assert timing["checked_calls"] == 9  # every timed output verified, in every turn
    assert outcome.details["reference_run"]["timed_in_turns"] is True
    assert outcome.speedup == pytest.approx(reference["rank_us"] / timing["rank_us"])


def test_a_candidate_whose_calls_were_the_gpu_s_keeps_the_run_s_reference(tmp_path, monkeypatch):
    # On a CPU every time is the host's; here the judge is told the candidate's calls in its
    # turns were the GPU's (on a GPU: most of them device-bound), as a hack that sleeps on the
    # GPU is. Its turn ratios would carry one reference worker's host time at that moment.
    from pytest_kernelboard.evaluation import submission

    monkeypatch.setattr(submission, "_device_bound", lambda outcome: outcome.passed)
    outcome = judged_in_turns(tmp_path, SLOW, pairs=3, reference_workers=3)
    assert outcome.passed, outcome.message
    timing, reference = outcome.timing, outcome.reference_timing
    assert len(timing["turns"]["ratios"]) == 3  # timed in turns, kept in the record
    assert outcome.details["turns_not_used"] == submission.TURNS_NOT_USED
    assert "timed_in_turns" not in outcome.details["reference_run"]
    assert reference["stop_reason"] != "turns"  # the run's own timing of the reference
    assert len(reference["rank_us_by_worker"]) == 3
    assert outcome.speedup == pytest.approx(reference["rank_us"] / timing["rank_us"])
    feedback = case_feedback(Case(BENCHMARK, 0, {"size": 8}), outcome)
    assert feedback.turns_not_used == submission.TURNS_NOT_USED
    assert feedback.speedup == outcome.speedup


def test_a_run_with_one_reference_worker_keeps_the_turns_of_a_gpu_bound_candidate(
    tmp_path, monkeypatch
):
    # One worker's timing of the reference says nothing of how far its host time moves; the
    # turns, over the candidate's own seconds, are then the only measure of it.
    from pytest_kernelboard.evaluation import submission

    monkeypatch.setattr(submission, "_device_bound", lambda outcome: outcome.passed)
    outcome = judged_in_turns(tmp_path, SLOW, pairs=3, reference_workers=1)
    assert outcome.passed, outcome.message
    assert "turns_not_used" not in outcome.details
    assert outcome.details["reference_run"]["timed_in_turns"] is True


def test_a_run_that_measured_the_reference_s_spread_widens_a_speedup_in_turns(
    tmp_path, monkeypatch
):
    # A 0.1 s sleep against a microseconds reference: nearly all of the candidate's time is work
    # the reference does not do, so its speedup moves from run to run about as far as the
    # reference's time moves over the run, which its few pairs cannot see. (On a GPU the sleep
    # could count as device time; the judge is told it was the host's, as on a CPU.)
    from pytest_kernelboard.evaluation import submission

    monkeypatch.setattr(submission, "_device_bound", lambda outcome: False)
    outcome = judged_in_turns(tmp_path, SLOW, pairs=3, reference_workers=3)
    assert outcome.passed, outcome.message
    assert outcome.details["reference_run"]["timed_in_turns"] is True
    turns = outcome.timing["turns"]
    # The reference's three workers and its turns with this candidate.
    assert turns["reference_spread_df"] == 3 and turns["reference_spread"] > 0
    expected = run_to_run_half_log(outcome.speedup, turns["reference_spread"], 3)
    assert expected > 0
    assert turns["run_to_run_half_log"] == pytest.approx(expected, rel=1e-3)
    low, high = speedup_interval(
        outcome.timing["rank_us"],
        outcome.timing["rank_ci95_us"],
        outcome.reference_timing["rank_us"],
        outcome.reference_timing["rank_ci95_us"],
    )
    assert math.log(high / low) / 2 == pytest.approx(
        math.hypot(turns["half_log"], turns["run_to_run_half_log"]), rel=1e-3
    )


def test_a_run_with_one_reference_worker_leaves_the_turns_interval_as_the_pairs_give_it(
    tmp_path,
):
    outcome = judged_in_turns(tmp_path, SLOW, pairs=3, reference_workers=1)
    assert outcome.passed, outcome.message
    turns = outcome.timing["turns"]
    assert "run_to_run_half_log" not in turns
    low, high = speedup_interval(
        outcome.timing["rank_us"],
        outcome.timing["rank_ci95_us"],
        outcome.reference_timing["rank_us"],
        outcome.reference_timing["rank_ci95_us"],
    )
    assert math.log(high / low) / 2 == pytest.approx(turns["half_log"], rel=1e-3)


# It burns a CPU with the GIL let go (hashlib hashes a large buffer without it): a thread that
# held the GIL would slow the worker's own timed calls, which the judge's clock check fails.
BURNER = """
import hashlib
import threading

_BLOCK = bytes(1 << 20)

def _burn():
    while True:
        hashlib.sha256(_BLOCK).digest()

threading.Thread(target=_burn, daemon=True).start()

def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""


def test_a_candidate_s_worker_is_stopped_while_the_reference_is_timed_without_turns(tmp_path):
    # A thread left spinning in the candidate's worker would load the host under the
    # reference's calls; it is stopped with the rest of the worker (SubmissionJudge.stopped).
    states: list[str] = []
    # No turns (pairs=0): on a GPU this host-bound case would otherwise be timed in turns.
    outcome = judged_in_turns(tmp_path, BURNER, states, pair_every_case=False, pairs=0)
    assert outcome.passed, outcome.message
    assert "turns" not in outcome.timing
    assert states and set(states) <= STOPPED, states


def test_a_slower_candidate_in_turns_is_slower_beyond_noise(tmp_path):
    # Five pairs, not three: a t interval on two degrees of freedom is twice as wide.
    outcome = judged_in_turns(tmp_path, SLOW, pairs=5)
    assert outcome.passed, outcome.message
    assert outcome.speedup < 0.5
    timing, reference = outcome.timing, outcome.reference_timing
    assert not tied(
        timing["rank_us"], timing["rank_ci95_us"], reference["rank_us"], reference["rank_ci95_us"]
    )


# -- on a GPU: a reference whose calls are host-bound is timed in turns, unasked ------------------

MANY_LAUNCHES = """
def ref_kernel(data: input_t) -> output_t:
    x, out = data
    y = x
    for _ in range(40):  # forty small launches: the call's host time is its time
        y = y * 1.0
    out.copy_(y + 1)
    return out
"""
ONE_LAUNCH = """
def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""


def many_launches_repo(tmp_path: Path) -> Path:
    """addone whose reference makes forty launches a call, with its own code as a submission."""
    import re
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", root)
    reference = root / "leaderboards" / "addone" / "reference.py"
    text = reference.read_text()
    text = re.sub(r"def ref_kernel\(.*?\n\n\n", MANY_LAUNCHES.lstrip() + "\n\n", text, flags=re.S)
    reference.write_text(text)
    return root


def judged_on_gpu(root: Path, source: str, tmp_path: Path) -> CaseOutcome:
    """addone's benchmark case of `source` in root's leaderboard, its reference timed in this
    run in three workers, as a batch or a ranked run times it."""
    task = load_task(root / "leaderboards" / "addone" / "task.yml")
    path = tmp_path / "submission.py"
    path.write_text(source)
    session = JudgingSession("benchmark", root, precision=0.02, reference_workers=3)
    try:
        evaluation = session.evaluation(task, SubmissionRef(path, task.name, "alice"))
        (case,) = [c for c in evaluation.cases() if c.kind == BENCHMARK]
        outcome = evaluation.run(case)
        evaluation.close()
    finally:
        session.close()
    return outcome


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a GPU")
@pytest.mark.parametrize("source, tied_expected", [("same", True), (ONE_LAUNCH, False)])
def test_a_host_bound_reference_times_its_candidates_in_turns_on_a_gpu(
    tmp_path, source, tied_expected
):
    root = many_launches_repo(tmp_path)
    if source == "same":
        body = MANY_LAUNCHES.replace(
            "def ref_kernel(data: input_t) -> output_t:", "def custom_kernel(data):"
        )
        source = body
    outcome = judged_on_gpu(root, source, tmp_path)
    assert outcome.passed, outcome.message
    timing, reference = outcome.timing, outcome.reference_timing
    assert len(timing["turns"]["ratios"]) == paired.PAIRS, timing.get("turns")
    assert timing["n"] == reference["n"] == paired.PAIRS * paired.CALLS
    assert outcome.details["reference_run"]["timed_in_turns"] is True
    is_tied = tied(
        timing["rank_us"], timing["rank_ci95_us"], reference["rank_us"], reference["rank_ci95_us"]
    )
    sides = (outcome.speedup, timing["turns"]["ratios"], timing.get("cpus"), reference.get("cpus"))
    assert is_tied == tied_expected, sides
    assert timing.get("cpus") == reference.get("cpus")  # both sides timed on one CPU
    if not tied_expected:
        assert outcome.speedup > 2.0  # one launch against forty


GPU_SLEEP = """
import torch

def custom_kernel(data):
    x, out = data
    # Two milliseconds of the GPU's: its calls are the GPU's, beyond the untimed warm call's
    # reach (judge/measure.py, WARM_BELOW_US), and slower than the reference's forty launches on
    # any host (those took up to 0.5 ms on an H200, where one millisecond read 0.51x).
    torch.cuda._sleep(4_000_000)
    return out.copy_(x + 1)
"""


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a GPU")
def test_a_candidate_whose_calls_are_the_gpu_s_is_timed_in_turns_but_keeps_the_run_s_reference(
    tmp_path,
):
    from pytest_kernelboard.evaluation.submission import TURNS_NOT_USED

    outcome = judged_on_gpu(many_launches_repo(tmp_path), GPU_SLEEP, tmp_path)
    assert outcome.passed, outcome.message
    timing, reference = outcome.timing, outcome.reference_timing
    assert 2 * int(timing.get("host_bound_calls") or 0) <= timing["n"], timing
    assert len(timing["turns"]["ratios"]) == paired.PAIRS  # its turns ran, and are kept
    assert outcome.details["turns_not_used"] == TURNS_NOT_USED
    assert "timed_in_turns" not in outcome.details["reference_run"]
    assert reference["stop_reason"] != paired.TURNS_STOP  # the run's three workers' timing
    assert len(reference["rank_us_by_worker"]) == 3
    assert outcome.speedup == pytest.approx(reference["rank_us"] / timing["rank_us"])
    assert outcome.speedup < 0.5
