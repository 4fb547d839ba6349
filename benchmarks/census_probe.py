"""What the kernel census sees, session by session, in one process (worker/census.py).

    python benchmarks/census_probe.py [--sessions 6]

Warms the profiler as a census-taking worker does, then takes the census of a PyTorch-only
call (a linear layer, a scale, a leaky ReLU and a clamp at the batch problem's sizes) several
times, printing for each session every CUDA event the profiler returned (sentinels included,
before they are taken out) and what the census kept. A session whose kept kernels are not all
library kernels would cost such a candidate its `only_library_kernels` flag.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from pytest_kernelboard.judge.kernels import is_library_kernel  # noqa: E402
from pytest_kernelboard.worker import census  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=6)
    args = parser.parse_args(argv)
    raw: list[list[tuple[str, float]]] = []
    original = census.drop_sentinels

    def keep_raw(launched, sentinels):
        raw.append(list(launched))
        return original(launched, sentinels)

    census.drop_sentinels = keep_raw
    taker = census.KernelCensus(torch)
    taker.warm()
    x = torch.randn(128, 1024, device="cuda")
    linear = torch.nn.Linear(1024, 512).cuda()

    def call() -> torch.Tensor:
        with torch.no_grad():
            return torch.clamp(torch.nn.functional.leaky_relu(linear(x) * 2.0, 0.01), -1.0, 1.0)

    call()  # the kernels' modules load outside the census, as after a correctness call
    torch.cuda.synchronize()
    failures = 0
    for _ in range(args.sessions):
        _, kept = taker.run(call)
        library = bool(kept) and all(is_library_kernel(name) for name, _ in kept)
        failures += not library
        print(f"session {taker.sessions}: {len(raw[-1])} events, kept {len(kept)}, "
              f"only library kernels: {library}")  # fmt: skip
        for name, device_us in raw[-1]:
            mark = "kept" if (name, device_us) in kept else "    "
            print(f"   {mark} {device_us:9.2f} us  {name[:110]}")
    print(f"{failures} of {args.sessions} sessions would lose the flag")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
