"""A judge killed outright leaves its temporary folders; the next one to start removes them.

Each process's folders are named in a lease it keeps locked while it lives
(supervisor/scratch.py). These tests kill real processes, a real `kernelboard judge` among them,
and sweep as the next process would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_kernelboard.supervisor import scratch

HOLDER = """
import sys, time
from pytest_kernelboard.supervisor import scratch
folders = [scratch.make_folder("kb-test-") for _ in range(2)]
(folders[0] / "inside").write_text("x")
print(scratch._lease.path, *folders, flush=True)
if sys.argv[1] == "wait":
    sys.stdin.read()  # until the test closes stdin
elif sys.argv[1] == "tidy":
    for folder in folders:
        (folder / "inside").unlink(missing_ok=True)
        folder.rmdir()
"""


def start_holder(how: str) -> tuple[subprocess.Popen, Path, list[Path]]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lease, *folders = process.stdout.readline().split()
    return process, Path(lease), [Path(f) for f in folders]


def aged(lease: Path) -> None:
    """As if the lease had not changed for longer than the sweep's grace."""
    old = time.time() - 2 * scratch.GRACE_S
    os.utime(lease, (old, old))


def test_a_killed_process_s_folders_are_swept_and_a_live_one_s_kept():
    killed, killed_lease, killed_folders = start_holder("wait")
    alive, alive_lease, alive_folders = start_holder("wait")
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert all(f.is_dir() for f in killed_folders)  # no exit handler ran
        aged(killed_lease)
        aged(alive_lease)
        scratch.sweep_abandoned()
        assert not any(f.exists() for f in killed_folders)
        assert not killed_lease.exists()
        assert all(f.is_dir() for f in alive_folders) and alive_lease.exists()
    finally:
        alive.stdin.close()
        alive.wait(timeout=30)
    # A normal exit leaves its lease naming what it did not remove, for a later sweep.
    assert alive_lease.read_text().split() == [str(f) for f in alive_folders]
    aged(alive_lease)
    scratch.sweep_abandoned()
    assert not any(f.exists() for f in alive_folders) and not alive_lease.exists()


def test_a_tidy_exit_leaves_no_lease_and_a_fresh_dead_lease_waits_its_grace():
    tidy, tidy_lease, _ = start_holder("tidy")
    assert tidy.wait(timeout=30) == 0
    assert not tidy_lease.exists()
    killed, lease, folders = start_holder("wait")
    killed.kill()
    killed.wait(timeout=30)
    scratch.sweep_abandoned()  # dead, but changed a moment ago: its helpers may still run
    assert lease.exists() and all(f.is_dir() for f in folders)
    aged(lease)
    scratch.sweep_abandoned()
    assert not lease.exists() and not any(f.exists() for f in folders)


def test_a_forked_child_keeps_a_lease_of_its_own(tmp_path):
    parent_folder = scratch.make_folder("kb-test-", dir=tmp_path)
    parent_lease = scratch._lease.path
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own lease, then exit without the parent's exit handlers
        os.close(reader)
        scratch.make_folder("kb-test-", dir=tmp_path)
        os.write(writer, str(scratch._lease.path).encode())
        os._exit(0)
    os.close(writer)
    child_lease = Path(os.read(reader, 4096).decode())
    os.close(reader)
    os.waitpid(pid, 0)
    assert child_lease != parent_lease
    assert parent_lease.read_text().split()[-1] == str(parent_folder)
    aged(child_lease)
    scratch.sweep_abandoned()
    assert not child_lease.exists()  # its process is gone
    assert parent_lease.exists() and parent_folder.is_dir()  # this process still holds it


@pytest.mark.parametrize("path", ["/", "relative/kb-x", "/tmp/../etc", "/tmp/kb x;rm"])
def test_a_lease_line_that_mkdtemp_could_not_have_written_is_never_removed(path):
    assert not scratch._removable(path)


def test_a_symlink_in_a_lease_is_not_followed(tmp_path):
    target = tmp_path / "kept"
    target.mkdir()
    link = tmp_path / "kb-link"
    link.symlink_to(target)
    assert not scratch._removable(str(link))
    assert scratch._removable(str(target))


def test_a_long_lived_lease_names_only_the_folders_still_there(monkeypatch, tmp_path):
    monkeypatch.setattr(scratch, "COMPACT_AFTER", 4)
    monkeypatch.setattr(scratch, "_lease", None)  # a fresh lease, compacting at 4 lines
    for _ in range(3):
        scratch.make_folder("kb-test-", dir=tmp_path).rmdir()  # made and removed
    kept = scratch.make_folder("kb-test-", dir=tmp_path)  # the fourth line: compacted
    assert scratch._lease.path.read_text().split() == [str(kept)]


@pytest.mark.runs_long
def test_a_judge_killed_mid_batch_leaves_folders_the_next_judge_removes(tmp_path, core_repo):
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "a_good.py").write_text(
        "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
    )
    (folder / "b_hangs.py").write_text(
        "import time\ndef custom_kernel(data):\n    time.sleep(600)\n"
    )
    judge = subprocess.Popen(
        [sys.executable, "-m", "pytest_kernelboard.cli", "judge", "addone", str(folder)]
        + ["--out", str(tmp_path / "records.jsonl"), "--root", str(core_repo)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    leases = scratch.leases_folder()
    try:
        deadline = time.monotonic() + 240
        while "a_good.py" not in judge.stderr.readline():  # its first record: it is mid-batch
            assert time.monotonic() < deadline and judge.poll() is None
        own = [
            p for p in leases.glob(f"*{scratch.LEASE_SUFFIX}") if p.name.startswith(f"{judge.pid}-")
        ]
        assert len(own) == 1
        named = [Path(line) for line in own[0].read_text().split()]
        left = [p for p in named if p.exists()]
        assert {p.name.split("-")[1] for p in left} >= {"batch", "worker", "pool", "stage"}
    finally:
        os.killpg(judge.pid, signal.SIGKILL)  # the judge and everything it started
        judge.wait(timeout=30)
    time.sleep(1)  # its workers die with it (--die-with-parent)
    assert any(p.exists() for p in left)
    aged(own[0])
    scratch.sweep_abandoned()
    assert not any(p.exists() for p in named)


def test_a_lease_folder_others_may_write_to_is_refused_and_folders_are_still_made(
    monkeypatch, tmp_path
):
    """In a shared /tmp another user could make the lease folder first and put a lease there
    naming this user's folders: such a folder is not used, and nothing is swept."""
    monkeypatch.setattr(scratch, "short_root", lambda: str(tmp_path))
    monkeypatch.setattr(scratch, "_lease", None)
    shared = tmp_path / f"kb-leases-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    victim = tmp_path / "kb-data-precious"
    victim.mkdir()
    planted = shared / f"1-x{scratch.LEASE_SUFFIX}"
    planted.write_text(f"{victim}\n")
    aged(planted)
    with pytest.raises(scratch.UnsafeLeases):
        scratch.sweep_abandoned()
    with pytest.warns(UserWarning, match="not leased"):
        made = scratch.make_folder("kb-test-", dir=tmp_path)
    assert made.is_dir() and victim.is_dir() and planted.exists()
