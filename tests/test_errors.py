"""Every error kernelboard raises on purpose shares one base, and keeps its old one."""

from __future__ import annotations

import pytest

from pytest_kernelboard.errors import KernelboardError
from pytest_kernelboard.judge.profiling import ProfileError
from pytest_kernelboard.plugin.bench_bridge import BridgeError
from pytest_kernelboard.pr.git import GitError
from pytest_kernelboard.pr.pipeline import PipelineError
from pytest_kernelboard.results.records import RecordError
from pytest_kernelboard.results.store import StoreError
from pytest_kernelboard.spec.scaffold import ScaffoldError
from pytest_kernelboard.spec.task import TaskError
from site_generator.build import BuildError


@pytest.mark.parametrize(
    ("error", "old_base"),
    [
        (TaskError, ValueError),
        (RecordError, ValueError),
        (StoreError, ValueError),
        (ScaffoldError, ValueError),
        (GitError, RuntimeError),
        (PipelineError, RuntimeError),
        (BridgeError, RuntimeError),
        (BuildError, RuntimeError),
        (ProfileError, Exception),
    ],
)
def test_errors_derive_from_kernelboard_error(error, old_base):
    assert issubclass(error, KernelboardError)
    assert issubclass(error, old_base)
