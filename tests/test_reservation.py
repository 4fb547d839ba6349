"""A frugal worker's cache, held again before each call: the segments its last call used."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_kernelboard.worker.reservation import Reservation, free_segments

GIB = 1 << 30
MIB = 1 << 20


def segment(size: int, allocated: int = 0, pool: str = "large") -> dict:
    return {"total_size": size, "allocated_size": allocated, "segment_type": pool}


def test_only_empty_large_segments_are_the_calls():
    snapshot = [
        segment(7 * GIB),  # the output's, let go once packed
        segment(100 * MIB, allocated=100 * MIB),  # the L2 flush buffer: still in use
        segment(112 * MIB),  # a temporary's
        segment(2 * MIB, pool="small"),  # small tensors share these: not worth holding
    ]
    assert free_segments(snapshot) == [7 * GIB, 112 * MIB]


class FakeCuda:
    """torch.cuda's snapshot and torch.empty, as the worker's Reservation uses them."""

    def __init__(self, snapshots: list[list[dict]]):
        self.snapshots = snapshots
        self.allocated: list[int] = []

    def torch(self) -> SimpleNamespace:
        cuda = SimpleNamespace(memory_snapshot=lambda: self.snapshots.pop(0))
        return SimpleNamespace(cuda=cuda, uint8="uint8", empty=self.empty)

    def empty(self, size: int, dtype: str, device: str) -> object:
        assert (dtype, device) == ("uint8", "cuda")
        self.allocated.append(size)
        return object()


def test_the_segments_are_held_again_one_by_one_and_only_grow():
    # RMSNorm's pattern: x**2 (7 GiB) and three small temporaries, then the output. Held as
    # one 7.33 GiB block, the output no longer fits once a temporary splits it; held as the
    # same segments, every tensor lands where it did before.
    first = [segment(7 * GIB), segment(112 * MIB), segment(112 * MIB), segment(112 * MIB)]
    smaller = [segment(7 * GIB)]  # a call that happened to need less leaves the set as it was
    cuda = FakeCuda([first, smaller])
    reservation = Reservation(cuda.torch())
    reservation.hold_again()  # nothing known yet: nothing held
    assert cuda.allocated == []
    reservation.remember()
    reservation.hold_again()
    assert cuda.allocated == [7 * GIB, 112 * MIB, 112 * MIB, 112 * MIB]
    reservation.remember()
    cuda.allocated.clear()
    reservation.hold_again()
    assert cuda.allocated == [7 * GIB, 112 * MIB, 112 * MIB, 112 * MIB]


def test_a_fuller_gpu_holds_what_fits_and_the_call_allocates_the_rest():
    cuda = FakeCuda([[segment(4 * GIB), segment(2 * GIB)]])
    torch = cuda.torch()

    def empty(size: int, dtype: str, device: str) -> object:
        if size == 2 * GIB:
            raise RuntimeError("CUDA out of memory")
        return cuda.empty(size, dtype, device)

    torch.empty = empty
    reservation = Reservation(torch)
    reservation.remember()
    reservation.hold_again()  # no exception: the call itself allocates what was not held
    assert cuda.allocated == [4 * GIB]
