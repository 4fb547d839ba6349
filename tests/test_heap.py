"""Giving the C heap's free memory back (channel/heap.py) starts no process: every worker on a
CPU trims after its first call."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_kernelboard.channel import heap


def test_trimming_starts_no_process_and_finds_glibcs_malloc_trim(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[:1]}")

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    heap._malloc_trim.cache_clear()
    heap.trim()
    if sys.platform.startswith("linux"):  # glibc, as CI's Debian has
        assert heap._malloc_trim() is not None
    else:
        pytest.skip("malloc_trim is glibc's")
