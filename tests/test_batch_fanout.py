"""Several GPUs' judges (batch/fanout.py) share one timing of the reference: five workers in all,
dealt across the judges, combined by the parent as one judge would, the same for every record.

On a CPU machine the fanout still runs one judge process per named GPU (CUDA_VISIBLE_DEVICES is
only set), so the sharing is tested here without a GPU.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import made_once_per_run

from pytest_kernelboard.batch import Candidate, fanout, judge_many, reference_share
from pytest_kernelboard.batch.reference_share import REFERENCE_WORKERS
from pytest_kernelboard.evaluation.progress import Progress
from pytest_kernelboard.judge import devices
from pytest_kernelboard.results.reference_runs import ReferenceUnavailable
from pytest_kernelboard.stats.between_workers import combined_workers

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
WRONG = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 2)\n"
SYNTAX = "def custom_kernel(data)\n    return 1\n"
# Dealt around the two judges one at a time: judge 0 gets a, c, e and judge 1 b, d, f.
CANDIDATES = [
    Candidate("a-good.py", GOOD),
    Candidate("b-wrong.py", WRONG),
    Candidate("c-good.py", GOOD),
    Candidate("d-good.py", GOOD),
    Candidate("e-syntax.py", SYNTAX),
    Candidate("f-good.py", GOOD),
]
VERDICT = ("id", "status", "error_kind", "correct", "flags", "failed_case", "message")


class Lines(Progress):
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def case_timed(self, label: str, line: str) -> None:
        self.lines.append((label, line))


def benchmark_cases(record: dict) -> list[dict]:
    return [case for case in record["cases"] if case["kind"] == "benchmark"]


@pytest.fixture(scope="module")
def two_judges(tmp_path_factory) -> dict:
    """The batch judged in benchmark mode by two judge processes ('GPUs' 0 and 1) and by one
    in this process, with what the parent combined and what each judge said it did; judged
    once for the run, however many xdist processes take these tests."""
    return made_once_per_run(tmp_path_factory, "two_judges", lambda: judged(tmp_path_factory))


def judged(tmp_path_factory) -> dict:
    import shutil

    root = tmp_path_factory.mktemp("fanout") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    combined, accounts = [], []
    monkeypatch = pytest.MonkeyPatch()

    def combining(records):
        combined.append(records)
        return combined_workers(records)

    def account(message):
        accounts.append(message)
        return phase_line(message)

    phase_line = fanout.phase_line
    monkeypatch.setattr(fanout, "combined_workers", combining)
    monkeypatch.setattr(fanout, "phase_line", account)
    progress = Lines()
    try:
        shared = list(
            judge_many(
                "addone", CANDIDATES, mode="benchmark", root=root, gpus=[0, 1], progress=progress
            )
        )
        alone = list(judge_many("addone", CANDIDATES, mode="benchmark", root=root, gpus=[]))
    finally:
        monkeypatch.undo()
    return {
        "shared": shared,
        "alone": alone,
        "combined": combined,
        "accounts": accounts,
        "lines": progress.lines,
    }


@pytest.mark.runs_long
def test_two_judges_time_the_reference_in_five_workers_in_all(two_judges):
    # The fixture's one benchmark case: combined once, from five workers' timings.
    assert [len(records) for records in two_judges["combined"]] == [REFERENCE_WORKERS]
    shares = {a["workers"][0]: a for a in two_judges["accounts"] if a["phase"] == "reference"}
    assert {k: a["workers"] for k, a in shares.items()} == {0: [0, 2, 4], 1: [1, 3]}
    ends = [a for a in two_judges["accounts"] if a["phase"] == "candidates"]
    assert len(ends) == 2  # each judge timed its share only: five reference workers, not ten
    assert sum(a["reference_workers"] for a in ends) == REFERENCE_WORKERS
    assert sorted(a["candidates"] for a in ends) == [3, 3]
    assert all(a["reference_s"] > 0 and a["candidates_s"] >= a["waited_s"] >= 0 for a in ends)
    labels = [label for label, _ in two_judges["lines"]]
    assert labels.count("addone benchmark[size=4096-seed=13-flag=False-label=big] (reference)") == 1
    assert {"judge 0 (GPU 0)", "judge 1 (GPU 1)"} <= set(labels)  # the phase account
    # Each judge's share of the reference says where its workers' seconds went.
    shares = [text for label, text in two_judges["lines"] if "its share of the reference" in text]
    assert shares and all("worker_start" in text and "timing" in text for text in shares)
    # And how long the judge took to start before it: its process, zygote, first import.
    started = [a["started_s"] for a in two_judges["accounts"] if a["phase"] == "reference"]
    assert len(started) == 2 and all(0 < s < 120 for s in started)
    assert all("s after it was started" in text for text in shares)


@pytest.mark.runs_long
def test_every_record_of_the_batch_carries_the_same_reference(two_judges):
    (records,) = two_judges["combined"]
    chosen, relative_spread = combined_workers(records)
    passed = [r for r in two_judges["shared"] if r["status"] == "passed"]
    assert [r["id"] for r in passed] == ["a-good.py", "c-good.py", "d-good.py", "f-good.py"]
    for record in passed:  # judge 0 judged a and c, judge 1 d and f (as dealt above)
        (case,) = benchmark_cases(record)
        assert case["reference_us"] == chosen["rank_us"]
        assert math.isclose(case["between_workers_rsd"], relative_spread)
        assert case["speedup"] == pytest.approx(chosen["rank_us"] / case["time_us"])


@pytest.mark.runs_long
@pytest.mark.skipif(
    devices.has_cuda(),
    reason="compares host judges: on a GPU machine judge 0 of [0, 1] is on the GPU (its records "
    "carry GPU-only flags) and the lone judge of gpus=[] is not",
)
def test_verdicts_are_those_of_one_judge(two_judges):
    def verdicts(records: list[dict]) -> list[tuple]:
        return [tuple(str(r[key]) for key in VERDICT) for r in records]

    assert verdicts(two_judges["shared"]) == verdicts(two_judges["alone"])
    assert [r["status"] for r in two_judges["shared"]] == [
        "passed",
        "failed",
        "passed",
        "passed",
        "error",
        "passed",
    ]


def test_the_reference_workers_are_dealt_across_the_judges():
    for judges in range(1, 9):
        dealt = [reference_share.shared_workers(k, judges) for k in range(judges)]
        assert sorted(w for share in dealt for w in share) == list(range(REFERENCE_WORKERS))
        assert max(map(len, dealt)) == math.ceil(REFERENCE_WORKERS / judges)
        # the first judges get the first candidates (fanout deals from slot 0): fewest workers
        assert [len(share) for share in dealt] == sorted(len(share) for share in dealt)
    assert reference_share.shared_workers(0, 2) == [1, 3]
    assert reference_share.shared_workers(1, 2) == [0, 2, 4]
    assert reference_share.shared_workers(0, 4) == [3]
    assert reference_share.shared_workers(1, 8) == []
    # Three of the reference's workers over four GPUs (a sweep's long problem, one candidate):
    # the first judge, which gets the candidate, times none of them.
    assert [reference_share.shared_workers(k, 4, 3) for k in range(4)] == [[], [2], [1], [0]]
    assert fanout._Combiner(4, 3).dealt == {1, 2, 3}
    assert reference_share.ReferenceShare(3, 4, print, 3).total == 3


def timing(rank_us: float) -> dict:
    return {"rank_us": rank_us, "rank_ci95_us": [rank_us * 0.95, rank_us * 1.05], "n": 10}


def test_the_parent_combines_the_shares_as_one_judge_would():
    times = [130.0, 216.0, 150.0, 171.0, 140.0]
    combiner = fanout._Combiner(2)
    share = {"type": "reference_share", "case": "k", "label": "addone (reference)"}
    first = {**share, "workers": [1, 3], "timings": [timing(times[1]), timing(times[3])]}
    assert combiner.add(0, first, None) == []  # judge 1's share is still out
    progress = Lines()
    rest = {**share, "workers": [0, 2, 4], "timings": [timing(times[i]) for i in (0, 2, 4)]}
    (message,) = combiner.add(1, rest, progress)
    expected, relative_spread = combined_workers([timing(t) for t in times])
    assert message == {"type": "reference", "case": "k", "timing": expected}
    assert expected["rank_us"] == 150.0 and expected["rank_us_by_worker"] == times
    assert progress.lines[0][0] == "addone (reference)"
    assert f"spread {100 * relative_spread:.1f}%" in progress.lines[0][1]


def test_a_failed_share_or_an_ended_judge_fails_the_case_for_every_judge():
    combiner = fanout._Combiner(2)
    share = {"type": "reference_share", "case": "k", "label": "x"}
    combiner.add(1, {**share, "workers": [0, 2, 4], "error": "worker crashed"}, None)
    (failed,) = combiner.add(0, {**share, "workers": [1, 3], "timings": [timing(1)] * 2}, None)
    assert failed == {"type": "reference", "case": "k", "error": "worker crashed"}
    assert fanout._Combiner(8).end(1, 1) == []  # a judge with no share of it
    (broken,) = fanout._Combiner(2).end(1, 3)
    assert broken["case"] is None and "GPU 3 ended" in broken["error"]

    sent = []
    judge = reference_share.ReferenceShare(0, 2, sent.append)
    judge.deliver({"type": "reference", "case": "a", "timing": timing(5.0)})
    judge.deliver(broken)
    assert judge.combined("a") == timing(5.0)  # combined before the judge ended: kept
    with pytest.raises(ReferenceUnavailable, match="GPU 3 ended"):
        judge.combined("b")
    judge.publish("b", "x", [timing(1.0)] * 2)
    assert sent[0]["type"] == "reference_share" and sent[0]["workers"] == [1, 3]


def test_with_candidates_timed_in_turns_a_host_bound_case_keeps_the_five_workers():
    """Where candidates are timed in turns with the reference (evaluation/paired.py), their
    speedups come from those turns: the batch's timing of the reference stays at five."""
    judges = [reference_share.ReferenceShare(k, 2, lambda m: None) for k in range(2)]
    assert [j.host_bound_workers for j in judges] == [j.workers for j in judges]
    assert judges[1].host_bound_total == 5


