"""The batch judge: many candidates, one record each, in order, with verdicts a program can use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from pytest_kernelboard.batch import (
    Candidate,
    CandidateError,
    UnknownLeaderboard,
    batch_fast_p,
    judge_many,
    load_candidates,
    record_schema,
)
from pytest_kernelboard.batch.turns import GpuTurns

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
CANDIDATES = {
    "good": GOOD,
    "wrong": "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 2)\n",
    "syntax": "def custom_kernel(data)\n    return 1\n",
    "raises": "def custom_kernel(data):\n    raise ValueError('boom')\n",
    "shape": "def custom_kernel(data):\n    return (data[0] + 1)[:2]\n",
    "dtype": "def custom_kernel(data):\n    return (data[0] + 1).double()\n",
    # Writes its answer into its input x: right, but no drop-in for a pure function.
    "inplace": "def custom_kernel(data):\n    x, out = data\n    return x.add_(1)\n",
    "noentry": "def something_else(data):\n    return data\n",
    # Dies on the first case only: the second would pass, were it run.
    "crash": (
        "import os\ndef custom_kernel(data):\n    x, out = data\n"
        "    if x.numel() == 3:\n        os._exit(7)\n    return out.copy_(x + 1)\n"
    ),
    # What Triton's front-end raises at a kernel's first launch (it compiles then, not at import)
    "jit": (
        "class CompilationError(Exception):\n    pass\n"
        "def custom_kernel(data):\n    raise CompilationError('at 4:8: y is not defined')\n"
    ),
}
EXPECTED = {  # id: (status, error_kind, flags)
    "good": ("passed", None, []),
    "wrong": ("failed", "incorrect_numerical", []),
    "syntax": ("error", "compile_error", []),
    "raises": ("error", "runtime_error", []),
    "shape": ("failed", "incorrect_shape", []),
    "dtype": ("failed", "incorrect_dtype", []),
    "inplace": ("passed", None, ["mutates_inputs"]),
    "noentry": ("error", "no_entry", []),
    "crash": ("error", "crashed", []),
    "jit": ("error", "compile_error", []),
}


@pytest.fixture(scope="module")
def mixed_batch(tmp_path_factory) -> tuple[Path, list[dict]]:
    """One mixed batch judged once (test mode) for the tests below."""
    import shutil

    root = tmp_path_factory.mktemp("batch") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    candidates = [Candidate(f"{name}.py", source) for name, source in CANDIDATES.items()]
    return root, list(judge_many("addone", candidates, root=root))


def test_every_candidate_gets_its_verdict_in_the_order_given(mixed_batch):
    _, records = mixed_batch
    assert [r["id"] for r in records] == [f"{name}.py" for name in CANDIDATES]
    for record in records:
        name = record["id"].removesuffix(".py")
        status, kind, flags = EXPECTED[name]
        assert (record["status"], record["error_kind"], record["flags"]) == (status, kind, flags), (
            record["id"],
            record["message"],
        )
        assert record["correct"] is (status == "passed")
        assert record["speedup"] is None and record["tied"] is None  # test mode: not timed


def test_feedback_names_the_failing_case_and_says_what_went_wrong(mixed_batch):
    records = {r["id"]: r for r in mixed_batch[1]}
    syntax = records["syntax.py"]
    # The failed case reads as its entry in cases[] does: one id for one case in a record.
    (failed,) = [c for c in syntax["cases"] if c["id"] == syntax["failed_case"]]
    assert failed["kind"] == "test" and failed["status"] == "error"
    assert 'File "syntax.py", line 1' in syntax["message"]  # the compiler's own words
    assert "frozen importlib" not in syntax["message"]
    wrong = records["wrong.py"]["cases"][0]
    assert wrong["mismatch"]["kind"] == "numerical"
    assert wrong["mismatch"]["max_abs_error"] == pytest.approx(1.0, abs=1e-5)
    assert "mismatch at" in wrong["message"]  # the leaderboard's own check message
    assert records["inplace.py"]["cases"][0]["mutated_inputs"] == ["data[0]"]
    assert 'File "raises.py", line 2' in records["raises.py"]["message"]


def test_a_candidate_whose_worker_died_is_judged_no_further(mixed_batch):
    # Each later case would take a fresh worker (a CUDA context on a GPU) to learn what its
    # first crash already decided: the record's verdict. pytest judges each case regardless
    # (test_isolation.py).
    crash = {r["id"]: r for r in mixed_batch[1]}["crash.py"]
    first, second = crash["cases"]
    assert (first["status"], crash["failed_case"]) == ("crashed", first["id"])
    assert "exited with code 7" in crash["message"]
    assert second["status"] == "not_run"
    assert second["message"] == (
        f"not run: an earlier case, crash.py::addone::test[{first['id']}], crashed"
    )


def test_records_validate_against_the_generated_schema(mixed_batch):
    schema = record_schema()
    assert schema["title"] == "kernelboard.candidate/1"
    for record in mixed_batch[1]:
        jsonschema.validate(record, schema)
    broken = dict(mixed_batch[1][0], status="fine")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_read_only_inputs_fail_a_kernel_that_writes_into_them(tmp_path, core_repo):
    sidecar = core_repo / "leaderboards" / "addone" / "kernelboard.yml"
    sidecar.write_text("read_only_inputs: true\n")
    inplace = Candidate("inplace.py", CANDIDATES["inplace"])
    # The reference writes `out` itself: writing it is what the kernel is asked to do.
    good = Candidate("good.py", GOOD)
    records = {r["id"]: r for r in judge_many("addone", [inplace, good], root=core_repo)}
    assert records["inplace.py"]["status"] == "failed"
    assert records["inplace.py"]["error_kind"] == "mutates_inputs"
    assert "read-only" in records["inplace.py"]["message"]
    assert records["good.py"]["status"] == "passed"
    assert records["good.py"]["flags"] == []


def test_fast_p_over_a_batch_is_kernelbenchs_share_correct_and_faster():
    records = [
        {"mode": "benchmark", "correct": True, "speedup": 2.5},
        {"mode": "benchmark", "correct": True, "speedup": 1.2},
        {"mode": "benchmark", "correct": True, "speedup": 0.8},
        {"mode": "benchmark", "correct": False, "speedup": None},
    ]
    # By hand: correct 3/4; faster than 1x: 2.5 and 1.2; than 1.5x and 2x: only 2.5.
    assert batch_fast_p(records) == {"0": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}
    untimed = [dict(r, mode="test", speedup=None) for r in records]
    assert batch_fast_p(untimed) == {"0": 0.75, "1": None, "1.5": None, "2": None}


def test_candidates_come_from_files_folders_and_jsonl(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    (folder / "b.py").write_text(GOOD)
    (folder / "a.cu").write_text("// cuda\n")
    (folder / "notes.txt").write_text("ignored")
    lines = tmp_path / "batch.jsonl"
    lines.write_text(json.dumps({"id": "x1", "source": GOOD}) + "\n\n")
    single = tmp_path / "one.py"
    single.write_text(GOOD)
    found = load_candidates([single, folder, lines])
    assert [(c.id, c.lang) for c in found] == [
        ("one.py", "py"),
        ("a.cu", "cu"),
        ("b.py", "py"),
        ("x1", "py"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "batch.jsonl:1: not JSON"),
        ('{"id": "a"}', "batch.jsonl:1: missing key(s) source"),
        ('{"id": "a", "source": "", "lang": "rust"}', "batch.jsonl:1: candidate 'a': lang must"),
    ],
)
def test_a_bad_jsonl_line_is_named(tmp_path, content, message):
    lines = tmp_path / "batch.jsonl"
    lines.write_text(content + "\n")
    with pytest.raises(CandidateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_candidates([lines])


def test_duplicate_ids_and_unknown_leaderboards_are_refused(tmp_path, core_repo):
    lines = tmp_path / "batch.jsonl"
    lines.write_text("\n".join(json.dumps({"id": "a", "source": GOOD}) for _ in range(2)))
    with pytest.raises(CandidateError, match="'a' is given twice"):
        load_candidates([lines])
    with pytest.raises(UnknownLeaderboard, match="unknown leaderboard 'nope'"):
        list(judge_many("nope", [Candidate("a", GOOD)], root=core_repo))


def test_the_command_streams_jsonl_and_ends_with_fast_p(tmp_path, core_repo):
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    (folder / "wrong.py").write_text(CANDIDATES["wrong"])
    out = tmp_path / "records.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "pytest_kernelboard.cli", "judge", "addone", str(folder)]
        + ["--out", str(out), "--root", str(core_repo)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in records] == [
        ("good.py", "passed"),
        ("wrong.py", "failed"),
    ]
    assert "[2/2] wrong.py: failed (incorrect_numerical)" in result.stderr
    assert "2 candidates judged; fast_0 0.50" in result.stderr
    assert "2 records in " in result.stderr and ", the 1 after it at " in result.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "pytest_kernelboard.cli", "judge", "nope", str(folder)]
        + ["--root", str(core_repo)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert "unknown leaderboard 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
    too_few = subprocess.run(
        [sys.executable, "-m", "pytest_kernelboard.cli", "judge", "addone", str(folder)]
        + ["--root", str(core_repo), "--reference-workers", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert too_few.returncode == 2 and "Traceback" not in too_few.stderr
    assert "--reference-workers: expected a whole number of at least 3, got '2'" in too_few.stderr


def test_a_time_that_cannot_be_the_calls_is_implausible_timing_whatever_its_message():
    from pytest_kernelboard.batch.records import error_kind
    from pytest_kernelboard.judge.core import CaseOutcome

    implausible = CaseOutcome("failed", "one of its kernels ran 900 us", implausible_timing=True)
    assert error_kind(implausible) == "implausible_timing"
    assert error_kind(CaseOutcome("failed", "physically impossible timing")) != (
        "implausible_timing"  # the kind comes from the fact, not from the wording
    )


def test_a_case_says_when_its_time_was_the_hosts():
    from pytest_kernelboard.batch.records import case_feedback
    from pytest_kernelboard.judge.core import CaseOutcome
    from pytest_kernelboard.spec.cases import BENCHMARK, Case

    case = Case(BENCHMARK, 0, {"size": 8, "seed": 1})

    def feedback(timing: dict) -> bool | None:
        timing = {"n": 10, "rank_us": 200.0, "stop_reason": "noise_bound", **timing}
        return case_feedback(case, CaseOutcome("passed", timing=timing)).host_bound

    assert feedback({"clock": "cuda_event", "host_bound_calls": 8}) is True
    assert feedback({"clock": "cuda_event", "host_bound_calls": 2}) is False
    assert feedback({"clock": "host"}) is None  # on a CPU every time is the host's
    assert case_feedback(case, CaseOutcome("failed")).host_bound is None


def test_a_finished_batch_leaves_no_spare_worker_starting(core_repo):
    """A spare is a Python and torch start-up (seconds of CPU): once the stream of candidates
    ends, none is kept starting for a candidate that will not come."""
    from pytest_kernelboard.batch.judge import BatchJudge
    from pytest_kernelboard.spec.task import load_task

    task = load_task(core_repo / "leaderboards" / "addone" / "task.yml")
    judge = BatchJudge(task, "test", core_repo, spares=1)
    try:
        records = list(judge.judge([Candidate("good.py", GOOD)]))
        assert [r["status"] for r in records] == ["passed"]
        assert judge.session.pool.spare_workers() == []
    finally:
        judge.close()


def test_the_command_shows_the_cores_progress_lines(monkeypatch, capsys):
    """`kernelboard judge` hands its progress to the core, so the reference's line (its time in
    each worker) reaches stderr beside the per-candidate lines."""
    import argparse

    from pytest_kernelboard.batch import cli

    def judging(leaderboard, candidates, progress=None, **kwargs):
        progress.case_timed("addone benchmark[n=4] (reference)", "1.00 us, the median of ...")
        return iter(())

    monkeypatch.setattr(cli, "judge_many", judging)
    monkeypatch.setattr(cli, "load_candidates", lambda paths: [])
    args = argparse.Namespace(candidates=[], out=None, root=None, ray=None, leaderboard="addone")
    args.mode, args.gpus, args.excessive_speedup, args.profile = "benchmark", None, 10.0, False
    args.candidate_workers, args.reference_workers, args.in_flight = 1, 5, None
    assert cli.run(args) == 0
    assert "addone benchmark[n=4] (reference): 1.00 us" in capsys.readouterr().err


def test_candidate_and_reference_workers_reach_every_gpus_judge(tmp_path):
    """`--candidate-workers` and `--reference-workers` go to each GPU's judge process: on a
    CPU machine two named 'GPUs' are two judge processes, each timing its candidate's case in
    two fresh workers, which the record lists, and its share of the reference's three."""
    import re
    import shutil

    from pytest_kernelboard.evaluation.progress import Progress

    class Lines(Progress):
        def __init__(self) -> None:
            self.lines: list[str] = []

        def phase(self, label: str, line: str) -> None:
            self.lines.append(line)

    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    good = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
    candidates = [Candidate("a.py", good), Candidate("b.py", good)]
    progress = Lines()
    records = list(
        judge_many(
            "addone",
            candidates,
            mode="benchmark",
            root=root,
            gpus=[0, 1],
            candidate_workers=2,
            reference_workers=3,
            progress=progress,
        )
    )
    shares = [re.search(r"its workers ([\d, ]+) of (\d+)\)", line) for line in progress.lines]
    shares = [found.groups() for found in shares if found]
    assert sorted(shares) == [("0, 2", "3"), ("1", "3")], progress.lines
    for record in records:
        assert record["status"] == "passed", record["message"]
        (case,) = [c for c in record["cases"] if c["kind"] == "benchmark"]
        assert len(case["time_us_by_worker"]) == 2
        # Of an even count, the slower of the two middle ones.
        assert case["time_us"] == pytest.approx(max(case["time_us_by_worker"]))


