"""tests/conftest.py's rule for a system tool a test needs: skip on a bare machine, saying how
to install it, fail where KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1."""

from __future__ import annotations

import pytest
from conftest import BROWSER_INSTALL, REQUIRE_SYSTEM_TOOLS, missing_system_tool


def test_a_bare_machine_skips_with_the_install_line(monkeypatch):
    monkeypatch.delenv(REQUIRE_SYSTEM_TOOLS, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium chromium-driver"):
        missing_system_tool("the browser test needs headless Chromium", BROWSER_INSTALL)


def test_a_machine_that_must_have_the_tools_fails(monkeypatch):
    monkeypatch.setenv(REQUIRE_SYSTEM_TOOLS, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_SYSTEM_TOOLS}=1: required here"):
        missing_system_tool("the browser test needs headless Chromium", BROWSER_INSTALL)
