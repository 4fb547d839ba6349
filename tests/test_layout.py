"""Leaderboards nested any number of groups deep are found; a broken folder fails only itself.

Fixture (tests/fixtures/layout): `a/b/deepadd` two groups deep; `x/dup_one` and `y/dup_two`
both named `twin`; `g/notemplate` names a missing ../template.py; `g/badyaml` is not YAML.
Each has a submission under submissions/<name>/ann/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.spec.discovery import load_catalog, task_files
from pytest_kernelboard.spec.task import TaskError

LAYOUT = Path(__file__).parent / "fixtures" / "layout"


def test_catalog_keeps_healthy_leaderboards_and_names_each_broken_one(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(LAYOUT, root)
    assert len(task_files(root / "leaderboards")) == 5
    catalog = load_catalog(root)
    assert sorted(catalog.tasks) == ["deepadd"]
    assert catalog.get("deepadd").root == (root / "leaderboards/a/b/deepadd").resolve()
    assert sorted(catalog.errors) == ["badyaml", "notemplate", "twin"]
    with pytest.raises(TaskError, match="'twin' is already used by .*dup_one"):
        catalog.get("twin")
    with pytest.raises(TaskError, match=r"templates.Python: file '../template.py' not found"):
        catalog.get("notemplate")
    with pytest.raises(TaskError, match="badyaml/task.yml: not valid YAML"):
        catalog.get("badyaml")
    with pytest.raises(KeyError, match="unknown leaderboard 'nope'"):
        catalog.get("nope")


def test_only_the_broken_folders_items_fail(pytester: pytest.Pytester):
    shutil.copytree(LAYOUT, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess("-v", "leaderboards", "submissions")
    result.assert_outcomes(passed=9, failed=7)
    result.stdout.fnmatch_lines_random(
        [
            "submissions/deepadd/ann/submission.py::deepadd::test[[]size=5-seed=1[]] PASSED*",
            "submissions/deepadd/ann/submission.py::deepadd::test[[]size=9-seed=2[]] PASSED*",
            "leaderboards/a/b/deepadd/task.yml::task PASSED*",
            "submissions/twin/ann/submission.py::submission FAILED*",
            "submissions/notemplate/ann/submission.py::submission FAILED*",
            "submissions/badyaml/ann/submission.py::submission FAILED*",
            "leaderboards/x/dup_one/task.yml::task FAILED*",
            "leaderboards/y/dup_two/task.yml::task FAILED*",
            "leaderboards/g/notemplate/task.yml::task FAILED*",
            "leaderboards/g/badyaml/task.yml::task FAILED*",
        ]
    )
    out = result.stdout.str()
    # the submission and the self-check of a broken folder carry the same message
    assert out.count("leaderboard name 'twin' is already used by") >= 3
    assert out.count("templates.Python: file '../template.py' not found") >= 2
    assert out.count("badyaml/task.yml: not valid YAML") >= 2
