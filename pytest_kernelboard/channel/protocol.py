"""The written protocol between the judge and a worker: the requests, their replies, the errors.

Every request is a dict `{"op": <Op value>, **arguments}`; every request gets exactly one reply
dict. A failed request's reply is `{"error": <text>, "kind": <ErrorKind value>}` (plus
`"exception"`, the exception's class name, where participant code raised). The judge decides
by `kind`, never by the wording of `error`, which is for people.

On the wire everything stays plain strings and dicts: the judge reads replies with a
data-only unpickler (wire.py) that must not need to resolve any class of ours, so an `Op` or
`ErrorKind` member is sent as its `.value` (they are `StrEnum`s, so comparisons with the
plain strings that arrive hold).
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any, TypedDict


class ProtocolError(Exception):
    """The worker sent something that is not a valid reply."""


class Op(enum.StrEnum):
    """The requests a worker serves (worker/main.py, Worker.serve)."""

    PING = "ping"  # is it up; its pid and whether it sees CUDA
    LOAD = "load"  # import the staged submission (or the reference) and find its entry point
    CALL = "call"  # one verified call
    TIME = "time"  # one timed call: flush, pre-roll or held stream, events (judge/measure.py)
    WARM = "warm"  # one untimed call on a kept input, just before a timed one (a warm host path)
    CALIBRATE = "calibrate"  # the harness's own overhead on empty calls, and the pre-roll
    PROFILE = "profile"  # one call inside a profiling range
    INIT_GROUP = "init_group"  # join a multi-GPU case's process group (worker/ranks.py)
    CEILING = "ceiling"  # all-reduces of a case's bytes over the group, timed (worker/ranks.py)
    ECHO = "echo"  # the transport probe: data + 1 back (channel/transport.py)
    EXIT = "exit"  # a polite exit; the judge kills the process group anyway
    WINDOW = "window"  # map the judge's device window; its descriptor follows the frame
    KERNELS = "kernels"  # one call under torch's profiler: the GPU kernels it launched


class ErrorKind(enum.StrEnum):
    """What kind of failure a worker's error reply reports (its `kind` key)."""

    ERROR = "error"  # participant code (or the reference) raised: `exception` names the class
    NO_ENTRY = "no_entry"  # the loaded module defines no callable entry point
    EXIT = "exit"  # the submission called exit() / raised SystemExit
    UNSENDABLE = "unsendable"  # the reply (its output) could not be pickled back
    NEEDS_CUDA = "needs_cuda"  # what raised says this machine has no CUDA (a skip, on CPU)
    PORT_TAKEN = "port_taken"  # the process group's port was taken before rank 0 bound it
    MISSING_MODULE = "missing_module"  # an import failed: `module` names what is not installed


# Messages that mean "this machine has no CUDA", not "the code is wrong".
_NEEDS_CUDA = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
    r"|CUDA_HOME environment variable is not set|no CUDA-capable device|CUDA driver version"
    r"|No module named '(cupy|cuda|pycuda)'|libcuda\.so|nvcc: not found|could not find nvcc"
    r"|cudaErrorNoDevice|Triton .*requires.*GPU|0 active drivers"
    r"|Cannot get CUDA generator|without ATen_cuda library",
    re.IGNORECASE,
)


def needs_cuda(message: str) -> bool:
    """Whether an exception's text says this machine lacks CUDA (read where it was raised)."""
    return bool(_NEEDS_CUDA.search(message))


def error_reply(
    message: str, kind: ErrorKind, exception: str | None = None, module: str | None = None
) -> dict[str, Any]:
    """An error reply as it goes on the wire: plain strings only."""
    reply: dict[str, Any] = {"error": message, "kind": ErrorKind(kind).value}
    if exception is not None:
        reply["exception"] = exception
    if module is not None:
        reply["module"] = module
    return reply


