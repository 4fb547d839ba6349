"""Progress while long work runs: what a front-end shows while cases are timed."""

from __future__ import annotations


class Progress:
    """Called by the evaluation core while it works; a front-end overrides what it shows.
    The defaults show nothing."""

    def timing(self, label: str, n: int, median_us: float, halfwidth: float) -> None:
        """A case being timed: samples so far, their median and its interval's half-width."""

    def case_timed(self, label: str, line: str) -> None:
        """A timed case done: its time, interval and speedup in a line."""

    def phase(self, label: str, line: str) -> None:
        """A stage of the work done, and how long it took; shown like a timed case's line."""
        self.case_timed(label, line)
