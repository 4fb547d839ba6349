"""The leaderboard site: leaderboards/ and results/ rendered into a static folder."""

from .build import build_site

__all__ = ["build_site"]
