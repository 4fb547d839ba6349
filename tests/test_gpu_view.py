"""A cage holds the device nodes of its judge's GPUs alone (supervisor/gpu_view.py), and
CUDA_VISIBLE_DEVICES inside names the same GPUs by UUID. The host's GPUs come from a table
here; tests/test_sandbox_gpu.py checks the cage a real judge builds on a GPU host."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kernelboard.channel.cage import gpu_devices
from pytest_kernelboard.supervisor import forked, gpu_view, sandbox
from pytest_kernelboard.supervisor.gpu_view import GpuView, HostGpu

# Node numbers need not follow NVML's order: the table keeps them apart on purpose.
H100S = tuple(
    HostGpu(i, minor, f"GPU-{i}aa{i}", "NVIDIA H100") for i, minor in enumerate((3, 2, 1, 0))
)
MIXED = (HostGpu(0, 0, "GPU-0aa0", "NVIDIA H100"), HostGpu(1, 1, "GPU-1bb1", "NVIDIA L4"))


def test_an_index_names_that_gpus_node_and_uuid():
    assert gpu_view.view_of("2", H100S) == GpuView((1,), "GPU-2aa2")


def test_several_gpus_keep_their_order_so_rank_r_stays_cuda_r():
    assert gpu_view.view_of("3, 0", H100S) == GpuView((0, 3), "GPU-3aa3,GPU-0aa0")


def test_a_uuid_or_a_unique_prefix_of_one_names_its_gpu():
    assert gpu_view.view_of("GPU-1aa1", H100S) == GpuView((2,), "GPU-1aa1")
    assert gpu_view.view_of("GPU-1", H100S) == GpuView((2,), "GPU-1aa1")


def test_an_empty_list_holds_no_gpu():
    assert gpu_view.view_of("", H100S) == GpuView((), "")


@pytest.mark.parametrize(
    "visible",
    [
        None,  # unset: every GPU, as before
        "4",  # no such GPU
        "0,0",  # CUDA refuses a GPU named twice
        "GPU-",  # a prefix of every UUID
        "MIG-abc",  # a MIG instance shares its GPU's node
        "0,-1,2",  # CUDA stops the list at -1
    ],
)
def test_what_cannot_be_matched_for_certain_keeps_every_node(visible):
    assert gpu_view.view_of(visible, H100S) is None


def test_on_a_host_of_mixed_gpus_an_index_is_matched_only_in_pci_bus_order():
    assert gpu_view.view_of("1", MIXED) is None  # CUDA's own order puts the fastest first
    assert gpu_view.view_of("1", MIXED, order="PCI_BUS_ID") == GpuView((1,), "GPU-1bb1")
    assert gpu_view.view_of("GPU-1bb1", MIXED) == GpuView((1,), "GPU-1bb1")


def test_without_nvml_nothing_is_narrowed():
    assert gpu_view.view_of("0", ()) is None


def test_narrow_rewrites_the_variable_only_within_the_outer_cage(monkeypatch):
    monkeypatch.setattr(gpu_view, "host_gpus", lambda: H100S)
    env = {"CUDA_VISIBLE_DEVICES": "1", "OTHER": "x"}
    assert gpu_view.narrow(env) == GpuView((2,), "GPU-1aa1")
    assert env == {"CUDA_VISIBLE_DEVICES": "GPU-1aa1", "OTHER": "x"}
    outside = {"CUDA_VISIBLE_DEVICES": "0"}
    assert gpu_view.narrow(outside, within=GpuView((2,), "GPU-1aa1")) is None
    assert outside == {"CUDA_VISIBLE_DEVICES": "0"}  # untouched


def fake_dev(tmp_path: Path) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in (
        "nvidia0",
        "nvidia1",
        "nvidia2",
        "nvidia3",
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-modeset",
        "null",
    ):
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    return dev


def test_the_nodes_kept_are_the_chosen_gpus_and_the_drivers_own(tmp_path):
    dev = fake_dev(tmp_path)
    names = {Path(p).name for p in gpu_devices([2], dev=dev)}
    assert names == {
        "nvidia2",
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
        "nvidia-modeset",
        "nvidia-caps",
    }
    assert {Path(p).name for p in gpu_devices(dev=dev)} >= {"nvidia0", "nvidia1", "nvidia3"}
    assert not any(
        Path(p).name.startswith("nvidia") and Path(p).name[6:].isdigit()
        for p in gpu_devices([], dev=dev)
    )


def bound_nodes(args: list[str]) -> set[str]:
    return {Path(args[i + 1]).name for i in range(len(args) - 1) if args[i] == "--dev-bind"}


def test_a_workers_cage_and_the_zygotes_bind_only_their_gpus_nodes(tmp_path, monkeypatch):
    dev = fake_dev(tmp_path)
    monkeypatch.setattr(sandbox, "gpu_devices", lambda minors=None: gpu_devices(minors, dev=dev))
    one = GpuView((1,), "GPU-2aa2")
    worker = sandbox.bwrap_command(tmp_path / "home", tmp_path / "stage", [], gpus=one)
    assert {n for n in bound_nodes(worker) if n[6:].isdigit()} == {"nvidia1"}
    assert "nvidiactl" in bound_nodes(worker) and "nvidia-uvm" in bound_nodes(worker)
    zygote = sandbox.zygote_command(tmp_path / "pool", [], gpus=GpuView((0, 3), "a,b"))
    assert {n for n in bound_nodes(zygote) if n[6:].isdigit()} == {"nvidia0", "nvidia3"}
    every = sandbox.bwrap_command(tmp_path / "home", tmp_path / "stage", [])
    assert {n for n in bound_nodes(every) if n[6:].isdigit()} == {f"nvidia{i}" for i in range(4)}


def test_each_set_of_gpus_gets_a_zygote_caged_to_it(monkeypatch):
    """A judge's single-GPU workers share a zygote holding their GPU's node alone; its
    multi-GPU ranks (the judge's whole list) get another one."""
    monkeypatch.setattr(gpu_view, "host_gpus", lambda: H100S)
    started = []

    class Recorded:
        def __init__(self, cache_dirs, exchange, env, host_network=False):
            self.gpus = gpu_view.env_view(env)
            started.append(self)

    monkeypatch.setattr(forked, "Zygote", Recorded)
    monkeypatch.setattr(forked, "_zygotes", {})
    own = forked.zygote_for([], [], {"CUDA_VISIBLE_DEVICES": "2"})
    assert forked.zygote_for([], [], {"CUDA_VISIBLE_DEVICES": "2"}) is own
    ranks = forked.zygote_for([], [], {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert ranks is not own and len(started) == 2
    assert own.gpus == GpuView((1,), "GPU-2aa2")
    assert ranks.gpus == GpuView((1, 0), "GPU-2aa2,GPU-3aa3")


def test_the_zygote_renames_each_workers_gpus_and_refuses_one_outside_its_cage(monkeypatch):
    """A worker forked from a zygote holding GPUs 2 and 3 reads them by UUID; one asking for
    GPU 0 is not forked there (the judge starts it in a cage of its own instead)."""
    monkeypatch.setattr(gpu_view, "host_gpus", lambda: H100S)
    zygote = object.__new__(forked.Zygote)  # no process: only its view of the GPUs
    zygote.gpus = gpu_view.view_of("2,3", H100S)
    env = {"CUDA_VISIBLE_DEVICES": "3"}
    assert zygote._caged_env(env) == {"CUDA_VISIBLE_DEVICES": "GPU-3aa3"}
    assert env == {"CUDA_VISIBLE_DEVICES": "3"}  # the judge's copy keeps its own numbering
    with pytest.raises(forked.ZygoteUnavailable, match="outside its zygote's cage"):
        zygote._caged_env({"CUDA_VISIBLE_DEVICES": "0"})
    zygote.gpus = None  # a judge given no list: every node, the numbering as it was
    assert zygote._caged_env(env) is env