def classify(exc: BaseException, message: str) -> tuple[ErrorKind, str | None]:
    """The kind of what raised in the worker (and the module a failed import names), decided
    where the exception is, so the judge never reads the message to decide."""
    if needs_cuda(message):
        return ErrorKind.NEEDS_CUDA, None
    module = _missing_module(exc)
    if module is not None:
        return ErrorKind.MISSING_MODULE, module
    return ErrorKind.ERROR, None


def _missing_module(exc: BaseException | None) -> str | None:
    """The module a ModuleNotFoundError names, in exc or in what caused it (a toolchain that
    wraps its failed import in an error of its own)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


# -- requests: what each op carries besides "op" ------------------------------------------------
class LoadRequest(TypedDict):
    stage_dir: str  # where the worker sees the staged files
    module: str  # "submission" (its file name's stem) or "reference"
    entry: str  # "custom_kernel", or "ref_kernel" for the reference


class CallRequest(TypedDict):
    data: Any  # the worker's own copy of the input


class TimeRequest(TypedDict):
    data: Any
    flush_bytes: int  # bytes read to flush L2 before the call
    preroll_us: float  # the fallback GPU pre-roll (stats/preroll.py) where the stream is not held
    case: str  # the case the call belongs to: a new one moves the worker to the fastest CPU
    keep: bool  # keep a pristine copy of the input (once per case) for the warm requests
    wake: bool  # spin the GPU awake after an idle gap (off in a case timed in turns)


class WarmRequest(TypedDict):
    case: str  # the case the timed call that follows belongs to
    wake: bool  # as the timed call's


class CalibrateRequest(TypedDict):
    flush_bytes: int
    launch_allowance_us: float  # what calibrate adds to the harness's own dispatch time


class ProfileRequest(TypedDict):
    data: Any
    trace_path: str | None  # None: cudaProfilerStart/Stop for ncu; else a torch profiler trace


class KernelsRequest(TypedDict):
    data: Any


class InitGroupRequest(TypedDict):
    rank: int
    world_size: int
    port: int
    backend: str  # "nccl" or "gloo"
    group_timeout_s: float


class CeilingRequest(TypedDict):
    nbytes: int  # the bytes each rank all-reduces
    warmup: int  # untimed all-reduces first (the same count on every rank: they are collective)
    repetitions: int  # timed all-reduces, one sample each


class EchoRequest(TypedDict):
    data: Any


class WindowRequest(TypedDict):
    direction: str  # "in" (the judge's requests) or "out" (the worker's replies)
    size: int  # bytes of the allocation behind the descriptor
    device: int  # the CUDA device it lives on


REQUESTS: dict[Op, type | None] = {
    Op.PING: None,
    Op.LOAD: LoadRequest,
    Op.CALL: CallRequest,
    Op.TIME: TimeRequest,
    Op.WARM: WarmRequest,
    Op.CALIBRATE: CalibrateRequest,
    Op.PROFILE: ProfileRequest,
    Op.INIT_GROUP: InitGroupRequest,
    Op.CEILING: CeilingRequest,
    Op.ECHO: EchoRequest,
    Op.EXIT: None,
    Op.WINDOW: WindowRequest,
    Op.KERNELS: KernelsRequest,
}
# Added by the client to a request with CUDA tensors in `data` where they cross as host copies
# (channel/transport.py); the worker moves them to the GPU before the handler runs.
TRANSPORT_KEY = "transport"
# Added by the judge to a `call` or `time` request whose inputs and outputs are large: the worker
# returns its cached device memory before replying and puts the outputs in the inbound window,
# over the consumed inputs, where the judge checks them in place (judge/memory.py).
FRUGAL_KEY = "frugal"


def request_keys(op: Op) -> frozenset[str]:
    """The argument names a request for `op` carries (besides "op" and the transport key)."""
    described = REQUESTS[Op(op)]
    return frozenset(described.__annotations__) if described is not None else frozenset()


# -- replies: keys each request's reply must carry, with their types (numbers must be finite) ----
NUMBER = (int, float)
REPLY_KEYS: dict[str, dict[str, Any]] = {
    Op.PING.value: {"pid": int, "cuda": bool},
    Op.LOAD.value: {},
    Op.CALL.value: {"output": object},
    Op.PROFILE.value: {"output": object},
    Op.TIME.value: {"output": object, "device_us": NUMBER, "wall_us": NUMBER},
    Op.CALIBRATE.value: {
        "empty_device_us": NUMBER,
        "wall_gap_us": NUMBER,
        "preroll_us": NUMBER,
    },
    Op.INIT_GROUP.value: {"rank": int, "world_size": int, "backend": str},
    # samples_us: each timed all-reduce's microseconds on this rank, in order
    Op.CEILING.value: {"samples_us": list, "clock": str},
    Op.ECHO.value: {"output": object},
    Op.EXIT.value: {},
    Op.WINDOW.value: {},
    # kernels: [[name, device microseconds], ...] in launch order
    Op.KERNELS.value: {"output": object, "kernels": list},
    Op.WARM.value: {"warmed": bool},  # whether an untimed call ran
}
_SIGNED = {"wall_gap_us"}  # a difference of two clocks: may come out below zero
# Keys that may be absent but, when present, must have this type.
OPTIONAL_KEYS: dict[str, dict[str, Any]] = {
    # peak_bytes: the device memory the worker's allocator held at most during the request.
    # cpu: the CPU the call ran on, -1 where the worker left that to the scheduler.
    Op.TIME.value: {
        "dispatch_us": NUMBER,
        "aliased_bytes": NUMBER,
        "peak_bytes": NUMBER,
        "cpu": int,
        "synced": bool,  # timed without a pre-roll on an idle GPU: the call synchronises inside
        "pre_us": NUMBER,  # the worker's time before the call (input copy, wake): for messages
        "post_us": NUMBER,  # and after it, packing the output: for messages too
    },
    Op.CALL.value: {"peak_bytes": NUMBER},
    # released_bytes: the cached device memory a case's end gave back to the driver.
    Op.WINDOW.value: {"released_bytes": NUMBER},
}
_ERROR_KINDS = frozenset(kind.value for kind in ErrorKind)


def validate(op: str, reply: Any) -> dict[str, Any]:
    """The reply if it has the shape `op` promises; else ProtocolError naming what is wrong."""
    op = str(op)
    if not isinstance(reply, dict):
        raise ProtocolError(f"a {op!r} reply must be a dict, not {type(reply).__name__}")
    if "error" in reply:
        if not isinstance(reply["error"], str):
            raise ProtocolError("an error reply's message must be text")
        if reply.get("kind", ErrorKind.ERROR.value) not in _ERROR_KINDS:
            raise ProtocolError(f"an error reply's kind {reply.get('kind')!r} is not known")
        if not isinstance(reply.get("exception", ""), str):
            raise ProtocolError("an error reply's exception name must be text")
        if not isinstance(reply.get("module", ""), str):
            raise ProtocolError("an error reply's module name must be text")
        return reply
    optional = OPTIONAL_KEYS.get(op, {})
    for key, kind in [*REPLY_KEYS.get(op, {}).items(), *optional.items()]:
        if key not in reply:
            if key in optional:
                continue
            raise ProtocolError(f"the {op!r} reply lacks {key!r}")
        value = reply[key]
        if kind is object:
            continue
        if not isinstance(value, kind) or (kind is NUMBER and isinstance(value, bool)):
            raise ProtocolError(f"the {op!r} reply's {key!r} is a {type(value).__name__}")
        if kind is NUMBER and not (math.isfinite(value) and (value >= 0 or key in _SIGNED)):
            raise ProtocolError(f"the {op!r} reply's {key!r} is {value!r}")
    return reply


def error_kind(reply: dict[str, Any]) -> ErrorKind:
    """The kind of a validated error reply (a reply without one is a plain ERROR)."""
    return ErrorKind(reply.get("kind", ErrorKind.ERROR.value))
