from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = ["pytester"]


@pytest.fixture
def core_repo(tmp_path: Path) -> Path:
    """A private copy of the fixture repository (leaderboards/ + submissions/)."""
    import shutil

    dest = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", dest)
    return dest
