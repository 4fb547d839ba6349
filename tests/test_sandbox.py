"""The worker sandbox: its command line, its policy, the runner's refusal, and replies read as
untrusted data."""

from __future__ import annotations

import os
import pickle
import textwrap
import types
import warnings
from pathlib import Path

import pytest
from conftest import SANDBOX_INSTALL, missing_system_tool

from pytest_kernelboard.channel import protocol
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.outside_clock import overclaimed, round_trip_us, unaccounted
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.pr import pipeline
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.supervisor import sandbox, wire
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.launch import Launcher
from pytest_kernelboard.supervisor.pool import WorkerPool

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"


def test_the_command_line_unshares_everything_and_binds_only_what_the_worker_needs(tmp_path):
    home, stage, cache = tmp_path / "home", tmp_path / "stage", tmp_path / "cache" / "triton"
    args = sandbox.bwrap_command(home, stage, [cache])
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc"):
        assert flag in args
    assert "--die-with-parent" in args and "--new-session" in args and args[-1] == "--"
    pairs = {(args[i], args[i + 1]) for i in range(len(args) - 1)}
    assert ("--ro-bind", str(stage)) in pairs  # the submission cannot rewrite its own stage
    assert ("--bind", str(cache)) in pairs and cache.is_dir()
    assert ("--tmpfs", str(home)) in pairs and ("--tmpfs", "/tmp") in pairs
    writable = {args[i + 1] for i in range(len(args) - 1) if args[i] == "--bind"}
    assert writable <= {str(cache), "/dev/shm"}  # nothing else of the host is writable
    assert ("--dev", "/dev") in pairs
    assert not any(a == "--bind" and b in ("/", os.path.expanduser("~")) for a, b in pairs)


def test_an_unknown_policy_is_named():
    with pytest.raises(sandbox.SandboxUnavailable, match="KERNELBOARD_SANDBOX='maybe'"):
        sandbox.policy({"KERNELBOARD_SANDBOX": "maybe"})
    assert sandbox.policy({}) == "auto"


def test_the_runner_refuses_to_evaluate_without_the_sandbox(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "probe", lambda: "bwrap is not installed")
    with pytest.raises(pipeline.PipelineError, match="--allow-unsandboxed"):
        pipeline.evaluate(tmp_path, tmp_path / "s.py", tmp_path / "run.json")


def test_replies_naming_code_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with pytest.raises(wire.ProtocolError, match="posix.system|os.system"):
        wire.loads(pickle.dumps({"output": Payload()}))
    assert not marker.exists()


@pytest.mark.parametrize(
    ("op", "reply", "problem"),
    [
        ("call", [1], "must be a dict"),
        ("call", {"outputs": 1}, "lacks 'output'"),
        ("time", {"output": 1, "device_us": "fast", "wall_us": 1.0}, "'device_us' is a str"),
        ("time", {"output": 1, "device_us": float("nan"), "wall_us": 1.0}, "nan"),
        ("time", {"output": 1, "device_us": -3.0, "wall_us": 1.0}, "-3.0"),
        ("call", {"error": 42}, "must be text"),
        ("time", {"output": 1, "device_us": 1, "wall_us": 1, "aliased_bytes": -1}, "-1"),
    ],
)
def test_malformed_replies_are_named(op, reply, problem):
    with pytest.raises(protocol.ProtocolError, match=problem):
        protocol.validate(op, reply)


def test_tensors_survive_the_data_only_unpickler():
    from multiprocessing.reduction import ForkingPickler

    import torch

    torch.multiprocessing.set_sharing_strategy("file_system")
    sent = (torch.arange(5, dtype=torch.float16), {"n": torch.tensor(3)}, torch.float32)
    back = wire.loads(bytes(ForkingPickler.dumps(sent)))
    assert torch.equal(back[0], sent[0]) and back[1]["n"].item() == 3 and back[2] is torch.float32


def test_the_round_trip_taken_off_cpu_times_is_the_least_one_measured():
    # Measured while the host was busy, most empty requests took long; the least is what every
    # request costs at minimum, so no timed call loses more than its own round trip.
    measured = iter([1300.0, 1250.0, 90.0, 1400.0])
    worker = types.SimpleNamespace(
        request=lambda op, timeout: types.SimpleNamespace(outside_us=next(measured))
    )
    assert round_trip_us(worker, n=4) == 90.0