def test_a_one_candidate_batch_keeps_spares_for_the_reference_s_workers(tmp_path, monkeypatch):
    """The reference is timed after the first candidate's import, when a batch of one (a
    sweep's) has already ended: its five fresh workers come from spares kept for them, not
    started one after another; the spares go once it is timed."""
    import shutil

    from pytest_kernelboard.supervisor.pool import WorkerPool

    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    asked: list[int] = []
    expect = WorkerPool.expect

    def recording(pool, takes):
        asked.append(takes)
        expect(pool, takes)

    monkeypatch.setattr(WorkerPool, "expect", recording)
    good = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
    (record,) = judge_many(
        "addone", [Candidate("a.py", good)], mode="benchmark", root=root, gpus=[]
    )
    assert record["status"] == "passed", record["message"]
    assert asked[0] >= 1  # at the batch's end the reference was still to be timed
    assert asked[-1] == 0  # and once it was, no spare was kept


def test_a_case_whose_reference_cannot_be_timed_says_why_in_its_record(core_repo, monkeypatch):
    """The reference's worker fails on a timed case: the candidate's case still passes, has no
    speedup, and its record says why (a sweep's row would otherwise show a bare null)."""
    from pytest_kernelboard.judge.core import SubmissionJudge
    from pytest_kernelboard.supervisor.failures import WorkerFailure

    time_case = SubmissionJudge.time_case

    def failing(judge, case, *args, **kwargs):
        if judge.entry == "ref_kernel":
            raise WorkerFailure("error", "the reference's worker ran out of device memory")
        return time_case(judge, case, *args, **kwargs)

    monkeypatch.setattr(SubmissionJudge, "time_case", failing)
    (record,) = judge_many(
        "addone", [Candidate("a.py", GOOD)], mode="benchmark", root=core_repo, gpus=[]
    )
    (timed,) = [case for case in record["cases"] if case["kind"] == "benchmark"]
    assert timed["status"] == "passed" and timed["speedup"] is None
    assert "ran out of device memory" in timed["reference_error"]
    assert timed["calls"] >= 5  # the candidate's own calls, counted whatever the reference did
    jsonschema.validate(record, record_schema())


