"""Reference runs: timed once, filed in results/, reused for speedups while nothing it depends on changed."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard import TIMING_METHOD
from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.pr import pipeline
from pytest_kernelboard.presentation import fmt_us
from pytest_kernelboard.results.recorder import RunRecorder
from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.results.reference_runs import (
    MEASURED,
    STORED,
    ReferenceIdentity,
    ReferenceTimings,
    ReferenceUnavailable,
    case_key,
    stored_reference_timings,
)
from pytest_kernelboard.results.store import StoreError, add_run
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.discovery import SubmissionRef
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats import between_workers

FIXTURES = Path(__file__).parent / "fixtures"
ALICE = "submissions/addone/alice/submission.py"
STORED_MEAN_US = 12345.0  # no CPU run of the fixture comes near: a reused timing is recognisable


def timing(mean_us: float) -> dict:
    return {
        "clock": "host",
        "n": 3,
        "mean_us": mean_us,
        "median_us": mean_us,
        "std_us": 1.0,
        "min_us": mean_us - 1,
        "max_us": mean_us + 1,
        "ci95_us": [mean_us - 2, mean_us + 2],
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", root)
    return root


def addone(root: Path):
    return load_task(root / "leaderboards" / "addone" / "task.yml")


def bench_case(task, run_seed: int | None = None) -> Case:
    return Case(BENCHMARK, 0, dict(task.benchmarks[0]), run_seed=run_seed)


def reference_doc(task, mean_us: float = STORED_MEAN_US, **environment) -> dict:
    """A results document holding a reference run of `task`, made on this machine."""
    recorder = RunRecorder("benchmark", root=task.root.parent.parent)
    recorder.record_reference(task, bench_case(task, run_seed=99), timing(mean_us))
    doc = recorder.document()
    doc["environment"].update(environment)
    validate_run(doc)
    return doc


# ------------------------------------------------------------------------------ lookup


def test_identity_and_case_key():
    task = addone(FIXTURES / "core")
    identity = ReferenceIdentity.current(task, devices.environment())
    assert identity.leaderboard == "addone" and identity.timing_method == TIMING_METHOD
    assert identity.torch == devices.environment()["torch"]
    # the seed is not part of a case's identity; its other arguments and its index are
    spec = dict(task.benchmarks[0])
    assert case_key(BENCHMARK, 0, spec) == case_key(BENCHMARK, 0, {**spec, "seed": 7})
    assert case_key(BENCHMARK, 0, spec) != case_key(BENCHMARK, 0, {**spec, "size": 8})
    assert case_key(BENCHMARK, 0, spec) != case_key(BENCHMARK, 1, spec)


def test_filed_reference_run_is_found_for_the_same_identity_only(repo):
    task = addone(repo)
    (filed,) = [f for f in add_run(repo, reference_doc(task)) if "-reference-" in f.record.name]
    identity = ReferenceIdentity.current(task, devices.environment())
    found = stored_reference_timings(repo, identity)
    (hit,) = found.values()
    assert hit.timing["mean_us"] == STORED_MEAN_US
    assert hit.provenance["source"] == STORED
    assert hit.provenance["file"] == filed.record.as_posix()
    for change in (
        {"torch": "1.0.0"},
        {"timing_method": TIMING_METHOD + 1},
        {"harness_version": "0.0.1"},
        {"device": "H100"},
        {"gpu_name": "NVIDIA H100 80GB HBM3"},
        {"reference_sha256": "0" * 64},
    ):
        assert stored_reference_timings(repo, dataclasses.replace(identity, **change)) == {}


def test_changed_reference_code_is_not_reused(repo):
    task = addone(repo)
    add_run(repo, reference_doc(task))
    reference = repo / "leaderboards/addone/reference.py"
    reference.write_text(reference.read_text() + "\n# changed\n")
    assert (
        stored_reference_timings(repo, ReferenceIdentity.current(task, devices.environment())) == {}
    )


def test_newest_matching_reference_run_wins(repo):
    task = addone(repo)
    old, new = reference_doc(task, 100.0), reference_doc(task, 200.0)
    old["created_at"], new["created_at"] = "2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z"
    add_run(repo, new)
    add_run(repo, old)
    (hit,) = stored_reference_timings(
        repo, ReferenceIdentity.current(task, devices.environment())
    ).values()
    assert hit.timing["mean_us"] == 200.0


# ------------------------------------------------------------------------------ per run


class Counting:
    def __init__(self):
        self.measured: list[Case] = []
        self.recorded: list[Case] = []

    def measure(self, task, case):
        self.measured.append(case)
        return timing(50.0)

    def record(self, task, case, timing):
        self.recorded.append(case)


def references(repo: Path, calls: Counting, remeasure: bool = False) -> ReferenceTimings:
    return ReferenceTimings(
        devices.environment, calls.measure, calls.record, lambda task: repo, remeasure
    )


def test_stored_timing_is_used_whatever_the_seed_and_nothing_is_measured(repo):
    task = addone(repo)
    add_run(repo, reference_doc(task))
    calls = Counting()
    refs = references(repo, calls)
    for seed in (1, 2, 3):  # leaderboard mode: fresh seeds every run
        found = refs.get(task, bench_case(task, run_seed=seed))
        assert found.timing["mean_us"] == STORED_MEAN_US and found.provenance["source"] == STORED
    assert calls.measured == [] and calls.recorded == [] and refs.measured_cases == 0


def test_measured_once_per_case_when_none_is_stored_or_when_forced(repo):
    task = addone(repo)
    calls = Counting()
    refs = references(repo, calls)
    for _ in range(3):
        found = refs.get(task, bench_case(task))
    assert found.timing["mean_us"] == 50.0 and found.provenance["source"] == MEASURED
    assert len(calls.measured) == len(calls.recorded) == 1

    add_run(repo, reference_doc(task))
    forced = Counting()
    found = references(repo, forced, remeasure=True).get(task, bench_case(task))
    assert found.provenance["source"] == MEASURED and len(forced.measured) == 1


def test_reference_that_cannot_be_timed_is_not_recorded(repo):
    task = addone(repo)
    calls = Counting()
    refs = ReferenceTimings(
        devices.environment, lambda t, c: None, calls.record, lambda task: repo, False
    )
    assert refs.get(task, bench_case(task)) is None and calls.recorded == []


def test_why_the_reference_could_not_be_timed_is_kept_per_case(repo):
    task = addone(repo)
    calls = Counting()

    def measure(task, case):
        calls.measured.append(case)
        raise ReferenceUnavailable("out of memory")

    refs = ReferenceTimings(devices.environment, measure, calls.record, lambda task: repo, False)
    for seed in (1, 2):  # the same case whatever its seed; measured (and failed) once
        assert refs.get(task, bench_case(task, run_seed=seed)) is None
        assert refs.failure(task, bench_case(task, run_seed=seed)) == "out of memory"
    assert len(calls.measured) == 1 and calls.recorded == [] and refs.measured_cases == 0


# ------------------------------------------------------------------------------ document, store


def test_document_files_the_reference_after_the_submission(repo):
    task = addone(repo)
    recorder = RunRecorder("leaderboard", root=repo)
    case = bench_case(task, run_seed=5)
    recorder.record_reference(task, case, timing(30.0))
    outcome = CaseOutcome("passed", timing=timing(15.0), reference_timing=timing(30.0), speedup=2.0)
    outcome.details["reference_run"] = ReferenceIdentity.current(
        task, devices.environment()
    ).provenance(MEASURED)
    recorder.record(task, SubmissionRef(repo / ALICE, "addone", "alice"), case, outcome)
    doc = recorder.document()
    validate_run(doc)
    assert [e["submission"]["author"] for e in doc["evaluations"]] == ["alice", "reference"]
    assert doc["evaluations"][1]["submission"]["is_reference"] is True
    assert doc["harness"]["timing_method"] == TIMING_METHOD
    provenance = doc["evaluations"][0]["cases"][0]["reference_run"]
    assert provenance["run_id"] == doc["run_id"] and provenance["created_at"] == doc["created_at"]

    filed = [f.record.as_posix() for f in add_run(repo, doc)]
    assert provenance["file"] == filed[1] and "-reference-" in filed[1]
    assert (repo / filed[1]).is_file()


def test_two_runs_filing_the_same_reference_in_the_same_second(repo):
    task = addone(repo)
    first, second = reference_doc(task), reference_doc(task)
    second["created_at"] = first["created_at"]
    add_run(repo, first)
    add_run(repo, second)  # a reference run is told apart by its run id only
    with pytest.raises(StoreError, match="duplicate"):
        add_run(repo, first)


def test_pipeline_accepts_the_reference_run_beside_the_submission(tmp_path):
    from test_pr_comment import make_gate, make_run, write

    run = make_run()
    reference = copy.deepcopy(run["evaluations"][0])
    reference["submission"].update(author="reference", is_reference=True, sha256="e" * 64)
    run["evaluations"].append(reference)
    (outcome,) = pipeline.verify_all(make_gate(), write(tmp_path / "ok", run))
    assert outcome.problem is None and outcome.evaluation["submission"]["author"] == "alice"

    reference["leaderboard"]["name"] = "other"
    (outcome,) = pipeline.verify_all(make_gate(), write(tmp_path / "bad", run))
    assert outcome.run is None and "reference run" in outcome.problem


# ------------------------------------------------------------------------------ the plugin


def run_benchmark(pytester, *options: str) -> dict:
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-precision", "0.2", "--kb-results", "out.json",
        *options, ALICE,
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    doc = json.loads((pytester.path / "out.json").read_text())
    validate_run(doc)
    assert doc["harness"]["timing_method"] == TIMING_METHOD  # this checkout's plugin ran
    return doc


@pytest.fixture
def plugin_repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The inner pytest imports this checkout's plugin, not whichever one is installed.
    checkout = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", checkout)
    # What these tests ask of is the run's own reference timing; on a GPU the fixture's tiny
    # case is host-bound and would be timed in turns, whose reference timing is the turns' own
    # (tests/test_paired_turns.py covers those).
    monkeypatch.setenv("KERNELBOARD_PAIRED_TURNS", "0")
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def benchmark_record(doc: dict) -> dict:
    (case,) = [c for c in doc["evaluations"][0]["cases"] if c["kind"] == BENCHMARK]
    return case


def test_plugin_measures_files_then_reuses_the_reference(pytester, plugin_repo):
    first = run_benchmark(pytester)
    assert [e["submission"]["author"] for e in first["evaluations"]] == ["alice", "reference"]
    measured = benchmark_record(first)
    assert measured["reference_run"]["source"] == MEASURED
    # Timed as a submission is: every timed call's output checked (the same judge work between
    # calls on both sides of the speedup).
    reference_timing = first["evaluations"][1]["cases"][0]["timing"]
    assert reference_timing["checked_calls"] == reference_timing["n"] > 0
    # Where the round trips went: the judge's own packing and reading, the worker's handling;
    # both inside the round trips' total.
    wall = measured["timing"]["wall_s"]
    assert wall["worker_handler"] > 0 and wall["judge_io"] > 0
    assert wall["worker_handler"] + wall["judge_io"] <= wall["worker"]
    assert measured["timing"]["host_copied_calls"] == 0  # CPU tensors: no CUDA host copies
    assert (
        measured["reference_timing"]["mean_us"]
        == (first["evaluations"][1]["cases"][0]["timing"]["mean_us"])
    )
    filed = [f.record.as_posix() for f in add_run(plugin_repo, first)]
    assert measured["reference_run"]["file"] == filed[1]

    second = run_benchmark(pytester)
    assert len(second["evaluations"]) == 1  # the reference was not timed again
    reused = benchmark_record(second)
    assert reused["reference_run"]["source"] == STORED
    assert reused["reference_run"]["file"] == filed[1]
    assert reused["reference_run"]["run_id"] == first["run_id"]
    stored = first["evaluations"][1]["cases"][0]["timing"]
    assert "samples_us" not in reused["reference_timing"]  # kept once, in the reference run
    for key in ("n", "mean_us", "median_us", "std_us", "ci95_us", "rank_us"):
        assert reused["reference_timing"][key] == stored[key]
    assert reused["speedup"] == pytest.approx(stored["rank_us"] / reused["timing"]["rank_us"])
    assert second["evaluations"][0]["summary"]["fast_p"] is not None


def test_plugin_remeasures_when_asked(pytester, plugin_repo):
    add_run(plugin_repo, reference_doc(addone(plugin_repo)))
    doc = run_benchmark(pytester, "--kb-remeasure-reference")
    assert len(doc["evaluations"]) == 2 and doc["evaluations"][1]["submission"]["is_reference"]
    record = benchmark_record(doc)
    assert record["reference_run"]["source"] == MEASURED
    assert record["reference_timing"]["mean_us"] != STORED_MEAN_US


def test_plugin_ignores_a_reference_run_of_another_torch(pytester, plugin_repo):
    add_run(plugin_repo, reference_doc(addone(plugin_repo), torch="1.0.0"))
    doc = run_benchmark(pytester)
    record = benchmark_record(doc)
    assert record["reference_run"]["source"] == MEASURED
    assert record["reference_timing"]["mean_us"] != STORED_MEAN_US
    assert len(doc["evaluations"]) == 2


def test_plugin_says_why_the_reference_could_not_be_timed(pytester, plugin_repo):
    reference = plugin_repo / "leaderboards" / "addone" / "reference.py"
    text = reference.read_text().replace("def ref_kernel(", "def _add_one(")
    text = text.replace("expected = ref_kernel(", "expected = _add_one(")
    reference.write_text(
        text + "\n\ndef ref_kernel(data):\n"
        "    if data[0].numel() == 4096:\n"
        "        raise RuntimeError('the reference blew up on the big case')\n"
        "    return _add_one(data)\n"
    )
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-precision", "0.2", "--kb-results", "out.json", ALICE
    )  # fmt: skip
    result.assert_outcomes(passed=3)  # the submission's case stands, without a speedup
    result.stdout.fnmatch_lines(["*the reference could not be timed*blew up on the big case*"])
    doc = json.loads((pytester.path / "out.json").read_text())
    validate_run(doc)
    record = benchmark_record(doc)
    assert "speedup" not in record or record["speedup"] is None
    assert "blew up on the big case" in record["reference_error"]


def test_the_median_worker_of_several_is_kept_with_every_workers_time():
    from pytest_kernelboard.stats.between_workers import median_worker

    records = [{**timing(m), "rank_us": m} for m in (50.0, 30.0, 90.0)]
    chosen = median_worker(records)
    assert chosen["rank_us"] == 50.0 and chosen["mean_us"] == 50.0
    assert chosen["rank_us_by_worker"] == [50.0, 30.0, 90.0]  # in the order measured
    assert median_worker(records[:2])["rank_us"] == 50.0  # even: the slower middle one
    assert "rank_us_by_worker" not in median_worker(records[:1])  # one worker: as before
    assert "rank_us_by_worker" not in records[0]  # the measured records are left as they were


def test_a_batch_times_its_reference_in_several_fresh_workers(repo):
    """A batch's speedups all hang on one reference timing per case; judge_many's session times
    it in REFERENCE_WORKERS fresh workers and keeps the median one (evaluation/session.py)."""
    from pytest_kernelboard.batch.judge import REFERENCE_WORKERS
    from pytest_kernelboard.evaluation.progress import Progress
    from pytest_kernelboard.evaluation.session import JudgingSession
    from pytest_kernelboard.stats.between_workers import spread

    class Lines(Progress):
        def __init__(self):
            self.lines: list[tuple[str, str]] = []

        def case_timed(self, label: str, line: str) -> None:
            self.lines.append((label, line))

    task = addone(repo)
    shown = Lines()
    session = JudgingSession(
        "benchmark", repo, precision=0.2, reference_workers=REFERENCE_WORKERS, progress=shown
    )
    judge = session.reference_judge(task)
    pids: list[int] = []
    time_case = judge.time_case

    def timing_in_a_worker(*args, **kwargs):
        measured = time_case(*args, **kwargs)
        pids.append(judge.worker().process.pid)
        return measured

    judge.time_case = timing_in_a_worker
    try:
        record = session._measure_reference(task, bench_case(task))
    finally:
        session.close()
    assert REFERENCE_WORKERS >= 3
    assert len(set(pids)) == REFERENCE_WORKERS  # each timing had a worker of its own
    by_worker = record["rank_us_by_worker"]
    assert len(by_worker) == REFERENCE_WORKERS
    assert record["rank_us"] == pytest.approx(sorted(by_worker)[len(by_worker) // 2], abs=1e-3)
    # The progress names each worker's time: the spread every speedup of the batch hangs on.
    [(label, line)] = shown.lines
    assert label.endswith("(reference)")
    assert ", ".join(fmt_us(t) for t in by_worker) in line
    # Their spread is measured, and the kept timing's interval holds it (stats/between_workers).
    assert record["between_workers_rsd"] == pytest.approx(spread(by_worker), abs=1e-3)
    (low, high), (within_low, within_high) = record["rank_ci95_us"], record["rank_ci95_within_us"]
    assert low <= within_low and high >= within_high
    assert f"(spread {100 * record['between_workers_rsd']:.1f}%)" in line


def test_a_ranked_run_times_the_reference_in_several_workers_and_widens_by_their_spread(
    pytester, plugin_repo
):
    """Leaderboard mode: the reference in RANKED_REFERENCE_WORKERS fresh workers, their times
    kept with the reference run; the submission's one-worker interval widened by their spread."""
    from pytest_kernelboard.plugin import RANKED_REFERENCE_WORKERS

    result = pytester.runpytest_subprocess(
        "--kb-mode", "leaderboard", "--kb-precision", "0.2", "--kb-results", "out.json", ALICE
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    doc = json.loads((pytester.path / "out.json").read_text())
    validate_run(doc)
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    (reference,) = [c for c in by_author["reference"]["cases"] if c["kind"] == BENCHMARK]
    workers = reference["timing"]["rank_us_by_worker"]
    assert len(workers) == RANKED_REFERENCE_WORKERS and all(t > 0 for t in workers)
    (alice,) = [c for c in by_author["alice"]["cases"] if c["kind"] == BENCHMARK]
    spread = alice["timing"]["between_workers_rsd"]
    own = alice["timing"].get("rank_us_by_worker")
    if own is None:  # one worker (a CPU's host clock is never host-bound): the reference's spread
        assert spread == reference["timing"]["between_workers_rsd"] and spread > 0
    else:  # host-bound on a GPU: timed in as many workers as the reference, its own spread
        assert len(own) == RANKED_REFERENCE_WORKERS
        assert spread == pytest.approx(between_workers.spread(own), abs=1e-3) and spread > 0
    low, high = alice["timing"]["rank_ci95_us"]
    within_low, within_high = alice["timing"]["rank_ci95_within_us"]
    assert low < within_low and high > within_high  # wider than its own samples say


def test_one_reference_worker_can_be_asked_for_and_none_is_refused(pytester, plugin_repo):
    result = pytester.runpytest_subprocess(
        "--kb-mode", "leaderboard", "--kb-reference-workers", "1", "--kb-precision", "0.2",
        "--kb-results", "out.json", ALICE,
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    doc = json.loads((pytester.path / "out.json").read_text())
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    (reference,) = [c for c in by_author["reference"]["cases"] if c["kind"] == BENCHMARK]
    assert "rank_us_by_worker" not in reference["timing"]
    refused = pytester.runpytest_subprocess("--kb-reference-workers", "0", ALICE)
    assert refused.ret != 0
    refused.stderr.fnmatch_lines(
        ["*--kb-reference-workers*'0': a whole number of workers, 1 or more*"]
    )


# ------------------------------------------------------------------------------ timed together


def three_cases(task) -> list[Case]:
    """Three timed cases of the addone fixture, told apart by index and size."""
    return [Case(BENCHMARK, i, {**task.benchmarks[0], "size": 1024 << i}) for i in range(3)]


class CountingMany(Counting):
    def __init__(self, fails: int | None = None):
        super().__init__()
        self.batches: list[list[Case]] = []
        self.fails = fails  # the index of a case the reference cannot be timed on

    def measure_many(self, task, cases):
        self.batches.append(list(cases))
        return [
            ReferenceUnavailable("out of memory") if c.index == self.fails else timing(50.0)
            for c in cases
        ]


def references_many(repo: Path, calls: CountingMany) -> ReferenceTimings:
    return ReferenceTimings(
        devices.environment,
        calls.measure,
        calls.record,
        lambda task: repo,
        measure_many=calls.measure_many,
    )


def test_the_cases_a_run_times_are_measured_together_once(repo):
    task = addone(repo)
    calls = CountingMany()
    refs = references_many(repo, calls)
    cases = three_cases(task)
    for case in cases:  # each item asks for its own case; the first one's asking times all three
        assert refs.get(task, case, cases).provenance["source"] == MEASURED
    assert calls.batches == [cases] and calls.measured == []
    assert calls.recorded == cases and refs.measured_cases == 3


def test_a_case_settled_before_is_not_timed_again_with_the_others(repo):
    task = addone(repo)
    add_run(repo, reference_doc(task))  # the store has case 0
    calls = CountingMany(fails=2)
    refs = references_many(repo, calls)
    _, mid, failing = three_cases(task)
    stored = bench_case(task)  # the stored run's case
    assert refs.get(task, mid, [stored, mid, failing]).provenance["source"] == MEASURED
    assert calls.batches == [[mid, failing]]
    assert refs.get(task, stored).provenance["source"] == STORED
    assert refs.get(task, failing) is None and refs.failure(task, failing) == "out of memory"
    assert calls.batches == [[mid, failing]] and calls.recorded == [mid]


def test_without_a_measure_for_many_each_case_is_measured_alone(repo):
    task = addone(repo)
    calls = Counting()
    refs = references(repo, calls)
    cases = three_cases(task)
    refs.get(task, cases[0], cases)
    assert calls.measured == cases  # one after another, each of them once
    refs.get(task, cases[1], cases)
    assert calls.measured == cases


RECORD_REFERENCE_WORKERS = """
import json, os
from pytest_kernelboard.judge.core import SubmissionJudge

time_case = SubmissionJudge.time_case


def recording(judge, case, *args, **kwargs):
    measured = time_case(judge, case, *args, **kwargs)
    if judge.entry == "ref_kernel":
        with open("reference_workers.jsonl", "a") as out:
            out.write(json.dumps([case.id, judge.worker().process.pid]) + "\\n")
    return measured


SubmissionJudge.time_case = recording
"""


def test_a_ranked_run_starts_the_reference_s_workers_once_for_all_its_timed_cases(
    pytester, plugin_repo
):
    """Three timed cases, the reference timed in three workers: the first timed item times the
    reference on all three, each of its three fresh workers timing every case (nine fresh
    workers before, one set for each case: a GPU's CUDA context and start each)."""
    from pytest_kernelboard.plugin import RANKED_REFERENCE_WORKERS

    task_yml = plugin_repo / "leaderboards" / "addone" / "task.yml"
    big = '  - {"size": 4096, "seed": 13, "flag": false, "label": "big"}\n'
    more = big.replace("4096", "2048").replace("big", "mid").replace("13", "14")
    more += big.replace("4096", "1024").replace("big", "small").replace("13", "15")
    task_yml.write_text(task_yml.read_text().replace(big, big + more))
    pytester.makeconftest(RECORD_REFERENCE_WORKERS)
    result = pytester.runpytest_subprocess(
        "--kb-mode", "leaderboard", "--kb-precision", "0.2", "--kb-results", "out.json", ALICE
    )  # fmt: skip
    result.assert_outcomes(passed=5)
    rows = [json.loads(line) for line in (pytester.path / "reference_workers.jsonl").open()]
    by_case: dict[str, list[int]] = {}
    for case_id, pid in rows:
        by_case.setdefault(case_id, []).append(pid)
    assert len(by_case) == 3
    pids = list(by_case.values())
    assert all(len(set(each)) == RANKED_REFERENCE_WORKERS for each in pids)
    assert pids[0] == pids[1] == pids[2]  # the same three workers, each timing every case
    doc = json.loads((pytester.path / "out.json").read_text())
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    timed = [c for c in by_author["alice"]["cases"] if c["kind"] == BENCHMARK]
    assert len(timed) == 3 and all(c["speedup"] for c in timed)
