"""The import stall watch at its real window: a hang fails fast, a long busy import does not.

    python benchmarks/import_stall.py [--busy-s 150] [--budget-s 600]

Two workers (sandboxed where bubblewrap runs) import a submission at once, under the default
build budget and the configured stall window (60 s unless KERNELBOARD_IMPORT_STALL_S says
otherwise): one sleeps forever at import and must fail within the window plus 30 s; the other
keeps a CPU busy for --busy-s seconds and must import. Prints each outcome and its time, and
exits non-zero when either expectation fails. Takes about --busy-s seconds plus start-up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

SLEEPS = "import time\ntime.sleep(10**6)\n"
BUSY = """
import time
end = time.perf_counter() + {busy_s}
while time.perf_counter() < end:
    pass
"""
KERNEL = "\n\ndef custom_kernel(data):\n    return data\n"


def import_once(worker, stage: Path, budget_s: float) -> tuple[float, str]:
    """Seconds until the import ended, and how: "imported" or the failure."""
    from pytest_kernelboard.supervisor.failures import WorkerFailure

    started = time.perf_counter()
    try:
        worker.load(stage, "submission", budget_s)
        verdict = "imported"
    except WorkerFailure as failure:
        verdict = f"{type(failure).__name__} ({failure.status}): {failure}"
    return time.perf_counter() - started, verdict


def staged(name: str, source: str) -> Path:
    stage = Path(tempfile.mkdtemp(prefix=f"kb-stall-{name}-"))
    (stage / "submission.py").write_text(textwrap.dedent(source) + KERNEL)
    return stage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy-s", type=float, default=150.0)
    parser.add_argument("--budget-s", type=float, default=600.0)
    args = parser.parse_args()

    from pytest_kernelboard.supervisor import sandbox
    from pytest_kernelboard.supervisor.client import WorkerProcess
    from pytest_kernelboard.supervisor.stall import stall_window_s

    window = stall_window_s()
    if window is None:
        print("the stall watch is off (KERNELBOARD_IMPORT_STALL_S=0): nothing to check")
        return 1
    print(
        f"stall window {window:g} s, build budget {args.budget_s:g} s, sandboxed: {sandbox.enabled()}"
    )
    stages = {
        "sleeps": staged("sleeps", SLEEPS),
        "busy": staged("busy", BUSY.format(busy_s=args.busy_s)),
    }
    # Started from this thread: the judge's shared-memory set-up is not thread-safe.
    workers = {name: WorkerProcess() for name in stages}
    results: dict[str, tuple[float, str]] = {}

    def judge(name: str) -> None:
        workers[name].ping()
        results[name] = import_once(workers[name], stages[name], args.budget_s)

    runs = [threading.Thread(target=judge, args=(name,)) for name in stages]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    for worker in workers.values():
        worker.close()
    for stage in stages.values():
        shutil.rmtree(stage, ignore_errors=True)

    sleeps_s, sleeps = results["sleeps"]
    busy_s, busy = results["busy"]
    print(f"sleeps at import:          {sleeps_s:7.1f} s  {sleeps}")
    print(f"busy for {args.busy_s:g} s at import: {busy_s:7.1f} s  {busy}")
    ok = True
    if not (sleeps.startswith("ImportStalled") and sleeps_s <= window + 30.0):
        print(f"FAIL: the sleeping import should stall within {window + 30.0:g} s")
        ok = False
    if busy != "imported" or busy_s < args.busy_s:
        print(f"FAIL: the busy import should import after {args.busy_s:g} s")
        ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