def test_a_host_bound_case_s_shares_name_the_further_workers_and_combine_as_nine(monkeypatch):
    """Without turns, a host-bound case is timed in nine of the reference's workers in all:
    each judge times its share of the nine, its share of the five first, and names the
    workers it timed."""
    monkeypatch.setenv("KERNELBOARD_PAIRED_TURNS", "0")
    assert reference_share.shared_workers(1, 2, 9) == [0, 2, 4, 6, 8]
    sent: list[dict] = []
    judges = [reference_share.ReferenceShare(k, 2, sent.append) for k in range(2)]
    assert [j.host_bound_workers for j in judges] == [[1, 3, 5, 7], [0, 2, 4, 6, 8]]
    times = [130.0, 216.0, 150.0, 171.0, 140.0, 160.0, 145.0, 190.0, 155.0]
    judges[0].publish("k", "x", [timing(times[i]) for i in (1, 3, 5, 7)])
    judges[1].publish("k", "x", [timing(times[i]) for i in (0, 2, 4, 6, 8)])
    judges[1].publish("d", "x", [timing(t) for t in (1.0, 2.0, 3.0)])  # device-bound: five
    assert [m["workers"] for m in sent] == [[1, 3, 5, 7], [0, 2, 4, 6, 8], [0, 2, 4]]
    combiner = fanout._Combiner(2)
    assert combiner.add(0, sent[0], None) == []
    (message,) = combiner.add(1, sent[1], None)
    assert message["timing"]["rank_us_by_worker"] == times
    assert message["timing"]["rank_us"] == sorted(times)[4]


