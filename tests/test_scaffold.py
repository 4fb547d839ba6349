"""`kernelboard new`: the scaffolded leaderboard loads and passes its own self-check."""

from __future__ import annotations

import importlib
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
from pytest_kernelboard.spec.task import load_task

REPO = Path(__file__).resolve().parents[1]
STAGED_MODULES = ("reference", "task", "utils", "submission")


@pytest.fixture
def staged(tmp_path, monkeypatch):
    """Stage a task's support files side by side (as the harness does) and import them."""

    def stage(task, submission: Path | None = None):
        folder = tmp_path / f"stage_{len(list(tmp_path.glob('stage_*')))}"
        folder.mkdir()
        for name, source in task.support_files():
            shutil.copyfile(source, folder / name)
        if submission is not None:
            shutil.copyfile(submission, folder / task.submission_name)
        for name in STAGED_MODULES:
            monkeypatch.delitem(sys.modules, name, raising=False)
        monkeypatch.syspath_prepend(str(folder))
        reference = importlib.import_module("reference")
        sub = importlib.import_module("submission") if submission is not None else None
        return reference, sub

    yield stage
    for name in STAGED_MODULES:
        sys.modules.pop(name, None)


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
