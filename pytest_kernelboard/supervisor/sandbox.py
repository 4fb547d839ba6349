"""The worker's cage on Linux: a bubblewrap (bwrap) command line the worker is started under.

Inside it the submission has its own user, PID, network (no interfaces), IPC and UTS
namespaces: it cannot see, signal or ptrace the judge, read `/proc/<judge>/environ`, or reach
the network. The filesystem is empty but for what the worker needs: system directories, the
Python installation and the package read-only, the submission's staged folder read-only, a
private scratch home and /tmp (sized tmpfs), the compile caches writable, /dev/shm (tensors
cross there) and the device nodes of the worker's own GPUs alone (gpu_view.py). bwrap sets
PR_SET_NO_NEW_PRIVS, and with --die-with-parent and its PID namespace every process the worker
started dies with it.

What crosses the boundary, and only that: the socket pair to the judge (one inherited
descriptor), shared-memory tensor files in /dev/shm, CUDA IPC handles where the driver allows
them across namespaces (else inputs cross as host tensors, see transport.py), the compile
caches, and the worker's output log (its stdout, a file the judge opened).

KERNELBOARD_SANDBOX picks the policy: `auto` (default: use it when it works, else one warning
line), `require` (refuse to run submissions without it) or `off`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
from collections.abc import Iterable
from pathlib import Path

from ..channel.cage import SCRATCH_BYTES, gpu_devices
from .environment import package_root
from .gpu_view import GpuView

POLICY_VARIABLE = "KERNELBOARD_SANDBOX"
POLICIES = ("auto", "require", "off")
BWRAP = os.environ.get("KERNELBOARD_BWRAP", "bwrap")  # a path, where bwrap is not on PATH
SANDBOX_UID = 65534  # "nobody" inside: the submission is not the judge's user

# /etc entries the dynamic loader, Python, compilers and CUDA tools read; the rest stays out.
_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "ssl",
    "ca-certificates",
    "OpenCL",
    "vulkan",
    "nvidia",
    "glvnd",
    "gai.conf",
    "host.conf",
    "hosts",
)
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt")


class SandboxUnavailable(RuntimeError):
    """The policy requires the sandbox and this machine cannot provide it."""


def policy(environ: dict[str, str] | None = None) -> str:
    value = (environ if environ is not None else os.environ).get(POLICY_VARIABLE, "auto")
    value = value.strip().lower() or "auto"
    if value not in POLICIES:
        raise SandboxUnavailable(
            f"{POLICY_VARIABLE}={value!r}: expected one of {', '.join(POLICIES)}"
        )
    return value


@functools.cache
def probe() -> str | None:
    """None when bwrap and user namespaces work here, else why not (checked once per process)."""
    if not sys.platform.startswith("linux"):
        return f"no bubblewrap sandbox on {sys.platform}"
    if shutil.which(BWRAP) is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    command = [BWRAP, *_namespace_args(), *_system_mounts(), "--", "true"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot start: {exc}"
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        return "bwrap cannot create namespaces here: " + (reason[-1] if reason else "no reason")
    return None


@functools.cache
def enabled() -> bool:
    """Whether workers start sandboxed, by the policy; warns once when falling back."""
    chosen = policy()
    if chosen == "off":
        return False
    reason = probe()
    if reason is None:
        return True
    if chosen == "require":
        raise SandboxUnavailable(
            f"the worker sandbox is required ({POLICY_VARIABLE}=require) but unavailable: {reason}"
        )
    warnings.warn(
        f"kernelboard: submissions run WITHOUT the worker sandbox ({reason}); "
        "they can see this user's files and processes",
        stacklevel=2,
    )
    return False


def _namespace_args(host_network: bool = False, proc: list[str] | None = None) -> list[str]:
    # The ranks of a multi-GPU case must reach each other on loopback: they keep the host's
    # network (docs/security.md lists this as a remaining exposure).
    network = [] if host_network else ["--unshare-net"]
    return [
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--unshare-pid",
        *network,
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "kernelboard-worker",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *(proc if proc is not None else ["--proc", "/proc"]),
        "--dev",
        "/dev",  # a minimal /dev: null, zero, random, urandom, tty, pts, shm (replaced below)
    ]


def _system_mounts() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in _ETC:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def python_paths() -> list[Path]:
    """The interpreter, its standard library and the environment's packages, deduplicated."""
    names = ("stdlib", "platstdlib", "purelib", "platlib", "include", "scripts")
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(sysconfig.get_paths()[name] for name in names)
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    return _outermost(Path(p) for p in paths if p and os.path.exists(p))


