"""Why a leaderboard's own code may fail on this machine's hardware, said in words.

GPU MODE problems are written for one vendor's or one architecture's GPUs: AMD's MI300 and
MI355X (the float8_e4m3fnuz dtype, the aiter library), NVIDIA's Blackwell (sm_100: NVFP4 as
float4_e2m1fn_x2, tcgen05). Elsewhere their reference fails, and what it raises rarely says why
in those words (cuBLAS answers NOT_SUPPORTED, an import names a module). `hardware_note` reads
the failure, the leaderboard's own sources and the devices it ranks on (its `gpus`) and names
the need: "AMD-only: uses float8_e4m3fnuz; this GPU is NVIDIA H100 80GB HBM3 (sm_90)". It only
explains a failure: code that runs here is never held back for what it names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..spec.task import TaskSpec
from .devices import split_device_label

SOURCE_CHARS = 200_000  # of each source file read for what it uses


@dataclass(frozen=True)
class Device:
    """The GPU a note compares against: its vendor ("" without one), name and architecture."""

    vendor: str  # "NVIDIA", "AMD" or ""
    name: str = ""  # "NVIDIA H100 80GB HBM3"
    arch: str = ""  # "sm_90", "gfx942"

    @property
    def blackwell(self) -> bool:
        """NVIDIA compute capability 10 or later (sm_100, sm_103, sm_120, ...)."""
        found = re.fullmatch(r"sm_(\d+?)(\d)a?", self.arch)
        return self.vendor == "NVIDIA" and found is not None and int(found[1]) >= 10

    def described(self) -> str:
        if not self.vendor:
            return "this machine has no GPU"
        return f"this GPU is {self.name} ({self.arch})" if self.arch else f"this GPU is {self.name}"


@functools.cache
def this_device() -> Device:
    """This process's first GPU (torch's numbering), or a Device without a vendor."""
    import torch

    if not torch.cuda.is_available():
        return Device("")
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        return Device("AMD", props.name, str(getattr(props, "gcnArchName", "")).split(":")[0])
    major, minor = torch.cuda.get_device_capability(0)
    return Device("NVIDIA", props.name, f"sm_{major}{minor}")


# What only one vendor's or one architecture's GPUs run, as code names it.
_AMD_DTYPE = re.compile(r"float8_e[45]m[23]fnuz", re.IGNORECASE)
_AMD_LIBRARY = re.compile(r"\baiter\b")  # AMD's kernel library for ROCm
_BLACKWELL = re.compile(r"float4_e2m1fn_x2|\bnvfp4\b|tcgen05|\bsm_?10[03]a?\b", re.IGNORECASE)
_AMD_DEVICE = re.compile(r"MI\d")  # MI300, MI300x8, MI355X
_BLACKWELL_DEVICE = re.compile(r"G?B[23]00")  # B200, B200_Nebius, GB200


def hardware_note(texts: Iterable[str], declared: Sequence[str], device: Device) -> str | None:
    """The hardware that code failing with these texts (its error, its sources) may need and
    this device is not, in words; None when nothing says so. `declared`: the devices the
    leaderboard ranks on, the last resort when the texts name nothing."""
    text = "\n".join(texts)
    here = device.described()
    if device.vendor != "AMD":
        if found := _AMD_DTYPE.search(text):
            return f"AMD-only: uses {found[0].lower()}; {here}"
        if _AMD_LIBRARY.search(text):
            return f"AMD-only: uses aiter (AMD's ROCm kernels); {here}"
    if not device.blackwell and (found := _BLACKWELL.search(text)):
        return f"needs sm_100 (Blackwell): uses {found[0]}; {here}"
    names = [split_device_label(label)[0] for label in declared]
    if not names:
        return None
    ranks_on = ", ".join(declared)
    if device.vendor != "AMD" and all(_AMD_DEVICE.match(name) for name in names):
        return f"AMD-only: ranks on {ranks_on}; {here}"
    if not device.blackwell and all(_BLACKWELL_DEVICE.match(name) for name in names):
        return f"needs sm_100 (Blackwell): ranks on {ranks_on}; {here}"
    return None


def leaderboard_sources(task: TaskSpec) -> list[str]:
    """The text of the leaderboard's own Python files (reference, utils, task, ...)."""
    texts = []
    for name, path in task.support_files():
        if name.endswith(".py"):
            try:
                texts.append(path.read_text(errors="replace")[:SOURCE_CHARS])
            except OSError:
                continue
    return texts


def leaderboard_note(task: TaskSpec, error: str, device: Device | None = None) -> str | None:
    """hardware_note for the leaderboard's own code failing with `error` on this machine."""
    return hardware_note([error, *leaderboard_sources(task)], task.gpus, device or this_device())
