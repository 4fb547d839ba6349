"""GPU leases under `pytest -n`: one GPU per xdist worker, multi-GPU cases on whole GPU sets.

The host is faked: a list of GPU names and a lock folder (the leases never touch CUDA), so all
of this runs on a CPU. Rank processes are real (gloo), and so is one `pytest -n 2` run.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kernelboard.judge import gpu_lease
from pytest_kernelboard.judge.core import Skip
from pytest_kernelboard.judge.gpu_lease import GpuLeases, LeaseTimeout, process_view
from pytest_kernelboard.plugin import xdist_gpus
from pytest_kernelboard.plugin.items import REPORT_SECTION, ItemLeases, gpus_needed
from pytest_kernelboard.plugin.xdist_gpus import XdistWorker, pin_xdist_worker
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.failures import WorkerFailure

ROOT = Path(__file__).resolve().parent.parent
HOST = ["0", "1", "2", "3"]  # the fake host's GPUs, in host order


def leases_of(folder: Path, own: int, **kwargs) -> GpuLeases:
    kwargs.setdefault("timeout_s", 20.0)
    kwargs.setdefault("poll_s", 0.005)
    return GpuLeases(folder, HOST, own, holder=f"gw{own}", **kwargs)


# -- which GPUs ---------------------------------------------------------------------------------
def test_a_worker_numbers_its_own_gpu_first_and_leases_the_lowest_others():
    assert process_view(HOST, 2) == ["2", "0", "1", "3"]
    assert process_view(["5", "7"], 1) == ["7", "5"]


def test_a_lease_takes_the_first_gpus_of_the_workers_view(tmp_path):
    leases = leases_of(tmp_path, own=2)
    assert leases.devices(1) == ["2"]
    assert leases.devices(3) == ["2", "0", "1"]
    with pytest.raises(ValueError, match="a lease of 5 GPUs on a host of 4"):
        leases.devices(5)


@pytest.mark.parametrize(
    ("worker", "expected"),
    [("gw0", "0,1,2,3"), ("gw1", "1,0,2,3"), ("gw3", "3,0,1,2"), ("gw5", "1,0,2,3")],
)
def test_xdist_worker_sees_its_own_gpu_as_cuda_0(worker, expected):
    environ = {"CUDA_VISIBLE_DEVICES": ",".join(HOST)}
    pin_xdist_worker(XdistWorker(worker, 4), environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == expected


def test_under_n_a_worker_can_run_a_case_on_the_hosts_gpus_and_no_more(monkeypatch):
    """Each worker once saw only its own GPU, so every 2-rank case skipped ('this host has 1')."""
    from pytest_kernelboard.judge import distributed

    environ = {"CUDA_VISIBLE_DEVICES": ",".join(HOST)}
    pin_xdist_worker(XdistWorker("gw1", 4), environ)
    seen = len(environ["CUDA_VISIBLE_DEVICES"].split(","))  # the judge's device_count()
    monkeypatch.setattr(distributed, "ranks_available", lambda use_cuda: seen)
    judge = distributed.DistributedJudge.__new__(distributed.DistributedJudge)
    judge.use_cuda = True
    judge._require_ranks(2)
    judge._require_ranks(4)
    with pytest.raises(Skip, match="^needs 8 GPUs; this host has 4 "):
        judge._require_ranks(8)


# -- (a) single-GPU items side by side ----------------------------------------------------------
def test_single_gpu_items_on_different_gpus_run_at_once(tmp_path):
    first = leases_of(tmp_path, own=0, timeout_s=0.5).acquire(1, "a")
    second = leases_of(tmp_path, own=1, timeout_s=0.5).acquire(1, "b")  # no LeaseTimeout
    assert (first.devices, second.devices) == (("0",), ("1",))
    assert first.waited_for == second.waited_for == ""
    first.release()
    second.release()


def test_workers_sharing_a_gpu_keep_running_side_by_side(tmp_path):
    """-n above the GPU count: gw0 and gw4 share GPU 0, as before leases."""
    with leases_of(tmp_path, own=0, timeout_s=0.5).acquire(1, "gw0 item"):
        with leases_of(tmp_path, own=0, timeout_s=0.5).acquire(1, "gw4 item") as lease:
            assert lease.devices == ("0",) and not lease.exclusive


# -- (b) a multi-GPU case and the single-GPU items on its GPUs wait for each other --------------
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from pytest_kernelboard.judge.gpu_lease import GpuLeases

    folder, own, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    leases = GpuLeases(folder, {host!r}, own, holder=f"gw{{own}}", timeout_s=20, poll_s=0.005)
    lease = leases.acquire(count, "child item")
    print("held", ",".join(lease.devices), flush=True)
    sys.stdin.readline()
    lease.release()
    """
)


