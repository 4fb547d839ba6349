"""Builds in the worker: a cache by source hash, one build at a time per source.

Importing a submission may compile (a `load_inline` extension, a Triton JIT, a `lang: cu`
source). The judge gives that import its own budget (judge/builds.py); what the build does
lives here, on the worker's side; the spec the judge writes for a `lang: cu` stage is in
channel/build_spec.py.

Compiled artefacts live under the runner's cache folder, keyed by a hash of everything that
decides the binary (sources, flags, architecture, compiler and torch versions). A process that
wants a build takes a file lock on its key first: concurrent workers wait for the one build
instead of all compiling, and later workers and runs reuse it. An flock dies with its holder,
so a build killed by its budget never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..channel.build_spec import BUILD_SPEC

BINDING = "kb_binding.cu"  # the generated translation unit: submission + pybind module
OK, FAILED = "ok", "failed.log"  # markers inside a finished build folder
# The architecture a compile-only check targets where no GPU says which (the H100's).
DEFAULT_CHECK_ARCH = "9.0a"
HARNESS_BUILD_VERSION = "1"  # bump when the build recipe changes: old artefacts are ignored


class BuildError(Exception):
    """A build failed; the message carries the compiler's own output."""


class BuildUnavailable(Exception):
    """This machine cannot build or check the source (no nvcc, a partial toolkit); never cached."""