@pytest.mark.parametrize("reference_workers", [None, 3])
def test_the_reference_s_workers_each_time_every_case(core_repo, monkeypatch, reference_workers):
    """The reference is timed in five fresh workers (or as many as asked for) on a leaderboard
    of three timed cases: each worker times all three, one after another, as the candidate's one
    worker does, so five workers start for the reference in all, not one per case and worker."""
    from pytest_kernelboard.batch.reference_share import REFERENCE_WORKERS
    from pytest_kernelboard.judge.core import SubmissionJudge

    task_yml = core_repo / "leaderboards" / "addone" / "task.yml"
    big = '  - {"size": 4096, "seed": 13, "flag": false, "label": "big"}\n'
    more = big.replace("4096", "2048").replace("big", "mid").replace("13", "14")
    more += big.replace("4096", "1024").replace("big", "small").replace("13", "15")
    task_yml.write_text(task_yml.read_text().replace(big, big + more))
    workers_by_case: dict[str, list[int]] = {}
    time_case = SubmissionJudge.time_case

    def recording(judge, case, *args, **kwargs):
        measured = time_case(judge, case, *args, **kwargs)
        if judge.entry == "ref_kernel":
            workers_by_case.setdefault(case.id, []).append(judge._worker.process.pid)
        return measured

    monkeypatch.setattr(SubmissionJudge, "time_case", recording)
    asked = {"reference_workers": reference_workers} if reference_workers else {}
    (record,) = judge_many(
        "addone", [Candidate("a.py", GOOD)], mode="benchmark", root=core_repo, gpus=[], **asked
    )
    assert record["status"] == "passed", record["message"]
    timed = [case for case in record["cases"] if case["kind"] == "benchmark"]
    assert len(timed) == 3 and all(case["reference_us"] for case in timed)
    assert len(workers_by_case) == 3
    pids = list(workers_by_case.values())
    assert all(len(set(each)) == (reference_workers or REFERENCE_WORKERS) for each in pids)
    assert pids[0] == pids[1] == pids[2]  # the same five workers, in the same order


