"""The written protocol (channel/protocol.py): the ops the worker serves, the error kinds its
replies carry, and the judge deciding by kind rather than by the wording of a message."""

from __future__ import annotations

import errno
import inspect
import pickle
import textwrap
from pathlib import Path

import pytest

from pytest_kernelboard.channel import protocol
from pytest_kernelboard.channel.protocol import ErrorKind, Op, ProtocolError
from pytest_kernelboard.judge.core import CaseOutcome, SubmissionJudge, lacks_cuda
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.plugin.selfcheck import outcome_missing_package
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.preroll import (
    MAX_PREROLL_US,
    preroll_for,
    proposed_preroll_us,
)
from pytest_kernelboard.supervisor import wire
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.failures import WorkerFailure, failure_of
from pytest_kernelboard.supervisor.pool import WorkerPool
from pytest_kernelboard.worker.main import Worker
from pytest_kernelboard.worker.ranks import init_group, port_taken

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"

# The worker's handler for each op that carries arguments (worker/main.py, Worker.serve).
HANDLERS = {
    Op.LOAD: Worker.load,
    Op.CALL: Worker.call,
    Op.TIME: Worker.time_call,
    Op.WARM: Worker.warm,
    Op.CALIBRATE: Worker.calibrate,
    Op.PROFILE: Worker.profile_call,
    Op.INIT_GROUP: init_group,
    Op.ECHO: Worker.echo,
}


@pytest.mark.parametrize("op", sorted(HANDLERS))
def test_each_request_description_matches_its_handler(op):
    parameters = inspect.signature(HANDLERS[op]).parameters
    names = {n for n in parameters if n not in ("self", "timer")}
    required = {n for n in names if parameters[n].default is inspect.Parameter.empty}
    described = protocol.request_keys(op)
    assert required <= described <= names, (op, required, described, names)


def test_every_op_is_described_and_every_reply_table_names_an_op():
    assert set(protocol.REQUESTS) == set(Op)
    assert set(protocol.REPLY_KEYS) == {op.value for op in Op}  # every reply has its shape
    assert set(protocol.OPTIONAL_KEYS) <= set(protocol.REPLY_KEYS)
    assert protocol.request_keys(Op.PING) == frozenset()
    assert protocol.request_keys("time") == {
        "data",
        "flush_bytes",
        "preroll_us",
        "case",
        "keep",
        "wake",
    }
    assert protocol.request_keys(Op.WARM) == {"case", "wake"}  # no data: the input comes after


def test_wire_values_are_plain_strings_the_data_only_unpickler_reads():
    reply = protocol.error_reply("no entry", ErrorKind.NO_ENTRY, "AttributeError")
    assert type(reply["kind"]) is str
    data = pickle.dumps(reply)
    assert b"protocol" not in data and b"ErrorKind" not in data
    assert wire.loads(data) == {
        "error": "no entry",
        "kind": "no_entry",
        "exception": "AttributeError",
    }
    request = {"op": Op(Op.TIME).value}
    assert type(request["op"]) is str and Op.TIME == "time"


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"error": "x", "kind": "oops"}, "kind 'oops' is not known"),
        ({"error": "x", "kind": 3}, "kind 3 is not known"),
        ({"error": "x", "exception": 7}, "exception name must be text"),
    ],
)
def test_error_replies_with_an_unknown_kind_break_the_protocol(reply, problem):
    with pytest.raises(ProtocolError, match=problem):
        protocol.validate(Op.CALL, reply)


def test_error_reply_kinds_reach_the_judge():
    assert protocol.validate("call", {"error": "x"}) == {"error": "x"}
    failure = failure_of({"error": "x", "kind": "needs_cuda", "exception": "RuntimeError"}, "m")
    assert (failure.status, failure.kind, failure.exception) == (
        "error",
        ErrorKind.NEEDS_CUDA,
        "RuntimeError",
    )
    assert failure_of({"error": "x"}, "m").kind is ErrorKind.ERROR


def test_cuda_is_missing_by_kind_and_only_a_dead_workers_log_is_read():
    text = "RuntimeError: Found no NVIDIA driver on your system"
    assert lacks_cuda(WorkerFailure("error", "x", ErrorKind.NEEDS_CUDA))
    # A submission's own error that merely mentions CUDA is its error, not a missing GPU.
    assert not lacks_cuda(WorkerFailure("error", text, ErrorKind.ERROR))
    assert lacks_cuda(WorkerFailure("crashed", "the worker exited with code 1\n" + text))
    assert not lacks_cuda(WorkerFailure("crashed", "the worker exited with code 1"))