# -- the cache -------------------------------------------------------------------------------
def default_build_root() -> Path:
    """Where builds are cached: the worker's KERNELBOARD_BUILD_DIR, else the user cache."""
    configured = os.environ.get("KERNELBOARD_BUILD_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelboard" / "builds"


def source_key(files: dict[str, bytes], settings: dict[str, Any]) -> str:
    """A hash of the files (by name and content) and every setting that changes the binary."""
    digest = hashlib.sha256(f"kernelboard-build {HARNESS_BUILD_VERSION}\n".encode())
    for name in sorted(files):
        digest.update(f"file {name} {len(files[name])}\n".encode())
        digest.update(files[name])
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


@contextlib.contextmanager
def build_lock(root: Path, key: str) -> Iterator[None]:
    """Hold the one lock of a key; other processes wanting the same build wait here."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_build(root: Path, key: str, build: Callable[[Path], None]) -> Path:
    """The finished build folder of `key`, building it with build(folder) only if none exists.

    A failed build is cached too (its message is raised again), so the same broken source is
    not recompiled for every case. A build that was killed leaves neither marker: the next
    process starts over in a clean folder.
    """
    folder = root / key
    with build_lock(root, key):
        if (folder / OK).exists():
            return folder
        if (folder / FAILED).exists():
            raise BuildError((folder / FAILED).read_text())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            build(folder)
        except BuildError as exc:
            (folder / FAILED).write_text(str(exc))
            raise
        (folder / OK).write_text("")
        return folder


# -- lang: cu submissions --------------------------------------------------------------------
def binding_source(submission: str, entry: str) -> str:
    """The translation unit the harness compiles: the submission itself, then its binding."""
    return (
        f'#include "{submission}"\n'
        "#include <torch/extension.h>\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        f'  m.def("{entry}", &{entry});\n'
        "}\n"
    )


def device_arch() -> str:
    """TORCH_CUDA_ARCH_LIST form of this device: '9.0a' on an H100 (arch-specific features)."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}{'a' if major >= 9 else ''}"


def gencode(arch: str) -> str:
    number = arch.replace(".", "")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def cutlass_include_dirs() -> list[str]:
    """CUTLASS/CuTe headers from the optional `nvidia-cutlass` package, when installed.

    Found without importing the package (its Python side pulls in cuda-python).
    """
    import importlib.util

    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.origin:
        return []
    source = Path(spec.origin).resolve().parent / "source"
    dirs = (source / "include", source / "tools" / "util" / "include")
    return [str(d) for d in dirs if d.is_dir()]


def nvcc_path() -> str | None:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home and (Path(cuda_home) / "bin" / "nvcc").is_file():
        return str(Path(cuda_home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def _nvcc_version(nvcc: str | None) -> str:
    if nvcc is None:
        return "none"
    try:
        return subprocess.run(
            [nvcc, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _source_files(stage_dir: Path) -> dict[str, bytes]:
    """Every staged file but Python's: sources, headers and whatever they include."""
    return {
        str(p.relative_to(stage_dir)): p.read_bytes()
        for p in sorted(stage_dir.rglob("*"))
        if p.is_file() and p.suffix not in (".py", ".pyc") and p.name != BUILD_SPEC
    }


def _copy_sources(stage_dir: Path, folder: Path, spec: dict[str, Any], entry: str) -> Path:
    """Sources go into the build folder so paths (and so the build) are the same every run."""
    src = folder / "src"
    shutil.copytree(stage_dir, src, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (src / BINDING).write_text(binding_source(spec["submission"], entry))
    return src


def _flags(spec: dict[str, Any], src: Path) -> tuple[list[str], list[str]]:
    """(include dirs, nvcc flags) from task.yml's config."""
    includes = [str(src)] + [str((src / d).resolve()) for d in spec["include_dirs"]]
    includes += cutlass_include_dirs()
    flags = [f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in spec["defines"].items()]
    return includes, flags + list(spec["compile_flags"])


def _other_sources(spec: dict[str, Any], src: Path) -> list[str]:
    # The submission is compiled inside the binding unit, never twice.
    return [str(src / s) for s in spec["sources"] if s != spec["submission"]]


MESSAGE_LINES = 60  # the first errors are the ones that matter; nvcc stops at 100 anyway


def _compiler_message(spec: dict[str, Any], arch: str, output: str, src: Path) -> str:
    lines = output.replace(str(src) + os.sep, "").splitlines()
    if len(lines) > MESSAGE_LINES:
        lines = lines[:MESSAGE_LINES] + [f"... ({len(lines) - MESSAGE_LINES} more lines)"]
    text = "\n".join(lines)
    return f"{spec['submission']} does not compile (nvcc for sm_{arch.replace('.', '')}):\n{text}"


def load_cuda_submission(
    stage_dir: Path, spec: dict[str, Any], entry: str, cuda: bool, root: Path | None = None
) -> Callable[[Any], Any]:
    """Worker side: build (or reuse) the submission's extension; its entry as a kernel(data).

    On a machine without a GPU the build is only checked (nvcc -c for the default
    architecture) and a `no CUDA-capable device` failure says running was not possible.
    """
    import torch

    if spec.get("unavailable"):  # a header folder task.yml names is not on this runner
        raise BuildUnavailable(spec["unavailable"])
    root = root or default_build_root()
    nvcc = nvcc_path()
    arch = device_arch() if cuda else os.environ.get("KB_CHECK_ARCH", DEFAULT_CHECK_ARCH)
    settings = {
        "spec": spec,
        "entry": entry,
        "arch": arch,
        "mode": "extension" if cuda else "compile-only",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.version,
        "nvcc": _nvcc_version(nvcc),
        "cutlass": cutlass_include_dirs(),
    }
    key = source_key(_source_files(stage_dir), settings)
    if not cuda:
        if nvcc is None:
            raise BuildUnavailable("nvcc: not found; no CUDA-capable device to run on either")
        cached_build(
            root, key, lambda folder: _check_compiles(folder, stage_dir, spec, entry, arch)
        )
        raise BuildUnavailable(
            f"{spec['submission']} compiles for sm_{arch.replace('.', '')} (nvcc -c, compile-only "
            "check); running it needs a GPU: this machine has no CUDA-capable device"
        )
    name = f"kb_cu_{key[:20]}"
    built: dict[str, Any] = {}  # the module, when this process is the one that built it
    folder = cached_build(
        root,
        key,
        lambda f: built.update(module=_build_extension(f, stage_dir, spec, entry, arch, name)),
    )
    module = built.get("module") or _import_extension(name, folder)
    function = getattr(module, entry)

    def kernel(data: Any) -> Any:
        # The input tuple's elements are the entry point's arguments.
        return function(*data) if isinstance(data, tuple | list) else function(data)

    return kernel


def _build_extension(
    folder: Path, stage_dir: Path, spec: dict[str, Any], entry: str, arch: str, name: str
) -> Any:
    from torch.utils.cpp_extension import load, verify_ninja_availability

    try:
        verify_ninja_availability()
    except RuntimeError as exc:  # the runner's setup, not the code: never cached as a failure
        raise BuildUnavailable(f"cannot build {spec['submission']}: {exc}") from None
    src = _copy_sources(stage_dir, folder, spec, entry)
    includes, flags = _flags(spec, src)
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch  # torch adds the matching -gencode
    try:
        return load(
            name=name,
            sources=[str(src / BINDING), *_other_sources(spec, src)],
            extra_include_paths=includes,
            extra_cflags=["-O3"] + [f for f in flags if f.startswith("-D")],
            extra_cuda_cflags=["-O3", *flags],
            build_directory=str(folder),
            verbose=False,
        )
    except RuntimeError as exc:  # torch puts ninja's (so the compiler's) output in the message
        raise BuildError(_compiler_message(spec, arch, str(exc), src)) from None


def _import_extension(name: str, folder: Path) -> Any:
    import importlib.util

    library = next(folder.glob(f"{name}*.so"), None)
    if library is None:
        raise BuildError(f"the build folder {folder} holds no {name}.so")
    module_spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _torch_cuda_shim(folder: Path) -> list[str]:
    """A CPU-only torch ships c10/cuda headers but not the one its CUDA build generates."""
    import torch

    if torch.version.cuda is not None:
        return []
    shim = folder / "shim"
    macros = shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    macros.parent.mkdir(parents=True, exist_ok=True)
    macros.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return [str(shim)]


_MISSING_HEADER = re.compile(r"fatal error: ([\w/.]+\.h(?:pp)?): No such file")


def _check_compiles(
    folder: Path, stage_dir: Path, spec: dict[str, Any], entry: str, arch: str
) -> None:
    """nvcc -c of the binding unit (and the other sources) for `arch`: no link, no run."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    src = _copy_sources(stage_dir, folder, spec, entry)
    includes, flags = _flags(spec, src)
    includes += _torch_cuda_shim(folder) + include_paths() + [sysconfig.get_paths()["include"]]
    for index, source in enumerate([str(src / BINDING), *_other_sources(spec, src)]):
        command = [
            nvcc_path() or "nvcc",
            "-c",
            source,
            "-o",
            str(folder / f"check{index}.o"),
            gencode(arch),
            "-std=c++17",
            "-w",  # torch's headers warn a lot; errors are what the check is for
            f"-DTORCH_EXTENSION_NAME=kb_check_{index}",
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            *[f"-I{d}" for d in includes],
            *flags,
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            output = result.stdout + result.stderr
            missing = _MISSING_HEADER.search(output)
            if missing and not (src / missing.group(1)).exists():
                # The toolkit here is partial (no cuSPARSE, cuBLAS headers): not the code's fault.
                raise BuildUnavailable(
                    f"compile-only check not possible here: this machine's CUDA toolkit lacks "
                    f"{missing.group(1)}, and there is no CUDA-capable device to run on"
                )
            raise BuildError(_compiler_message(spec, arch, output, src))


# -- load_inline / load in Python submissions ---------------------------------------------------
def guard_torch_extension_builds() -> None:
    """Make torch's JIT extension builds safe to kill and to run in parallel workers.

    torch already caches them under TORCH_EXTENSIONS_DIR (shared by every worker of the
    machine) and lets one process build while others wait, but its lock is a plain file: a
    build killed by its budget leaves it behind, and every later import of that extension
    waits for it forever. Here each build first takes an flock beside its folder (released
    by the kernel when its holder dies); whoever holds it knows a leftover file lock is stale.
    """
    import inspect

    from torch.utils import cpp_extension

    original = cpp_extension._jit_compile
    if getattr(original, "_kb_guarded", False):
        return
    signature = inspect.signature(original)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        build_directory = Path(signature.bind(*args, **kwargs).arguments["build_directory"])
        root = build_directory.parent
        with build_lock(root, f"{build_directory.name}.kb"):
            (build_directory / "lock").unlink(missing_ok=True)
            return original(*args, **kwargs)

    guarded._kb_guarded = True  # type: ignore[attr-defined]
    cpp_extension._jit_compile = guarded


class _GuardOnImport:
    """A meta-path finder: guards torch's extension builds only once something imports them
    (importing torch.utils.cpp_extension up front would cost every worker start a third of a
    second)."""

    NAME = "torch.utils.cpp_extension"

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.NAME:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            guard_torch_extension_builds()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def guard_torch_extension_builds_on_import() -> None:
    """Guard now if torch's extension module is loaded, else as soon as it is imported."""
    if _GuardOnImport.NAME in sys.modules:
        guard_torch_extension_builds()
    elif not any(isinstance(f, _GuardOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())