@pytest.mark.parametrize(
    ("censuses", "fails"),
    [
        # Read slow beside other candidates' calls: taken again alone, where it agrees.
        ([[("gemm", 4698.8)], [("gemm", 2726.0)]], False),
        # Slow alone once more (one of 100 on an H200): a third reading, alone, agrees.
        ([[("gemm", 5100.0)], [("gemm", 4698.8)], [("gemm", 2726.0)]], False),
        ([[("hidden", 9000.0)]] * 3, True),  # every call, twice alone: failed
        ([[("gemm", 2726.0)]], False),  # agrees at once: no second census
    ],
)
def test_a_census_that_disagrees_with_the_timing_is_taken_once_more(tmp_path, censuses, fails):
    """A kernel of one census call read 4.7 ms against a 2.7 ms timed call, for identical
    code (one of 100 on an H200): a reading beside other candidates' calls, or one reading
    alone, is not enough to fail a candidate, while work on a stream the timed interval does
    not see shows in every call."""
    from types import SimpleNamespace

    from pytest_kernelboard.batch.judge import BatchJudge
    from pytest_kernelboard.judge.core import CaseOutcome
    from pytest_kernelboard.spec.cases import BENCHMARK, Case

    taken = list(censuses)
    source = tmp_path / "submission.py"
    source.write_text("def custom_kernel(data):\n    return data\n")
    evaluation = SimpleNamespace(
        judge=SimpleNamespace(kernel_census=lambda case, timeout: taken.pop(0)),
        ref=SimpleNamespace(path=source),
    )
    judge = SimpleNamespace(
        mode="benchmark",
        profile=False,
        task=None,
        session=SimpleNamespace(use_cuda=True, timeout=lambda task, kind: 60.0),
        turns=GpuTurns(),
    )
    outcome = CaseOutcome("passed", timing={"rank_us": 2727.9})
    BatchJudge._census(judge, evaluation, [(Case(BENCHMARK, 0, {"seed": 1}), outcome)])
    assert (outcome.status == "failed") is fails
    assert ("ran outside the timed stream" in outcome.message) is fails
    assert taken == []  # as many censuses as it took to decide