def start_holder(folder: Path, own: int, count: int) -> subprocess.Popen:
    """Another xdist worker, as a process: it leases `count` GPUs and holds them until told."""
    script = HOLDER.format(root=str(ROOT), host=HOST)
    return subprocess.Popen(
        [sys.executable, "-c", script, str(folder), str(own), str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def line_within(process: subprocess.Popen, seconds: float) -> str | None:
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return process.stdout.readline().strip() if ready else None


def acquire_in_thread(leases: GpuLeases, count: int, what: str) -> tuple[threading.Thread, dict]:
    got: dict = {}

    def take() -> None:
        got["lease"] = leases.acquire(count, what)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, got


def test_a_two_gpu_case_waits_for_the_single_gpu_item_on_its_gpu(tmp_path):
    holder = start_holder(tmp_path, own=1, count=1)  # gw1 runs an item on GPU 1
    try:
        assert line_within(holder, 10) == "held 1"
        thread, got = acquire_in_thread(leases_of(tmp_path, own=0), 2, "gw0's 2-rank case")
        thread.join(0.5)
        assert thread.is_alive()  # it needs GPU 1 too
        holder.stdin.write("done\n")
        holder.stdin.flush()
        thread.join(5)
        lease = got["lease"]
        assert lease.devices == ("0", "1") and lease.exclusive
        assert lease.waited_s >= 0.4
        assert "GPU 1 held by gw1" in lease.waited_for and "child item" in lease.waited_for
        lease.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_single_gpu_item_waits_for_the_multi_gpu_case_on_its_gpu(tmp_path):
    case = leases_of(tmp_path, own=0).acquire(2, "gw0's 2-rank case")  # GPUs 0 and 1
    holder = start_holder(tmp_path, own=1, count=1)  # gw1's next item, on GPU 1
    try:
        assert line_within(holder, 1.0) is None
        case.release()
        assert line_within(holder, 10) == "held 1"
    finally:
        case.release()
        holder.kill()
        holder.wait()


def test_a_waiting_case_is_not_starved_by_items_back_to_back(tmp_path):
    """gw1 leases GPU 1 again right after each item; the gate still lets gw0's case in."""
    stop = threading.Event()

    def items_back_to_back() -> None:
        leases = leases_of(tmp_path, own=1)
        while not stop.is_set():
            with leases.acquire(1, "gw1 item"):
                time.sleep(0.02)

    runner = threading.Thread(target=items_back_to_back, daemon=True)
    runner.start()
    try:
        time.sleep(0.1)
        started = time.monotonic()
        with leases_of(tmp_path, own=0, timeout_s=5).acquire(2, "gw0 case"):
            assert time.monotonic() - started < 2
    finally:
        stop.set()
        runner.join(5)


def test_a_dead_holders_gpus_are_free_at_once(tmp_path):
    holder = start_holder(tmp_path, own=1, count=2)  # GPUs 1 and 0
    assert line_within(holder, 10) == "held 1,0"
    holder.kill()  # flock goes with its last descriptor
    holder.wait()
    with leases_of(tmp_path, own=0, timeout_s=2).acquire(2, "next case") as lease:
        assert lease.waited_for == ""


# -- waiting is shown, and has a limit ----------------------------------------------------------
def test_a_long_wait_is_reported_and_a_timeout_names_the_holder(tmp_path):
    case = leases_of(tmp_path, own=1).acquire(2, "leaderboards/x::solution[correct/a.py]")
    lines: list[str] = []
    waiter = leases_of(tmp_path, own=0, timeout_s=0.6, notice_after_s=0.2)
    with pytest.raises(LeaseTimeout) as timeout:
        waiter.acquire(1, "leaderboards/y::test[n=1]", on_wait=lines.append)
    case.release()
    message = str(timeout.value)
    assert message.startswith("no lease on GPU 0 after 0.6 s: leaderboards/y::test[n=1] needs")
    assert "held by gw1 (pid" in message and "solution[correct/a.py]" in message
    assert gpu_lease.TIMEOUT_VARIABLE in message
    assert len(lines) == 1 and lines[0].startswith("gw0: leaderboards/y::test[n=1] has waited")
    assert "held by gw1" in lines[0]
    assert waiter.records() == []  # the waiter left nothing behind


def test_the_timeout_comes_from_the_environment():
    assert gpu_lease.timeout_from_environment({}) == gpu_lease.DEFAULT_TIMEOUT_S
    assert gpu_lease.timeout_from_environment({gpu_lease.TIMEOUT_VARIABLE: "90"}) == 90.0
    with pytest.raises(ValueError, match=f"{gpu_lease.TIMEOUT_VARIABLE}='soon'"):
        gpu_lease.timeout_from_environment({gpu_lease.TIMEOUT_VARIABLE: "soon"})


# -- (c) no deadlock ----------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [4, 8])
def test_mixed_items_of_many_workers_never_deadlock_or_overlap(tmp_path, workers):
    """Workers lease 1 to 4 GPUs at random, back to back; 8 workers share the 4 GPUs."""
    active: dict[str, list[bool]] = {gpu: [] for gpu in HOST}  # each holder's exclusivity
    guard = threading.Lock()
    problems: list[str] = []
    finished: list[int] = []

    def worker(index: int) -> None:
        rng = random.Random(index)
        leases = GpuLeases(tmp_path, HOST, index % 4, f"gw{index}", timeout_s=20, poll_s=0.002)
        try:
            for call in range(20):
                with leases.acquire(rng.choice([1, 1, 2, 3, 4]), f"gw{index}#{call}") as lease:
                    with guard:
                        for gpu in lease.devices:
                            if active[gpu] and (lease.exclusive or any(active[gpu])):
                                problems.append(f"gw{index}#{call} overlaps on GPU {gpu}")
                            active[gpu].append(lease.exclusive)
                    time.sleep(rng.uniform(0, 0.003))
                    with guard:
                        for gpu in lease.devices:
                            active[gpu].remove(lease.exclusive)
            finished.append(index)
        except Exception as exc:
            problems.append(f"gw{index}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 25
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not problems
    assert sorted(finished) == list(range(workers)), "a worker never finished: deadlock"


# -- (d) the ranks run on the leased GPUs --------------------------------------------------------
# The rank's view, said at import: a request with data would first hand the rank a device window
# where the judge has CUDA, which ranks shown made-up GPUs cannot map.
RANK_VIEW = 'import os\nraise RuntimeError("view=" + os.environ["CUDA_VISIBLE_DEVICES"])\n'


@pytest.mark.runs_long  # two rank processes start
def test_the_ranks_of_a_case_get_the_leased_gpus(tmp_path, monkeypatch):
    # Names no CUDA device has: the ranks of a case are started (start_case) and say what they
    # see, without a process group, so neither a GPU nor a collective is needed to read it.
    host = ["fake0", "fake1", "fake2", "fake3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(host))
    pin_xdist_worker(XdistWorker("gw2", 4), gpus=host)  # this process is gw2 now
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "view.py").write_text(RANK_VIEW)
    folder = tmp_path / "leases"
    lease = GpuLeases(folder, host, 2, "gw2", poll_s=0.005).acquire(2, "gw2's 2-rank case")
    ranks = []
    try:
        ranks = WorkerProcess.case_ranks(2)
        views = []
        for rank in ranks:
            with pytest.raises(WorkerFailure) as raised:
                rank.load(stage, "view", 60)
            views.append(re.search(r"view=([\w,]+)", str(raised.value)).group(1))
        # Rank r is cuda:r of the leased GPUs: gw2's own first, then the next free one.
        assert list(lease.devices) == ["fake2", "fake0"]
        assert views == ["fake2,fake0"] * 2
        with pytest.raises(LeaseTimeout):  # gw0 cannot start an item on its GPU meanwhile
            GpuLeases(folder, host, 0, "gw0", timeout_s=0.2).acquire(1, "gw0 item")
    finally:
        for rank in ranks:
            rank.close()
        lease.release()


# -- which items lease how many -----------------------------------------------------------------
class FakeItem:
    """What ItemLeases and gpus_needed read of an item."""

    def __init__(self, nodeid="t.py::test_x", marker=None, task=None):
        self.nodeid = nodeid
        self.marker = marker
        self.parent = SimpleNamespace(task=task)
        self.stash = pytest.Stash()
        self.sections: list[tuple[str, str, str]] = []
        self.config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: None))

    def get_closest_marker(self, name):
        return self.marker if name == "gpus" else None

    def listchain(self):
        return [self.parent, self]

    def add_report_section(self, when, key, content):
        self.sections.append((when, key, content))


def test_items_lease_what_their_cases_run_on(tmp_path):
    (tmp_path / "reference.py").write_text("")
    (tmp_path / "task.yml").write_text(
        "files:\n  - {name: submission.py, source: '@SUBMISSION@'}\n"
        "description: d\nmulti_gpu: true\n"
        "tests:\n  - {world_size: 2}\nbenchmarks:\n  - {world_size: 4}\n  - {world_size: 8}\n"
    )
    multi = load_task(tmp_path / "task.yml")
    single = load_task(ROOT / "leaderboards" / "vectoradd" / "task.yml")
    assert gpus_needed(FakeItem(task=single), 4) == 1
    assert gpus_needed(FakeItem(), 4) == 1  # a plain test: its own GPU
    # the largest world_size this host runs; the 8-GPU case is skipped with the reason
    assert [gpus_needed(FakeItem(task=multi), host) for host in (1, 2, 3, 4, 8)] == [1, 2, 2, 4, 8]
    assert gpus_needed(FakeItem(marker=pytest.mark.gpus(2).mark), 4) == 2
    assert gpus_needed(FakeItem(marker=pytest.mark.gpus(3).mark), 2) == 2
    with pytest.raises(ValueError, match="t.py::test_x: the gpus marker takes a positive"):
        gpus_needed(FakeItem(marker=pytest.mark.gpus("two").mark), 4)


def test_an_item_holds_its_lease_from_setup_to_teardown_and_reports_a_wait(tmp_path, capsys):
    case = leases_of(tmp_path, own=1).acquire(2, "gw1's case")
    plugin = ItemLeases(leases_of(tmp_path, own=0, notice_after_s=0.2))
    item = FakeItem("leaderboards/x/task.yml::solution[correct/a.py]")
    threading.Timer(0.5, case.release).start()
    plugin.pytest_runtest_setup(item)
    progress = capsys.readouterr().err
    assert progress.startswith("kernelboard gw0: leaderboards/x/task.yml::solution[correct/a.py]")
    assert re.search(
        r"has waited \d+ s for GPU 0 \(it needs GPU 0\); held by gw1 \(pid \d+: gw1's case, "
        r"for \d+ s\)\n$",
        progress,
    ), progress
    [(when, key, text)] = item.sections
    assert (when, key) == ("setup", REPORT_SECTION)
    assert text.startswith("waited ") and "for GPU(s) 0: GPU 0 held by gw1" in text
    with pytest.raises(LeaseTimeout):  # held until teardown
        leases_of(tmp_path, own=1, timeout_s=0.2).acquire(2, "gw1's next case")
    teardown = plugin.pytest_runtest_teardown(item, None)
    next(teardown)
    with pytest.raises(StopIteration):
        teardown.send(None)
    leases_of(tmp_path, own=1, timeout_s=0.5).acquire(2, "gw1's next case").release()


def test_an_item_that_gets_no_lease_fails_with_the_reason(tmp_path):
    case = leases_of(tmp_path, own=0).acquire(2, "gw0's case")
    plugin = ItemLeases(leases_of(tmp_path, own=1, timeout_s=0.2))
    try:
        with pytest.raises(pytest.fail.Exception, match="no lease on GPU 1 after 0.2 s"):
            plugin.pytest_runtest_setup(FakeItem())
    finally:
        case.release()


def test_without_xdist_nothing_is_pinned_or_leased(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    registered: dict[str, object] = {}
    config = SimpleNamespace(
        addinivalue_line=lambda *a: None,
        pluginmanager=SimpleNamespace(
            register=lambda plugin, name: registered.update({name: plugin})
        ),
    )
    assert xdist_gpus.configure(config) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert list(registered) == ["kernelboard-gpu-lease-folder"]  # the controller's, idle
    assert registered["kernelboard-gpu-lease-folder"].folder is None


# -- a real `pytest -n 2` -----------------------------------------------------------------------
@pytest.mark.runs_long  # a nested pytest -n 2: three processes start
def test_pytest_n_pins_each_worker_and_runs_a_two_gpu_item_on_both_gpus_alone(
    pytester, monkeypatch, tmp_path
):
    pytester.makepyfile(
        test_items="""
        import json, os, pathlib, time, pytest

        def record(name):
            start = time.time()
            time.sleep(0.3)
            out = pathlib.Path(os.environ["LEASE_OUT"]) / f"{name}.json"
            out.write_text(json.dumps({
                "worker": os.environ["PYTEST_XDIST_WORKER"],
                "visible": os.environ["CUDA_VISIBLE_DEVICES"],
                "start": start,
                "end": time.time(),
            }))

        @pytest.mark.parametrize("n", range(4))
        def test_single(n):
            record(f"single{n}")

        @pytest.mark.gpus(2)
        @pytest.mark.parametrize("n", range(2))
        def test_pair(n):
            record(f"pair{n}")
        """
    )
    out, scratch = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    monkeypatch.setenv("LEASE_OUT", str(out))
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the controller makes the lease folder
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # this checkout's plugin in the subprocess
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    runs = {f.stem: json.loads(f.read_text()) for f in out.iterdir()}
    views = {run["worker"]: run["visible"] for run in runs.values()}
    assert views and all(views[w] == {"gw0": "5,7", "gw1": "7,5"}[w] for w in views), views
    for name, pair in runs.items():
        if name.startswith("pair"):
            for other_name, other in runs.items():
                overlap = other["start"] < pair["end"] and pair["start"] < other["end"]
                assert other_name == name or not overlap, (name, other_name, runs)
    assert not list(scratch.glob("kb-gpu-leases-*"))  # removed at the session's end


def test_a_cases_ranks_see_only_the_gpus_it_leased() -> None:
    """gw2 of four numbers its GPUs 2,0,1,3 and leases the first two for a 2-rank case: its
    ranks see GPUs 2 and 0 alone (rank r still cuda:r); without a numbering nothing is set."""
    import types

    from pytest_kernelboard.supervisor import launch

    ranks = [types.SimpleNamespace(env={"CUDA_VISIBLE_DEVICES": "2,0,1,3"}) for _ in range(2)]
    launch.see_leased_gpus(ranks, 2)
    assert [rank.env["CUDA_VISIBLE_DEVICES"] for rank in ranks] == ["2,0", "2,0"]
    alone = [types.SimpleNamespace(env={})]
    launch.see_leased_gpus(alone, 1)
    assert "CUDA_VISIBLE_DEVICES" not in alone[0].env


def test_a_single_gpu_worker_sees_the_judges_own_gpu_alone() -> None:
    """gw2 numbers its GPUs 2,0,1,3: a submission's worker sees GPU 2 alone (a library that
    starts every visible GPU must not move the current device off the judge's); without a
    numbering, the judge's cuda:0; a numbering that hides every GPU stays."""
    from pytest_kernelboard.supervisor import launch

    for judge, worker in (("2,0,1,3", "2"), (None, "0"), ("", "")):
        env = {} if judge is None else {"CUDA_VISIBLE_DEVICES": judge}
        launch.see_own_gpu(env)
        assert env["CUDA_VISIBLE_DEVICES"] == worker


def test_a_judge_on_another_of_its_gpus_leaves_its_workers_numbering(monkeypatch) -> None:
    """judge --gpus 2 in one process works on its cuda:2 and names device 2 to its workers:
    they keep the judge's whole numbering, where that index means the same GPU."""
    from pytest_kernelboard.supervisor import launch

    monkeypatch.setattr(launch, "_judge_device", lambda: 2)
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    launch.see_own_gpu(env)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    unset: dict[str, str] = {}
    launch.see_own_gpu(unset)
    assert "CUDA_VISIBLE_DEVICES" not in unset
