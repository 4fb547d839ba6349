"""Inputs of every shape GPU MODE problems use cross judge -> worker -> judge.

Fixtures (tests/fixtures/shapes): `refclass` passes objects of classes defined in its
reference.py (a frozen config dataclass, a cache object) and returns one; `nonleaf` passes an
nn.Module and a dict of tensors built with autograd history.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest
import torch

from pytest_kernelboard.channel.cloning import clone_data
from pytest_kernelboard.supervisor import pickles as transport

SHAPES = Path(__file__).parent / "fixtures" / "shapes"


@pytest.fixture
def shapes_repo(pytester: pytest.Pytester) -> Path:
    shutil.copytree(SHAPES, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def test_reference_classes_and_nonleaf_tensors_cross_both_ways(pytester, shapes_repo):
    bob = shapes_repo / "submissions" / "refclass" / "bob" / "submission.py"
    bob.parent.mkdir(parents=True)
    bob.write_text("def custom_kernel(data):\n    x, config, cache = data\n    return x\n")
    result = pytester.runpytest_subprocess(
        "-v", "-rfE", "--kb-results", "out.json", "leaderboards", "submissions"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2 and "errors" not in outcomes, result.stdout.str()
    result.stdout.fnmatch_lines_random(
        [
            "*failed: expected a reference.Result, got Tensor*",
            "leaderboards/refclass/task.yml::solution[[]correct/submission.py[]] PASSED*",
            "leaderboards/refclass/task.yml::solution[[]wrong/submission.py[]] PASSED*",
            "leaderboards/nonleaf/task.yml::reference[[]test:batch=4-dim=8-seed=11[]] PASSED*",
            "leaderboards/nonleaf/task.yml::solution[[]correct/submission.py[]] PASSED*",
            "leaderboards/nonleaf/task.yml::solution[[]wrong/submission.py[]] PASSED*",
        ]
    )
    doc = json.loads((shapes_repo / "out.json").read_text())
    statuses = {
        (e["leaderboard"]["name"], e["submission"]["author"]): [c["status"] for c in e["cases"]]
        for e in doc["evaluations"]
    }
    assert statuses == {
        ("refclass", "ann"): ["passed"] * 2,
        ("refclass", "bob"): ["failed"] * 2,
        ("nonleaf", "ann"): ["passed"] * 2,
    }


def test_reply_naming_other_code_is_refused_unimported():
    """The judge never imports a module or calls a function a worker's reply names."""
    for evil in (os.system, eval, getattr, shutil.rmtree):
        with pytest.raises(transport.RefusedGlobal, match="does not load"):
            transport.loads(pickle.dumps(evil), {})

    # A reply naming a class of the submission's module: refused before any import.
    blob = b"\x80\x04csubmission\nLocal\n)\x81."
    with pytest.raises(transport.RefusedGlobal, match="submission.Local"):
        transport.loads(blob, {})
    assert "submission" not in sys.modules


def test_tensors_modules_and_arrays_round_trip():
    import numpy as np

    from pytest_kernelboard.supervisor.shm_manager import share_through_files

    share_through_files()  # as every WorkerProcess does
    data = (torch.arange(6.0).view(2, 3).t(), torch.nn.Linear(2, 2), np.arange(3), torch.float16)
    back = transport.loads(transport.dumps(data, {}), {})
    assert torch.equal(back[0], data[0]) and isinstance(back[1], torch.nn.Linear)
    assert back[2].tolist() == [0, 1, 2] and back[3] is torch.float16


@dataclasses.dataclass(frozen=True)
class _Frozen:
    weight: torch.Tensor
    name: str


def test_clone_detaches_and_keeps_structure():
    leaf = torch.randn(3, 3, requires_grad=True)
    nonleaf = leaf * 2
    module = torch.nn.Linear(3, 3)
    module.derived = module.weight * 3  # an attribute with history
    base = torch.arange(6.0)
    data = {"t": nonleaf, "m": module, "f": _Frozen(nonleaf, "w"), "views": [base, base[2:]]}

    with pytest.raises(RuntimeError, match="graph leaves"):
        import copy

        copy.deepcopy(data)
    copied = clone_data(data)

    assert copied["t"].grad_fn is None and not copied["t"].requires_grad
    assert torch.equal(copied["t"], nonleaf.detach())
    assert copied["f"].weight is copied["t"]  # one tensor stays one tensor
    assert isinstance(copied["m"], torch.nn.Linear) and copied["m"].derived.grad_fn is None
    assert copied["m"].weight.requires_grad  # a parameter stays a trainable leaf
    assert copied["m"].weight.data_ptr() != module.weight.data_ptr()
    copied["views"][0][3] = 100.0  # views still share their (new) storage ...
    assert copied["views"][1][1] == 100.0 and base[3] == 3.0  # ... and not the original's