def test_a_candidate_without_a_passed_timed_case_takes_no_census_turn():
    """A candidate that failed (or hung) ahead has no census to take: it does not wait for
    the device, where the next candidates' correctness calls hold it (a hanging one's until
    its timeout: 10 s of a mixed batch, twice)."""
    import threading
    from types import SimpleNamespace

    from pytest_kernelboard.batch.judge import BatchJudge
    from pytest_kernelboard.judge.core import CaseOutcome
    from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case

    turns = GpuTurns()
    held, release = threading.Event(), threading.Event()

    def hanging_correctness_call() -> None:
        with turns.shared():
            held.set()
            release.wait(30)

    other = threading.Thread(target=hanging_correctness_call)
    other.start()
    held.wait(5)
    census = SimpleNamespace(judge=SimpleNamespace(kernel_census=lambda *_: [("k", 1.0)]))
    judge = SimpleNamespace(
        mode="benchmark",
        session=SimpleNamespace(use_cuda=True, timeout=lambda task, kind: 60.0),
        task=None,
        turns=turns,
    )
    failed = [
        (Case(TEST, 0, {"seed": 1}), CaseOutcome("failed")),
        (Case(BENCHMARK, 0, {"seed": 2}), CaseOutcome("failed")),
    ]
    answered: list = []
    asking = threading.Thread(
        target=lambda: answered.append(BatchJudge._census(judge, census, failed))
    )
    asking.start()
    asking.join(5)
    assert answered == [([], None)], "the census of a failed candidate waited for the device"

    # A passed one's census counts its kernels' names beside the correctness call...
    passed = [(Case(BENCHMARK, 0, {"seed": 2}), CaseOutcome("passed", timing={"rank_us": 2.0}))]
    census.ref = SimpleNamespace(path=Path(__file__))
    judge.profile = False
    asking = threading.Thread(
        target=lambda: answered.append(BatchJudge._census(judge, census, passed))
    )
    asking.start()
    asking.join(5)
    assert len(answered) == 2, "the census waited for a correctness call"

    # ... but with --profile, whose record keeps their durations, it has the device alone.
    judge.profile = True
    asking = threading.Thread(
        target=lambda: answered.append(BatchJudge._census(judge, census, passed))
    )
    asking.start()
    asking.join(0.5)
    assert asking.is_alive() and len(answered) == 2, "the census ran beside a correctness call"
    release.set()
    asking.join(5)
    other.join(5)
    assert len(answered) == 3