def test_a_taken_port_is_recognised_where_the_exception_is():
    assert port_taken(OSError(errno.EADDRINUSE, "in use"))
    assert port_taken(RuntimeError("code: -98, name: EADDRINUSE, message: address already in use"))
    assert not port_taken(RuntimeError("connection refused"))
    assert not port_taken(OSError(errno.ECONNREFUSED, "refused"))


def test_the_preroll_policy():
    assert preroll_for(None) == 0.0 and preroll_for({}) == 0.0
    assert preroll_for({"preroll_us": 42.5}) == 42.5
    assert preroll_for({"preroll_us": 10 * MAX_PREROLL_US}) == MAX_PREROLL_US
    assert proposed_preroll_us(12.0, 30.0) == 42.0


# -- a real worker (CPU): each kind as the worker sends it ----------------------------------------
SOURCES = {
    "noentry.py": "def something_else(data):\n    return data\n",
    "kinds.py": """
        import sys

        def custom_kernel(data):
            if data == "cuda":
                raise RuntimeError("Found no NVIDIA driver on your system")
            if data == "exit":
                sys.exit(3)
            if data == "import":
                import kb_no_such_module.inner  # noqa: F401
            if data == "wrapped":
                try:
                    import kb_no_such_toolchain  # noqa: F401
                except ImportError as exc:
                    raise RuntimeError("the toolchain did not start") from exc
            if data == "local":
                class Local:  # copied fine, but a local class cannot be pickled back
                    pass

                return Local()
            raise ValueError("wrong on purpose")
    """,
}


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kinds")
    for name, source in SOURCES.items():
        (folder / name).write_text(textwrap.dedent(source))
    return folder


@pytest.fixture(scope="module")
def worker():
    process = WorkerProcess()
    process.ping()
    yield process
    process.close()


def test_a_module_without_its_entry_point_is_no_entry(worker, staged):
    with pytest.raises(WorkerFailure) as caught:
        worker.load(staged, "noentry", 60)
    assert (caught.value.status, caught.value.kind) == ("error", ErrorKind.NO_ENTRY)


@pytest.mark.parametrize(
    ("data", "kind", "exception"),
    [
        ("raise", ErrorKind.ERROR, "ValueError"),
        ("cuda", ErrorKind.NEEDS_CUDA, "RuntimeError"),
        ("exit", ErrorKind.EXIT, None),
        ("local", ErrorKind.UNSENDABLE, None),
        ("import", ErrorKind.MISSING_MODULE, "ModuleNotFoundError"),
        ("wrapped", ErrorKind.MISSING_MODULE, "RuntimeError"),
    ],
)
def test_what_went_wrong_in_a_call_arrives_as_its_kind(worker, staged, data, kind, exception):
    assert worker.alive  # an error reply leaves the worker up: each kind is one more request
    worker.load(staged, "kinds", 60)
    with pytest.raises(WorkerFailure) as caught:
        worker.request(Op.CALL, 60, data=data)
    assert (caught.value.status, caught.value.kind) == ("error", kind), str(caught.value)
    assert caught.value.exception == exception
    missing = {"import": "kb_no_such_module", "wrapped": "kb_no_such_toolchain"}.get(data)
    assert caught.value.module == missing


def test_the_template_check_fails_a_template_without_an_entry_point(tmp_path):
    task = load_task(ADDONE)
    submission = tmp_path / "template.py"
    submission.write_text("def kernel(data):\n    return data\n")
    judge = SubmissionJudge(task, LeaderboardModules(task), submission, False, WorkerPool(spares=0))
    try:
        outcome = judge.check_case(Case(TEST, 0, task.tests[0]), 60)
    finally:
        judge.close()
    assert (outcome.status, outcome.error_kind) == ("error", ErrorKind.NO_ENTRY), outcome.message


@pytest.mark.parametrize(
    ("outcome", "package"),
    [
        (
            CaseOutcome(
                "error", "x", error_kind=ErrorKind.MISSING_MODULE, missing_module="jax.numpy"
            ),
            "jax",
        ),
        (
            CaseOutcome(
                "error", "x", error_kind=ErrorKind.MISSING_MODULE, missing_module="jaxtyping"
            ),
            None,
        ),
        # A reply's kind decides, whatever its text quotes.
        (CaseOutcome("error", "No module named 'jax'", error_kind=ErrorKind.ERROR), None),
        # No reply (an eval.py run, a dead worker): the message is all there is.
        (CaseOutcome("crashed", "ModuleNotFoundError: No module named 'jaxlib.xla'"), "jaxlib"),
    ],
)
def test_a_missing_optional_package_is_read_from_the_kind(outcome, package):
    assert outcome_missing_package(outcome) == package
