"""`kernelboard new`: the scaffolded leaderboard loads and passes its own self-check."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from pytest_kernelboard import cli
from pytest_kernelboard.spec.scaffold import (
    UTILS_TEMPLATE,
    ScaffoldError,
    create_leaderboard,
    template_text,
)
from pytest_kernelboard.spec.scaffold_readme import stale_scaffold_readme
from pytest_kernelboard.spec.task import load_task

REPO = Path(__file__).resolve().parents[1]
STAGED_MODULES = ("reference", "task", "utils", "submission")


@pytest.fixture
def staged(tmp_path, monkeypatch):
    """Stage a task's support files side by side (as the harness does) and import them.

    Their modules leave sys.modules with the test, whatever was staged before (monkeypatch's
    delitem would put back the first staging's modules when a test stages twice)."""
    before = {name: sys.modules[name] for name in STAGED_MODULES if name in sys.modules}

    def stage(task, submission: Path | None = None):
        folder = tmp_path / f"stage_{len(list(tmp_path.glob('stage_*')))}"
        folder.mkdir()
        for name, source in task.support_files():
            shutil.copyfile(source, folder / name)
        if submission is not None:
            shutil.copyfile(submission, folder / task.submission_name)
        for name in STAGED_MODULES:
            sys.modules.pop(name, None)
        monkeypatch.syspath_prepend(str(folder))
        reference = importlib.import_module("reference")
        sub = importlib.import_module("submission") if submission is not None else None
        return reference, sub

    yield stage
    for name in STAGED_MODULES:
        sys.modules.pop(name, None)
    sys.modules.update(before)


def run_cases(task, reference, custom_kernel) -> list[bool]:
    results = []
    for case in task.tests:
        data = reference.generate_input(**case)
        output = custom_kernel(reference.generate_input(**case))
        ok, message = reference.check_implementation(data, output)
        assert isinstance(message, str)
        results.append(ok)
    return results


def test_new_leaderboard_passes_self_check(tmp_path, staged):
    made = create_leaderboard(tmp_path, "relu_demo")
    folder = tmp_path / "leaderboards" / "relu_demo"
    assert made.folder == folder
    assert made.utils_created == tmp_path / "leaderboards" / "utils.py"
    for relative in ("task.yml", "task.py", "reference.py", "README.md", "template.py"):
        assert (folder / relative).is_file(), relative
    assert "__NAME__" not in (folder / "README.md").read_text()

    task = load_task(folder / "task.yml")
    assert task.name == "relu_demo"
    assert (
        dict(task.support_files())["utils.py"] == (tmp_path / "leaderboards" / "utils.py").resolve()
    )
    assert task.templates == {"Python": "template.py"}

    reference, _ = staged(task)
    assert all(run_cases(task, reference, reference.ref_kernel))

    reference, correct = staged(task, folder / "solutions" / "correct" / "submission.py")
    assert all(run_cases(task, reference, correct.custom_kernel))

    reference, template = staged(task, folder / "template.py")
    assert all(run_cases(task, reference, template.custom_kernel))

    reference, wrong = staged(task, folder / "solutions" / "wrong" / "submission.py")
    assert not all(run_cases(task, reference, wrong.custom_kernel))


def test_group_gets_its_own_utils(tmp_path, staged):
    top = create_leaderboard(tmp_path, "first")
    top.utils_created.write_text(top.utils_created.read_text() + "\nMARKER = 1\n")
    made = create_leaderboard(tmp_path, "second", group="pmpp")
    group_utils = tmp_path / "leaderboards" / "pmpp" / "utils.py"
    assert made.utils_created == group_utils
    assert "MARKER = 1" in group_utils.read_text()  # copied from leaderboards/utils.py

    task = load_task(made.folder / "task.yml")
    assert dict(task.support_files())["utils.py"] == group_utils.resolve()
    reference, correct = staged(task, made.folder / "solutions" / "correct" / "submission.py")
    assert all(run_cases(task, reference, correct.custom_kernel))

    again = create_leaderboard(tmp_path, "third", group="pmpp")
    assert again.utils_created is None  # an existing utils.py is kept


def test_refuses_existing_folder(tmp_path):
    create_leaderboard(tmp_path, "dup")
    with pytest.raises(ScaffoldError, match="already exists"):
        create_leaderboard(tmp_path, "dup")
    # names are unique across groups too
    with pytest.raises(ScaffoldError, match="already exists"):
        create_leaderboard(tmp_path, "dup", group="other")


@pytest.mark.parametrize("name", ["", "Upper", "1abc", "has space", "dot.name", "../escape", "a/b"])
def test_refuses_bad_names(tmp_path, name):
    with pytest.raises(ScaffoldError, match="not a valid name"):
        create_leaderboard(tmp_path, name)
    with pytest.raises(ScaffoldError, match="not a valid name"):
        create_leaderboard(tmp_path, "fine", group=name or "Bad Group")
    assert not (tmp_path / "leaderboards" / "fine").exists()


def test_cli_new(tmp_path, capsys):
    assert cli.main(["new", "from_cli", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "leaderboards" / "from_cli" / "task.yml").is_file()
    assert "created leaderboards/from_cli/" in capsys.readouterr().out

    assert cli.main(["new", "from_cli", "--root", str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["new", "Not Valid", "--root", str(tmp_path)]) == 1
    assert "not a valid name" in capsys.readouterr().err


def test_packaged_utils_matches_repository_utils():
    repo_utils = REPO / "leaderboards" / "utils.py"
    if not repo_utils.is_file():
        pytest.skip("no leaderboards/utils.py in this checkout")
    assert template_text(UTILS_TEMPLATE) == repo_utils.read_text(encoding="utf-8"), (
        "pytest_kernelboard/spec/scaffold_template/utils.py.tmpl is out of date: copy leaderboards/utils.py"
    )


@pytest.fixture
def repo_with_a_leaderboard(tmp_path):
    """A repository that already has leaderboards/utils.py and a submissions/ folder."""
    root = tmp_path / "repo"
    (root / "submissions" / "first" / "ann").mkdir(parents=True)
    create_leaderboard(root, "first")
    return root


@pytest.mark.parametrize(
    "subfolder", ["leaderboards", "leaderboards/first", "submissions/first/ann", "."]
)
def test_cli_new_from_a_subfolder_lands_at_the_repository_root(
    repo_with_a_leaderboard, subfolder, monkeypatch, capsys
):
    root = repo_with_a_leaderboard
    utils_before = (root / "leaderboards" / "utils.py").read_text()
    monkeypatch.chdir(root / subfolder)
    assert cli.main(["new", "x1"]) == 0
    assert (root / "leaderboards" / "x1" / "task.yml").is_file()
    assert not list(root.rglob("leaderboards/leaderboards"))
    assert sorted(p.relative_to(root) for p in root.rglob("utils.py")) == [
        Path("leaderboards/utils.py")
    ]
    assert (root / "leaderboards" / "utils.py").read_text() == utils_before
    out = capsys.readouterr().out
    check = os.path.relpath(root / "leaderboards" / "x1")  # from where it ran
    assert "created leaderboards/x1/" in out and f"check it with `pytest {check}`" in out


def test_cli_new_with_a_group_from_a_subfolder(repo_with_a_leaderboard, monkeypatch):
    root = repo_with_a_leaderboard
    monkeypatch.chdir(root / "submissions" / "first")
    assert cli.main(["new", "x2", "--group", "pmpp"]) == 0
    assert (root / "leaderboards" / "pmpp" / "x2" / "task.yml").is_file()
    # a group gets its own copy of the top-level helpers (a group folder is self-contained)
    assert (root / "leaderboards" / "pmpp" / "utils.py").read_text() == (
        root / "leaderboards" / "utils.py"
    ).read_text()


def test_new_repository_without_leaderboards_uses_its_git_root(tmp_path, monkeypatch):
    root = tmp_path / "fresh"
    (root / ".git").mkdir(parents=True)
    (root / "docs").mkdir()
    monkeypatch.chdir(root / "docs")
    assert cli.main(["new", "first"]) == 0
    assert (root / "leaderboards" / "first" / "task.yml").is_file()
    assert not (root / "docs" / "leaderboards").exists()


def test_a_root_inside_leaderboards_is_refused(repo_with_a_leaderboard, capsys):
    root = repo_with_a_leaderboard
    nested = root / "leaderboards"
    assert cli.main(["new", "x3", "--root", str(nested)]) == 1
    err = capsys.readouterr().err
    assert f"is inside {nested}" in err and f"the repository root is {root}" in err
    assert not (nested / "leaderboards").exists()


# -- the self-check of a scaffolded leaderboard (pytest in a subprocess: it starts workers) -----


@pytest.fixture
def scaffolded(pytester: pytest.Pytester) -> Path:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    create_leaderboard(pytester.path, "mykernel")
    return pytester.path / "leaderboards" / "mykernel"


def test_fresh_scaffold_passes_its_own_self_check(pytester, scaffolded):
    """README.md: `kernelboard new mykernel && pytest leaderboards/mykernel` passes."""
    result = pytester.runpytest_subprocess("-v", "-rs", "leaderboards/mykernel")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes["passed"] >= 7
    result.stdout.fnmatch_lines(["*task.yml::readme PASSED*"])


def test_self_check_flags_the_scaffold_readme_once_the_problem_changed(pytester, scaffolded):
    reference = scaffolded / "reference.py"
    reference.write_text(reference.read_text().replace("torch.relu(data)", "torch.abs(data)"))
    result = pytester.runpytest_subprocess("-v", "leaderboards/mykernel", "-k", "readme")
    result.assert_outcomes(failed=1, deselected=result.parseoutcomes()["deselected"])
    result.stdout.fnmatch_lines(
        [
            "*task.yml::readme FAILED*",
            f"*{scaffolded / 'README.md'} still describes the example problem of `kernelboard "
            "new`*reference.py defines another: edit README.md*",
        ]
    )

    readme = scaffolded / "README.md"
    readme.write_text("# mykernel\n\nAbsolute value element-wise: `out[i] = |x[i]|`.\n")
    result = pytester.runpytest_subprocess("-v", "leaderboards/mykernel", "-k", "readme")
    # a README of the author's own is no scaffold's: the item is not even collected
    assert "::readme" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_stale_readme_names_each_changed_problem_file(tmp_path):
    folder = create_leaderboard(tmp_path, "demo").folder
    assert stale_scaffold_readme(folder) is None
    task_yml = folder / "task.yml"
    task_yml.write_text(task_yml.read_text().replace('ranking_by: "geom"', 'ranking_by: "last"'))
    message = stale_scaffold_readme(folder)
    assert message is not None and "while task.yml defines another" in message
    assert str(folder / "README.md") in message and "Apply ReLU" in message