def _reference_session(timed, on_close=lambda: None):
    """Just what JudgingSession.time_references uses of a session: a reference judge whose
    worker times a case with `timed` and is replaced through `on_close`."""
    from types import SimpleNamespace

    reference_judge = SimpleNamespace(startup_s={}, close=on_close)
    return SimpleNamespace(
        reference_judge=lambda task: reference_judge, _timed_reference_case=timed
    )


@pytest.mark.parametrize(
    ("workers", "fails", "expected"),
    [
        # One worker (a GPU's share of one): each case handed on before the next is timed.
        (1, None, ["time a", "settled a", "time b", "settled b", "time c", "settled c"]),
        # Two: a case is final once its second worker timed it.
        (
            2,
            None,
            ["time a", "time b", "time c"]
            + ["time a", "settled a", "time b", "settled b", "time c", "settled c"],
        ),
        # A failed case is final at once, and no later worker times it.
        (
            2,
            "b",
            [
                "time a",
                "time b",
                "settled b",
                "time c",
                "time a",
                "settled a",
                "time c",
                "settled c",
            ],
        ),
    ],
)
def test_the_reference_s_cases_are_handed_on_as_each_is_final(workers, fails, expected):
    """A GPU's judge tells the parent of each case of its share of the reference as soon as
    its last worker has timed it, so a candidate timed on another GPU does not wait for the
    whole share (GPU MODE's eigh: 200 s of 13 cases in one worker)."""

    from pytest_kernelboard.evaluation.session import JudgingSession
    from pytest_kernelboard.spec.cases import BENCHMARK, Case
    from pytest_kernelboard.supervisor.failures import WorkerFailure

    events: list[str] = []
    cases = [Case(BENCHMARK, i, {"name": name}) for i, name in enumerate("abc")]
    names = {id(case): case.arguments(0)["name"] for case in cases}

    def timed(judge, task, case):
        events.append(f"time {names[id(case)]}")
        if names[id(case)] == fails:
            raise WorkerFailure("error", "the reference's worker crashed")
        return {"rank_us": 1.0, "elapsed_s": 0.0}

    results = JudgingSession.time_references(
        _reference_session(timed),
        None,
        cases,
        workers,
        settled=lambda i, result: events.append(f"settled {'abc'[i]}"),
    )
    assert events == expected
    assert [len(r) if isinstance(r, list) else "failed" for r in results] == [
        workers if name != fails else "failed" for name in "abc"
    ]