def test_a_multi_gpu_leaderboard_is_judged_by_one_judge_that_sees_every_gpu_named():
    """Each GPU gets a judge of its own, but a multi-GPU leaderboard's cases take all the GPUs
    named: pinned one each, every case read "needs 2 GPUs; this host has 1"."""
    from pytest_kernelboard.batch.judge import gpu_groups
    from pytest_kernelboard.spec.task import load_task

    leaderboards = Path(__file__).resolve().parents[1] / "leaderboards"
    assert gpu_groups(load_task(leaderboards / "allreduce_scale" / "task.yml"), [1, 2, 3]) == [
        [1, 2, 3]
    ]
    assert gpu_groups(load_task(leaderboards / "vectoradd" / "task.yml"), [0, 1]) == [[0], [1]]


def dealing_alone(gpus: int):
    """GpuJudges' dealing alone, with no processes: its `_tell` is the test's."""
    from collections import deque
    from queue import Queue

    judges = fanout.GpuJudges.__new__(fanout.GpuJudges)
    judges.processes, judges.gpus = [None] * gpus, [[g] for g in range(gpus)]
    judges.assigned, judges.told = [deque() for _ in range(gpus)], [{} for _ in range(gpus)]
    judges.told_count = [0] * gpus
    judges.ended, judges.broken, judges._sent, judges.inbox = set(), False, 0, Queue()
    judges.in_flight = fanout.IN_FLIGHT
    return judges


def answer(judges, slot: int, message: dict, place: int) -> None:
    """The judge's record of the candidate it got `place`-th."""
    record = {"id": message["candidate"]["id"], "status": "passed"}
    judges.inbox.put((slot, {"type": fanout.RECORD, "index": place, "record": record}))


