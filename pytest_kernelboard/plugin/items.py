"""The test items kernelboard makes: a case, a self-check."""

from __future__ import annotations

import pytest


class CaseItem(pytest.Function):
    """A kernelboard item. Its failure header is the command that reruns just it (pytest's
    own would be the collector chain joined by dots, which no command takes); never a suffix of
    the node id, so verbose result lines stay as pytest writes them."""

    def reportinfo(self):
        # Line 0, not None: pytest-benchmark warns through warn(), which needs a line.
        return self.path, 0, f"pytest {self.config.cwd_relative_nodeid(self.nodeid)}"