def test_a_host_bound_reference_case_is_timed_in_more_workers():
    """Where most of the reference's five workers found a case's calls host-bound, it is timed
    in nine: five give the spread too few degrees of freedom to trust for such a case. A
    device-bound case beside it keeps five, and each case is handed on once, when final."""

    from pytest_kernelboard.evaluation.session import JudgingSession
    from pytest_kernelboard.spec.cases import BENCHMARK, Case

    events: list[str] = []
    cases = [Case(BENCHMARK, i, {"name": name}) for i, name in enumerate("hd")]
    names = {id(case): case.arguments(0)["name"] for case in cases}
    starts = []

    def timed(judge, task, case):
        name = names[id(case)]
        events.append(f"time {name}")
        host_bound = 40 if name == "h" else 0
        return {"clock": "cuda_event", "n": 50, "host_bound_calls": host_bound, "rank_us": 1.0}

    session = _reference_session(timed, on_close=lambda: starts.append(1))
    results = JudgingSession.time_references(
        session,
        None,
        cases,
        5,
        settled=lambda i, result: events.append(f"settled {'hd'[i]} after {len(result)}"),
        host_bound_workers=9,
    )
    assert [len(r) for r in results] == [9, 5]
    assert len(starts) == 8  # a fresh worker for each after the first
    assert events.count("settled h after 9") == 1 and events.count("settled d after 5") == 1
    assert [e for e in events if e.startswith("settled")] == [
        "settled d after 5",
        "settled h after 9",
    ]
    assert events[-2:] == ["time h", "settled h after 9"]
    # Without the extension: five each.
    for host_bound_workers in (0, 5):
        events.clear()
        again = JudgingSession.time_references(
            session, None, cases, 5, host_bound_workers=host_bound_workers
        )
        assert [len(r) for r in again] == [5, 5]


@pytest.mark.parametrize("in_flight", [None, 2])
def test_a_judge_keeps_as_many_candidates_in_flight_as_asked(core_repo, monkeypatch, in_flight):
    """`--in-flight K`: while one candidate is judged, K - 1 others are prepared beside it
    (four in flight by default for a judge alone)."""
    from pytest_kernelboard.batch.judge import BatchJudge

    beside: list[int] = []
    judge_one = BatchJudge._judge_one

    def counting(self, candidate, evaluation, others):
        beside.append(len(others))
        return judge_one(self, candidate, evaluation, others)

    monkeypatch.setattr(BatchJudge, "_judge_one", counting)
    candidates = [Candidate(f"c{i}.py", GOOD) for i in range(6)]
    records = list(
        judge_many("addone", candidates, mode="test", root=core_repo, gpus=[], in_flight=in_flight)
    )
    assert [r["status"] for r in records] == ["passed"] * 6
    assert max(beside) == (in_flight or 4) - 1


@pytest.mark.parametrize("value", ["0", "17", "two"])
def test_in_flight_outside_its_bounds_is_refused_by_name(value, capsys):
    from pytest_kernelboard import cli

    with pytest.raises(SystemExit):
        cli.main(["judge", "addone", "a.py", "--in-flight", value])
    assert "--in-flight" in capsys.readouterr().err


def test_a_candidate_the_judge_fails_on_gets_a_harness_error_and_the_batch_goes_on(
    core_repo, monkeypatch, capsys
):
    """An exception of the judge's own while it judges one candidate (once: a score interval
    that overflowed) is that candidate's record, `harness_error`, with the exception named and
    its traceback on stderr; the candidates after it are judged, and `kernelboard judge`
    exits 1 once every record is written."""
    import argparse

    from pytest_kernelboard.batch import cli
    from pytest_kernelboard.batch import judge as batch_judge

    summary = batch_judge.evaluation_summary
    summaries: list[int] = []

    def failing_for_b(records, task, mode):  # the second candidate's, b.py's
        summaries.append(1)
        if len(summaries) == 2:
            raise OverflowError("math range error")
        return summary(records, task, mode)

    monkeypatch.setattr(batch_judge, "evaluation_summary", failing_for_b)
    candidates = [Candidate(name, GOOD) for name in ("a.py", "b.py", "c.py")]
    records = list(judge_many("addone", candidates, mode="test", root=core_repo, gpus=[]))
    assert [(r["id"], r["status"], r["error_kind"]) for r in records] == [
        ("a.py", "passed", None),
        ("b.py", "error", "harness_error"),
        ("c.py", "passed", None),
    ]
    assert "OverflowError: math range error" in records[1]["message"]
    assert "kernelboard's fault" in records[1]["message"]
    assert "Traceback" in capsys.readouterr().err
    for record in records:
        jsonschema.validate(record, record_schema())

    monkeypatch.setattr(cli, "judge_many", lambda *args, **kwargs: iter(records))
    monkeypatch.setattr(cli, "load_candidates", lambda paths: candidates)
    args = argparse.Namespace(candidates=[], out=None, root=None, ray=None, leaderboard="addone")
    args.mode, args.gpus, args.excessive_speedup, args.profile = "test", None, 10.0, False
    args.candidate_workers, args.reference_workers, args.in_flight = 1, 5, None
    assert cli.run(args) == 1
    assert "the judge itself failed on 1 candidate(s)" in capsys.readouterr().err
