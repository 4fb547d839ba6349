from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# Fixture leaderboards and submissions are inputs of the tests, not tests themselves.
collect_ignore = ["fixtures"]
pytest_plugins = ["pytester"]


@pytest.fixture
def core_repo(tmp_path: Path) -> Path:
    """A private copy of the fixture repository (leaderboards/ + submissions/)."""
    import shutil

    dest = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", dest)
    return dest
