"""Physical plausibility of a timing: bytes moved, bandwidth floors, wall-time and clock checks.

A kernel cannot finish before its bytes have crossed DRAM, and a device interval cannot be longer
than the host interval that contains it. A timing that breaks either rule was measured wrongly or
gamed (work hidden on an unsynchronised stream, results cached across calls, ...).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "bandwidth_floor_us",
    "clock_drop_flag",
    "device_bytes",
    "io_bytes",
    "plausibility_flags",
    "storage_span",
    "tensor_bytes",
]

# key: (device, storage base address) -> byte intervals [lo, hi) relative to that base
_Intervals = dict[tuple[str, int], list[tuple[int, int]]]

_ATOMS = (str, bytes, bytearray, memoryview, int, float, complex, bool, type(None))
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_MAX_DEPTH = 32


def _tensor_type() -> type | None:
    # Only a program that imported torch can hold tensors, so never import it here ourselves.
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def _walk(obj: Any, tensor_type: type, visit: Callable[[Any], None]) -> None:
    seen: set[int] = set()

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, _ATOMS) or depth > _MAX_DEPTH:
            return
        if isinstance(node, tensor_type):
            visit(node)
            return
        if id(node) in seen or isinstance(node, _OPAQUE):
            return
        seen.add(id(node))
        if isinstance(node, Mapping):
            children = list(node.values())
        elif isinstance(node, list | tuple | set | frozenset):
            children = list(node)
        elif dataclasses.is_dataclass(node):
            children = [getattr(node, f.name, None) for f in dataclasses.fields(node)]
        elif hasattr(node, "__dict__"):
            children = list(vars(node).values())
        else:
            slots = getattr(type(node), "__slots__", ())
            slots = (slots,) if isinstance(slots, str) else slots
            children = [getattr(node, s, None) for s in slots]
        for child in children:
            walk(child, depth + 1)

    walk(obj, 0)


def _view_interval(t: Any) -> tuple[tuple[str, int], tuple[int, int]] | None:
    """The bytes of one tensor view inside its storage.

    A dense view (contiguous or permuted) covers exactly numel * itemsize bytes. A broadcast view
    (stride 0) covers only its span. A view with gaps (x[:, ::2]) covers numel * itemsize bytes
    spread over a longer span; it is placed at its start, which is exact for one view and an
    approximation when several gappy views of one storage interleave.
    """
    numel = t.numel()
    if numel == 0:
        return None
    itemsize = t.element_size()
    length = min(numel, _span_elements(t)) * itemsize
    try:
        base = t.untyped_storage().data_ptr()
        start = t.storage_offset() * itemsize
    except Exception:  # sparse, nested or wrapper tensors without a plain storage
        return (str(t.device), -id(t)), (0, length)
    return (str(t.device), base), (start, start + length)


def _span_elements(t: Any) -> int:
    """Elements from a (non-empty) view's first to its last, gaps included."""
    return 1 + sum(
        (size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True)
    )


def storage_span(t: Any) -> tuple[int, int]:
    """The bytes of a non-empty tensor's storage from its first element to just past its last
    (start, end): everything the view can read or write, without copying it."""
    start = t.storage_offset() * t.element_size()
    return start, start + _span_elements(t) * t.element_size()


def _collect(obj: Any) -> _Intervals:
    found: _Intervals = {}
    tensor_type = _tensor_type()
    if tensor_type is None:
        return found

    def visit(t: Any) -> None:
        got = _view_interval(t)
        if got is not None:
            found.setdefault(got[0], []).append(got[1])

    _walk(obj, tensor_type, visit)
    return {key: _merge(spans) for key, spans in found.items()}


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _length(intervals: _Intervals) -> int:
    return sum(hi - lo for spans in intervals.values() for lo, hi in spans)


def _subtract(a: _Intervals, b: _Intervals) -> _Intervals:
    out: _Intervals = {}
    for key, spans in a.items():
        cuts = b.get(key, [])
        rest: list[tuple[int, int]] = []
        for lo, hi in spans:
            pieces = [(lo, hi)]
            for clo, chi in cuts:
                pieces = [
                    part
                    for plo, phi in pieces
                    for part in ((plo, min(phi, clo)), (max(plo, chi), phi))
                    if part[0] < part[1]
                ]
            rest.extend(pieces)
        out[key] = rest
    return out


def tensor_bytes(obj: Any) -> int:
    """Bytes of the torch tensors inside obj (nested tuples, lists, dicts, dataclasses, objects).

    Memory shared between tensors counts once: views of one storage are merged as byte intervals,
    so (x, x) and (x, x[:10]) count x once. Returns 0 when torch was never imported.
    """
    return _length(_collect(obj))


def device_bytes(obj: Any, device_type: str = "cuda") -> int:
    """tensor_bytes, of the tensors on devices of `device_type` only ('cuda': every GPU)."""
    on_device = {
        key: spans
        for key, spans in _collect(obj).items()
        if key[0].partition(":")[0] == device_type
    }
    return _length(on_device)


