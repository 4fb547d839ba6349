"""The judge's own clock around a timed request: what a submission's code cannot patch.

The worker runs participant code, so everything it reports is a claim. On the CPU the time that
ranks is the judge's wall time from the request's send to its reply's arrival, less the least
round trip of an empty request, measured before the submission was imported. On the GPU the
worker's CUDA events rank (their functions are captured by the harness before the import), and
the judge checks them against its own view: no call can take longer than the judge waited, and
a call the judge saw take far longer than reported was not timed honestly.
"""

from __future__ import annotations

from typing import Any

from ..channel.protocol import Op
from .measure import HOST_COPIED, HOST_WAIT, ROUND_TRIP_PARTS, VerificationFailure

ROUND_TRIPS = 20
# The GPU cross-check's tolerances: clocks of two processes, scheduling noise.
SLACK_US = 200.0
# The judge's view may exceed the worker's wall time by the transfer of inputs and outputs
# (copies, IPC handles); beyond this share of the whole and this many microseconds, the report
# is not believed.
UNSEEN_SHARE = 0.95
UNSEEN_MIN_US = 2000.0


def round_trip_us(worker: Any, timeout_s: float = 30.0, n: int = ROUND_TRIPS) -> float:
    """The least judge-side time of an empty request (call it before the submission loads).
    The least, not a typical one: taken off every timed request, it never takes off more than
    that request's own round trip cost, even where the host was busy while it was measured (a
    median measured under load took 1.3 ms off calls that sleep 5 ms)."""
    return min(worker.request(Op.PING, timeout_s).outside_us for _ in range(n))


def judged_times(reply: Any, round_trip: float, use_cuda: bool) -> dict[str, Any]:
    """The `time` reply's payload with the times the judge stands behind, and where its round
    trip went (ROUND_TRIP_PARTS) and whether its tensors crossed as host copies (HOST_COPIED)."""
    payload = dict(reply.payload)
    outside = reply.outside_us
    payload[ROUND_TRIP_PARTS] = {
        "judge_io": reply.elapsed_s - outside / 1e6,
        "worker_handler": float(payload.get("elapsed_s", 0.0)),
    }
    payload[HOST_COPIED] = reply.host_transport
    if not use_cuda:
        judged = max(outside - round_trip, 0.0)
        payload["reported_us"] = payload["device_us"]
        payload["device_us"] = payload["wall_us"] = payload["dispatch_us"] = judged
        return payload
    # Claiming more time than the judge waited is impossible whatever the host does: it fails
    # the call. Time the worker does not account for is also what a busy host adds to the
    # judge's view (a descheduled judge wakes late), so it is only noted here; the case fails
    # when most of its calls show it (measure.CaseTimer, UNSEEN_MAJORITY).
    problem = overclaimed(payload["device_us"], payload["wall_us"], outside)
    if problem:
        raise VerificationFailure(f"the reported time disagrees with the judge's clock: {problem}")
    # Host-copied inputs and outputs take the judge's view well beyond the call.
    waited = reply.host_wait_us
    unseen = (
        None
        if reply.host_transport
        else unaccounted(
            payload["wall_us"],
            outside,
            round_trip,
            waited,
            payload.get("pre_us"),
            payload.get("post_us"),
            reply.worker_cpu_us,
        )
    )
    payload["outside_unseen"] = unseen
    payload[HOST_WAIT] = waited
    return payload


def overclaimed(device_us: float, wall_us: float, outside_us: float) -> str | None:
    """Why a GPU call's report cannot be right (it took longer than the judge waited), or None.
    The judge's window opens before the request is sent and closes after the reply is ready,
    so a descheduled judge only widens it."""
    if device_us > outside_us + SLACK_US or wall_us > outside_us + SLACK_US:
        return (
            f"it reports {device_us:.1f} us on the device and {wall_us:.1f} us of wall time, "
            f"but the whole request took {outside_us:.1f} us"
        )
    return None


def unaccounted(
    wall_us: float,
    outside_us: float,
    round_trip: float,
    host_wait_us: float = 0.0,
    pre_us: float | None = None,
    post_us: float | None = None,
    worker_cpu_us: float | None = None,
) -> str | None:
    """Why one call looks like work ran outside its timed interval (the judge waited far
    longer than the worker accounts for), or None. `host_wait_us` of the request is what the
    judge's and the worker's threads waited for a busy host's CPUs (supervisor/host_waits.py): it
    explains that much of the judge's view, which is judged without it. `pre_us` and `post_us`,
    the worker's own report of its time before the call (its copy of the inputs, the GPU's wake
    spin) and after it (packing the output), are claims: with `worker_cpu_us`, the judge's own
    reading of the CPU the worker's processes ran during the request, they only go into the
    message, to say where the time went."""
    unseen = outside_us - round_trip - wall_us - host_wait_us
    if unseen > max(UNSEEN_MIN_US, UNSEEN_SHARE * (outside_us - host_wait_us)):
        waited = (
            f" ({host_wait_us:.1f} us of it waiting for the host's CPUs)" if host_wait_us else ""
        )
        return (
            f"the request took {outside_us:.1f} us{waited} but the worker accounts for "
            f"{wall_us:.1f} us; {unseen:.1f} us ran outside its timed interval"
            + where_it_went(pre_us, post_us, worker_cpu_us)
        )
    return None


def where_it_went(pre_us: float | None, post_us: float | None, worker_cpu_us: float | None) -> str:
    """The parenthesis of an unaccounted call's message: the worker's claims, the judge's
    reading of the worker's CPU time."""
    parts = []
    if pre_us is not None:
        parts.append(
            f"the worker reports {pre_us:.1f} us before the call: its copy of the inputs "
            "and the GPU's wake spin"
        )
    if post_us is not None:
        parts.append(f"{post_us:.1f} us after it, packing the output")
    if worker_cpu_us is not None:
        parts.append(f"its processes ran {worker_cpu_us:.1f} us of CPU during the request")
    return f" ({'; '.join(parts)})" if parts else ""