def test_a_judge_s_records_out_of_order_are_put_back_in_place():
    """A judge passes over a candidate whose calls hang and sends the next ones' records first:
    the parent finds each record's candidate by its place, sends that judge the next candidates
    meanwhile, and yields the records in the order given."""
    judges = dealing_alone(1)
    told: list[tuple[str, int]] = []
    held: list[tuple[dict, int]] = []

    def tell(slot: int, message: dict) -> None:
        place = len(told)
        told.append((message["candidate"]["id"], len(judges.assigned[0])))
        if message["candidate"]["id"] == "a.py":  # it hangs: answered once the rest are
            held.append((message, place))
        else:
            answer(judges, slot, message, place)
        if len(told) == 6:
            answer(judges, slot, *held.pop())

    judges._tell = tell
    candidates = [Candidate(f"{name}.py", GOOD) for name in "abcdef"]
    records = list(judges.judge(candidates))
    assert [r["id"] for r in records] == [c.id for c in candidates]
    assert [name for name, _ in told] == [c.id for c in candidates]
    # All six were sent while the first was held, never more than IN_FLIGHT at once.
    assert max(in_flight for _, in_flight in told) == fanout.IN_FLIGHT
    # A served judge's places are let go with their records: nothing grows job after job.
    assert judges.told == [{}] and judges.told_count == [6]


def test_a_short_batch_is_dealt_around_the_judges():
    """Four candidates for two GPUs' judges go one to each in turn, not the first three to one
    judge: a batch shorter than the judges' queues still keeps every GPU busy."""
    judges = dealing_alone(2)
    dealt: list[tuple[int, str]] = []

    def tell(slot: int, message: dict) -> None:  # each judge answers at once
        dealt.append((slot, message["candidate"]["id"]))
        answer(judges, slot, message, sum(s == slot for s, _ in dealt) - 1)

    judges._tell = tell
    candidates = [Candidate(f"{name}.py", GOOD) for name in "abcd"]
    records = list(judges.judge(candidates))
    assert [r["id"] for r in records] == ["a.py", "b.py", "c.py", "d.py"]
    assert dealt == [(0, "a.py"), (1, "b.py"), (0, "c.py"), (1, "d.py")]


def test_one_gpu_other_than_the_first_gets_a_judge_process_that_sees_it_alone(
    tmp_path, monkeypatch
):
    """`--gpus 3` alone: a CUDA device set in the judging process holds for its calling
    thread only, and the threads that start workers stayed on GPU 0 (every input shared from
    GPU 3 failed to map in them, on a 4 x H200 host). The batch goes to a judge process that
    sees GPU 3 alone, as each GPU's does on several."""
    import shutil

    from pytest_kernelboard.batch.judge import judged_here

    assert judged_here([]) and judged_here([0])
    assert not judged_here([3]) and not judged_here([0, 1])
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    seen = []
    real_popen = fanout.subprocess.Popen

    def popen(command, **kwargs):
        seen.append(kwargs["env"]["CUDA_VISIBLE_DEVICES"])
        return real_popen(command, **kwargs)

    monkeypatch.setattr(fanout.subprocess, "Popen", popen)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (record,) = judge_many("addone", [Candidate("a.py", GOOD)], mode="test", root=root, gpus=[3])
    assert seen == ["3"]  # one judge process, pinned to GPU 3 before torch starts in it
    assert record["status"] == "passed", record


def test_a_gpus_judge_process_gets_no_more_candidates_at_once_than_in_flight(tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    commands, queued = [], []
    real_popen, tell = fanout.subprocess.Popen, fanout.GpuJudges._tell

    def popen(command, **kwargs):
        commands.append(command)
        return real_popen(command, **kwargs)

    def telling(self, slot, message):
        if message.get("type") == "candidate":
            queued.append(len(self.assigned[slot]))
        tell(self, slot, message)

    monkeypatch.setattr(fanout.subprocess, "Popen", popen)
    monkeypatch.setattr(fanout.GpuJudges, "_tell", telling)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    candidates = [Candidate(f"{c}.py", GOOD) for c in "abcde"]
    records = list(judge_many("addone", candidates, mode="test", root=root, gpus=[3], in_flight=2))
    assert [r["status"] for r in records] == ["passed"] * 5
    (command,) = commands
    assert command[command.index("--in-flight") + 1] == "2"  # its own look-ahead matches
    assert max(queued) == 2 and len(queued) == 5