def io_bytes(inputs: Any, outputs: Any, aliased: int | None = None) -> tuple[int, int]:
    """(input_bytes, output_bytes) for the bandwidth floor, counting each byte once.

    Rule: output_bytes counts every byte of the outputs; input_bytes counts the input bytes that
    are not also output bytes. A pre-allocated output passed inside the input (GPU MODE's
    `data = (a, b, out)`) is therefore written, not also read. For a true in-place kernel this
    undercounts one read, which keeps the floor a lower bound.

    `aliased`: output bytes known to lie inside the inputs, for when inputs and outputs are
    copies that no longer share memory (the judge's view of a worker's call; the worker
    measures it with aliased_bytes). At most output_bytes are taken off the inputs.
    """
    ins, outs = _collect(inputs), _collect(outputs)
    if aliased is None:
        return _length(_subtract(ins, outs)), _length(outs)
    out_bytes = _length(outs)
    return max(0, _length(ins) - min(max(aliased, 0), out_bytes)), out_bytes


def aliased_bytes(inputs: Any, outputs: Any) -> int:
    """Bytes of the outputs that lie inside the inputs' memory (an output buffer passed in)."""
    outs = _collect(outputs)
    return _length(outs) - _length(_subtract(outs, _collect(inputs)))


def bandwidth_floor_us(
    input_bytes: int, output_bytes: int, peak_bytes_per_s: float, *, l2_bytes: int = 0
) -> float:
    """The fewest microseconds that moving the bytes takes at peak DRAM bandwidth: every input
    read once, every output written once, nothing else.

    l2_bytes: writes land in the (write-back) L2 cache and may reach DRAM only after the kernel
    has finished, so up to l2_bytes of output are not charged. Pass the device's L2 size unless
    the measurement waits for write-back; with 0 a small-output kernel may be flagged wrongly.
    Inputs are charged in full because the measurement loop flushes L2 before every call.
    """
    if not peak_bytes_per_s > 0:
        raise ValueError(f"peak bandwidth must be > 0, got {peak_bytes_per_s}")
    if input_bytes < 0 or output_bytes < 0 or l2_bytes < 0:
        raise ValueError("byte counts must be >= 0")
    charged = input_bytes + max(0, output_bytes - l2_bytes)
    return charged / peak_bytes_per_s * 1e6


def plausibility_flags(
    samples_us: Sequence[float],
    wall_us: Sequence[float] | None,
    floor_us: float | None,
    slack: float = 0.9,
    wall_tolerance_us: float = 2.0,
) -> list[str]:
    """Reasons to distrust a timing; empty when it is physically plausible.

    - a device time above the wall time of the same call (plus wall_tolerance_us + 1% for the
      two clocks' resolution): the device work cannot outlast the host interval around it;
    - a median below slack * floor_us: peak bandwidth is theoretical and never quite reached,
      so slack < 1 leaves room for measurement error before calling a time impossible;
    - a non-positive device time.
    """
    flags: list[str] = []
    nonpositive = sum(1 for s in samples_us if not s > 0)
    if nonpositive:
        flags.append(f"non-positive device time in {nonpositive} of {len(samples_us)} calls")
    if wall_us is not None:
        if len(wall_us) != len(samples_us):
            raise ValueError(f"{len(samples_us)} device samples but {len(wall_us)} wall times")
        over = [
            (s, w)
            for s, w in zip(samples_us, wall_us, strict=True)
            if s > w + wall_tolerance_us + 0.01 * w
        ]
        if over:
            s, w = max(over, key=lambda pair: pair[0] - pair[1])
            flags.append(
                f"device time exceeds the wall time that contains it in {len(over)} of "
                f"{len(samples_us)} calls (worst: {s:.4g} us > wall {w:.4g} us)"
            )
    if floor_us is not None and floor_us > 0 and samples_us:
        median = statistics.median(samples_us)
        if median < floor_us * slack:
            flags.append(
                f"faster than the memory bandwidth allows ({median:.4g} us < floor {floor_us:.4g} us)"
            )
    return flags


def _is_throttle(reason: str) -> bool:
    name = reason.lower()
    return "thermal" in name or "power" in name or name == "hwslowdown"


def clock_drop_flag(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, max_drop: float = 0.10
) -> str | None:
    """A reason when the GPU slowed down between two NVML snapshots (devices.gpu_state()), else None.

    Flags an SM clock that fell by more than max_drop (10%), and a thermal or power throttle
    reason present after but not before. Missing snapshots or fields flag nothing.
    """
    if not before or not after:
        return None
    reasons: list[str] = []
    sm0, sm1 = before.get("sm_mhz"), after.get("sm_mhz")
    if isinstance(sm0, int | float) and isinstance(sm1, int | float) and sm0 > 0:
        if sm1 < sm0 * (1.0 - max_drop) and math.isfinite(sm1):
            reasons.append(f"SM clock fell from {sm0:g} MHz to {sm1:g} MHz")
    old = set(before.get("throttle_reasons") or ())
    new = sorted(r for r in set(after.get("throttle_reasons") or ()) - old if _is_throttle(r))
    if new:
        reasons.append("throttling started: " + ", ".join(new))
    return "; ".join(reasons) or None