def test_the_gpu_cross_check_catches_reports_the_judge_did_not_see():
    assert overclaimed(10.0, 40.0, 300.0) is None  # honest: a short call
    assert overclaimed(900.0, 950.0, 1000.0) is None  # honest: a long call
    assert "whole request took" in overclaimed(5000.0, 5000.0, 1000.0)
    assert unaccounted(40.0, 300.0, 80.0) is None and unaccounted(950.0, 1000.0, 80.0) is None
    assert "outside its timed interval" in unaccounted(5.0, 10_000.0, 80.0)


def test_a_judge_whose_input_cannot_be_shared_fails_that_case_only(monkeypatch, tmp_path):
    """A full /dev/shm makes sharing the input fail in the judge: the case errors, clearly."""
    task = load_task(ADDONE)
    path = tmp_path / "submission.py"
    path.write_text(
        textwrap.dedent("""
        def custom_kernel(data):
            x, out = data
            return out.copy_(x + 1)
    """)
    )
    judge = SubmissionJudge(
        task, LeaderboardModules(task), path, use_cuda=False, pool=WorkerPool(spares=0)
    )
    try:
        worker = judge.worker()

        def full(message, pass_fd=None):
            raise RuntimeError("unable to write to file </torch_1_2_3>: No space left on device")

        monkeypatch.setattr(worker, "send", full)
        outcome = judge.check_case(Case(TEST, 0, task.tests[0]), 20.0)
    finally:
        judge.close()
    assert outcome.status == "error"
    assert "could not be sent to the worker" in outcome.message
    assert "No space left" in outcome.message


@pytest.fixture
def fresh_policy(monkeypatch):
    """sandbox.enabled() decides once per session; these tests decide again."""
    sandbox.enabled.cache_clear()
    yield monkeypatch
    sandbox.enabled.cache_clear()


def test_without_bwrap_auto_warns_once_and_runs_as_before(fresh_policy):
    fresh_policy.setattr(sandbox, "probe", lambda: "bwrap is not installed")
    fresh_policy.setenv("KERNELBOARD_SANDBOX", "auto")
    with pytest.warns(UserWarning, match="WITHOUT the worker sandbox.*bwrap is not installed"):
        assert sandbox.enabled() is False
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        assert sandbox.enabled() is False
    assert later == []  # decided once: one warning line per session


def test_without_bwrap_require_refuses(fresh_policy):
    fresh_policy.setattr(sandbox, "probe", lambda: "bwrap is not installed")
    fresh_policy.setenv("KERNELBOARD_SANDBOX", "require")
    with pytest.raises(sandbox.SandboxUnavailable, match="required"):
        sandbox.enabled()


def test_off_never_probes(fresh_policy):
    fresh_policy.setattr(sandbox, "probe", lambda: pytest.fail("probed"))
    fresh_policy.setenv("KERNELBOARD_SANDBOX", "off")
    assert sandbox.enabled() is False


def test_a_profiler_starts_inside_the_sandbox_with_its_target(tmp_path):
    """Across the sandbox's namespaces Nsight Compute never reaches the process it launched
    (it waits forever), so a launcher runs inside the cage: it sees its own folder, read-only,
    and writes its report where the judge reads it."""
    if (reason := sandbox.probe()) is not None:
        missing_system_tool(
            f"needs the worker sandbox, unavailable here: {reason}", SANDBOX_INSTALL
        )
    tool_dir, output_dir = tmp_path / "tool", tmp_path / "reports"
    tool_dir.mkdir()
    output_dir.mkdir()
    profiler = tool_dir / "profiler"
    profiler.write_text(
        textwrap.dedent("""\
            #!/bin/sh
            report=$1; shift
            cat /proc/sys/kernel/hostname > "$report"
            id -u >> "$report"
            touch "$(dirname "$0")/scribble" 2>/dev/null && echo writable >> "$report"
            exec "$@"
            """)
    )
    profiler.chmod(0o755)
    report = output_dir / "report.txt"
    worker = WorkerProcess(
        launcher=Launcher((str(profiler), str(report)), tool_dir, output_dir), sandboxed=True
    )
    try:
        worker.ping(60)
    finally:
        worker.close()
    assert report.read_text().split() == ["kernelboard-worker", str(sandbox.SANDBOX_UID)]
    assert not (tool_dir / "scribble").exists()
