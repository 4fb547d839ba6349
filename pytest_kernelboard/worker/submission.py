"""The submission in the worker: imported from its staged folder, its errors shown at its own
frames."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from pytest_kernelboard.channel.build_spec import read_build_spec
from pytest_kernelboard.worker.builds import (
    guard_torch_extension_builds_on_import,
    load_cuda_submission,
)


def import_kernel(stage_dir: Path, module: str, entry: str, cuda: bool) -> Any:
    """The submission's `entry` from `module` in the staged folder (which becomes the working
    folder and the first place imports look), or what it names there instead of a callable."""
    sys.path.insert(0, str(stage_dir))
    os.chdir(stage_dir)
    build = read_build_spec(stage_dir)
    if build is not None:  # lang: cu: the built extension's entry point is the kernel
        return load_cuda_submission(stage_dir, build, entry, cuda)
    guard_torch_extension_builds_on_import()  # a load_inline killed mid-build blocks no one later
    loaded = importlib.import_module(module)
    kernel = getattr(loaded, entry, None)
    if kernel is None and entry == "custom_kernel" and hasattr(loaded, "ModelNew"):
        # KernelBench's contract: ModelNew, built like the reference's Model, is the kernel.
        # An imported KernelBench leaderboard stages kernelbench_utils.py, which says how.
        if (stage_dir / "kernelbench_utils.py").is_file():
            utils = importlib.import_module("kernelbench_utils")
            kernel = utils.model_kernel(loaded.ModelNew)
    return kernel


def trimmed_traceback(exc: BaseException, keep_under: Path) -> str:
    """The traceback without harness frames: only frames from files under `keep_under`."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        # "<frozen importlib._bootstrap>" is no file: resolved, it would land in the cwd
        if not frame.filename.startswith("<")
        and Path(frame.filename).resolve().is_relative_to(keep_under)
    ]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()
