"""`kernelboard import gpumode` on a tree laid out like GPU MODE's problems/.

Fixture (tests/fixtures/gpumode_problems): a competition YAML `setx.yaml` and a problem set
`setx/` whose two problems share ../utils.py and ../template.py.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_kernelboard.cli import main
from pytest_kernelboard.spec.discovery import reload_catalog
from pytest_kernelboard.spec.sidecar import SIDECAR_NAME

PROBLEMS = Path(__file__).parent / "fixtures" / "gpumode_problems"


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    (pytester.path / "leaderboards").mkdir()
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def test_import_keeps_files_and_takes_names_deadlines_gpus_from_the_yaml(repo, capsys):
    assert main(["import", "gpumode", str(PROBLEMS), "--root", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "imported scale_v1 -> leaderboards/setx/scale_py" in out
    group = repo / "leaderboards" / "setx"
    # every source file arrives byte for byte, shared files at the same relative place
    for source in (PROBLEMS / "setx").rglob("*"):
        if source.is_file():
            copied = group / source.relative_to(PROBLEMS / "setx")
            assert copied.read_bytes() == source.read_bytes(), copied
    sidecar = yaml.safe_load((group / "scale_py" / SIDECAR_NAME).read_text())
    assert sidecar == {
        "name": "scale_v1",
        "deadline": "2031-03-31 12:00",
        "gpus": ["H100", "A100"],
        "competition": "setx",
    }
    catalog = reload_catalog(repo)
    assert sorted(catalog.tasks) == ["negate_v1", "scale_v1"]
    scale, negate = catalog.get("scale_v1"), catalog.get("negate_v1")
    assert scale.deadline == dt.datetime(2031, 3, 31, 12, 0, tzinfo=dt.UTC)
    assert negate.deadline == dt.datetime(2031, 6, 30, tzinfo=dt.UTC)  # the competition's
    assert (scale.gpus, negate.gpus) == (("H100", "A100"), ("H100",))
    assert scale.ranking_by == "geom"
    assert dict(scale.support_files())["utils.py"] == (group / "utils.py").resolve()


def test_imported_leaderboards_pass_the_self_check(pytester, repo):
    assert main(["import", "gpumode", str(PROBLEMS), "--root", str(repo), "--group", "gm"]) == 0
    shipped = repo / "submissions" / "scale_v1" / "gm" / "submission.py"
    shipped.parent.mkdir(parents=True)
    shutil.copyfile(repo / "leaderboards" / "gm" / "scale_py" / "submission.py", shipped)
    result = pytester.runpytest_subprocess("-v", "leaderboards", "submissions")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes, result.stdout.str()
    result.stdout.fnmatch_lines_random(
        [
            "leaderboards/gm/scale_py/task.yml::task PASSED*",
            "leaderboards/gm/negate_py/task.yml::task PASSED*",
            "leaderboards/gm/negate_py/task.yml::reference[[]test:size=31-seed=8[]] PASSED*",
            "leaderboards/gm/scale_py/task.yml::template[[]Python[]] PASSED*",
            "submissions/scale_v1/gm/submission.py::scale_v1::test[[]size=16-seed=7[]] PASSED*",
        ]
    )


def test_a_second_import_refuses_to_overwrite(repo, capsys):
    assert main(["import", "gpumode", str(PROBLEMS), "--root", str(repo)]) == 0
    (repo / "leaderboards" / "setx" / "utils.py").write_text("# edited here\n")
    assert main(["import", "gpumode", str(PROBLEMS), "--root", str(repo)]) == 1
    assert "already exists; remove it or pass --replace" in capsys.readouterr().err
    assert main(["import", "gpumode", str(PROBLEMS), "--root", str(repo), "--replace"]) == 0
    assert (repo / "leaderboards/setx/utils.py").read_bytes() == (
        PROBLEMS / "setx/utils.py"
    ).read_bytes()


def test_a_bad_competition_yaml_is_named(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("problems:\n  - directory: nowhere\n")
    assert main(["import", "gpumode", str(tmp_path), "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "c.yaml: problems[0]: no task.yml in directory 'nowhere'" in err
