"""The judge seeds torch's global generators before it makes each input.

`torch.manual_seed` seeds every kind of device torch has code for. A kind whose runtime is not
initialised (XPU and MTIA on a CUDA host, CUDA too on a host without it) gets the seed queued for
its initialisation together with `traceback.format_stack()`: 0.1 - 0.2 ms each at a judge's
stack depth. A judge seeds for every input it makes, and a leaderboard's own `generate_input`
often seeds again (GPU MODE's `set_seed`; a KernelBench problem's weights and inputs), so a
timed call's fresh input paid that three times over before it was drawn. A kind this host has no
device of never initialises and its queued seed never runs: the judge's torch queues none.
"""

from __future__ import annotations

import functools

DEVICE_KINDS = ("cuda", "xpu", "mtia")  # the kinds torch.manual_seed queues a seed for


def seed_everything(seed: int) -> None:
    """References that draw from torch's global generators get the case's seed too."""
    import torch

    _without_absent_device_seeds()
    torch.manual_seed(seed)


@functools.cache
def _without_absent_device_seeds() -> list[str]:
    """The device kinds this host lacks, whose seeding in this process is now a no-op."""
    import torch

    absent = []
    for kind in DEVICE_KINDS:
        runtime = getattr(torch, kind, None)
        is_available = getattr(runtime, "is_available", None)
        if hasattr(runtime, "manual_seed_all") and is_available is not None and not is_available():
            runtime.manual_seed_all = _nothing_to_seed
            absent.append(kind)
    return absent


def _nothing_to_seed(seed: int) -> None:
    del seed  # no device of this kind: no generator to seed