def _driver_files() -> list[str]:
    """Driver state the CUDA user-space library reads, where present."""
    candidates = ("/proc/driver/nvidia", "/sys/module/nvidia", "/sys/bus/pci", "/sys/devices")
    return [p for p in candidates if os.path.exists(p)]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Drop paths that lie inside another one of the list (one bind covers them)."""
    unique = sorted({p.resolve() if not p.is_symlink() else p for p in paths}, key=str)
    kept: list[Path] = []
    for path in unique:
        if not any(path != other and path.is_relative_to(other) for other in kept):
            kept.append(path)
    return kept


def _device_mounts(proc_bound: bool = False, gpus: GpuView | None = None) -> list[str]:
    """The GPUs' device nodes (`gpus`' alone where given: supervisor/gpu_view.py) and the
    driver's entries where there is a GPU, and /dev/shm (tensors cross through its files,
    torch's file_system strategy: the judge's own).
    proc_bound: the host's /proc is bound whole already (the zygote's cage)."""
    args: list[str] = []
    devices = gpu_devices(gpus.minors if gpus is not None else None)
    for device in devices:
        args += ["--dev-bind", device, device]
    for path in _driver_files() if devices else []:
        if not (proc_bound and path.startswith("/proc/")):
            args += ["--ro-bind", path, path]
    if os.path.isdir("/dev/shm"):
        args += ["--bind", "/dev/shm", "/dev/shm"]
    return args


def bwrap_command(
    home: Path,
    stage: Path,
    caches: Iterable[Path],
    exchange: Iterable[Path] = (),
    host_network: bool = False,
    tools: Iterable[Path] = (),
    workdir: Path | None = None,
    gpus: GpuView | None = None,
) -> list[str]:
    """The prefix that starts a command inside the sandbox.

    home: the worker's private scratch (a tmpfs inside; the host folder stays untouched);
    stage: the folder the judge stages the submission into, read-only inside;
    caches: compile caches, writable; exchange: host folders both sides use (the shared-memory
    managers' sockets, a profiler's report), writable; tools: a profiler's own folder, read-only;
    workdir: where the command starts (default: home); gpus: the GPUs whose nodes it holds
    (gpu_view.narrow; None: every GPU's). Descriptors the caller passes (the socket, a pipe)
    are inherited.
    """
    args = [BWRAP, *_namespace_args(host_network), *_system_mounts()]
    # A private /tmp first: what is bound below may itself live under /tmp (a checkout there).
    args += ["--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp"]
    read_only = [*python_paths(), package_root(), *tools]
    for path in _outermost(read_only):
        args += ["--ro-bind", str(path), str(path)]
    args += _device_mounts(gpus=gpus)
    args += ["--size", str(SCRATCH_BYTES), "--tmpfs", str(home)]
    args += ["--ro-bind", str(stage), str(stage)]
    for cache in caches:
        cache.mkdir(parents=True, exist_ok=True)
        args += ["--bind", str(cache), str(cache)]
    for folder in exchange:
        args += ["--bind", str(folder), str(folder)]
    # bwrap's own root is a tmpfs: read-only, so the only writable places are the ones above.
    args += ["--remount-ro", "/", "--chdir", str(workdir or home)]
    return [*args, "--"]


def temporary_folders() -> list[Path]:
    """Where the judge's temporary folders lie (the workers' homes, slots and outboxes): what
    a forked worker covers with a tmpfs of its own (worker/isolation.py)."""
    import tempfile

    return _outermost([Path("/tmp"), Path(tempfile.gettempdir())])


def zygote_binds(
    pool: Path, caches: Iterable[Path], exchange: Iterable[Path]
) -> list[tuple[Path, bool]]:
    """(path, read_only) of every folder the zygote's sandbox binds from the host."""
    read_only = [(p, True) for p in _outermost([*python_paths(), package_root()])]
    writable = [(Path(p), False) for p in (pool, *caches, *exchange)]
    return read_only + writable


def zygote_command(
    pool: Path,
    binds: Iterable[tuple[Path, bool]],
    host_network: bool = False,
    gpus: GpuView | None = None,
) -> list[str]:
    """The prefix that starts the zygote (worker/zygote.py): a worker's cage without a home or
    a slot of its own, with the pool where the judge makes each worker's folders instead
    (`binds`: zygote_binds), and the host's /proc bound in place of a fresh one. A forked
    worker mounts a /proc of its own PID namespace over it, which Linux allows only where a
    complete /proc is already mounted (bwrap's own hides parts); the zygote itself never runs
    participant code. host_network: the zygote of multi-GPU ranks, which keep the host's
    network as their bwrap would. gpus: the GPUs whose nodes alone it holds (None: every
    GPU's); its workers and ranks take theirs among them."""
    proc = ["--bind", "/proc", "/proc"]
    args = [BWRAP, *_namespace_args(host_network, proc), *_system_mounts()]
    for folder in temporary_folders():
        args += ["--size", str(SCRATCH_BYTES), "--tmpfs", str(folder)]
    for path, read_only in binds:
        if not read_only:
            path.mkdir(parents=True, exist_ok=True)
        args += ["--ro-bind" if read_only else "--bind", str(path), str(path)]
    args += _device_mounts(proc_bound=True, gpus=gpus)
    args += ["--remount-ro", "/", "--chdir", str(pool)]
    return [*args, "--"]


def binds_under_covers(
    zygote_binds: Iterable[tuple[Path, bool]], pool: Path
) -> list[tuple[Path, bool]]:
    """What every forked worker binds back over its fresh temporary folders besides its own
    slot and outbox: whatever of the zygote's binds lies under those folders (a checkout or a
    virtual environment under /tmp); never the pool, where its siblings' folders are."""
    covered = temporary_folders()
    return [
        (path, ro)
        for path, ro in zygote_binds
        if path != pool and any(path.is_relative_to(c) for c in covered)
    ]
