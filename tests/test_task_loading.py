"""task.yml loading: every error names the file and the key or case; valid files keep their types."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_kernelboard.spec.discovery import load_catalog
from pytest_kernelboard.spec.task import DEFAULT_TIMEOUT_S, TaskError, load_task, parse_deadline

BASE: dict[str, Any] = {
    "files": [
        {"name": "submission.py", "source": "@SUBMISSION@"},
        {"name": "reference.py", "source": "reference.py"},
    ],
    "lang": "py",
    "description": "Add one to a vector.",
    "tests": [{"size": 3, "seed": 1}],
    "benchmarks": [{"size": 1024, "seed": 2}],
}


def write_task(folder: Path, overrides: dict[str, Any] | None = None, drop=()) -> Path:
    """A leaderboard folder with reference.py and a task.yml of BASE plus overrides."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text("# placeholder\n")
    raw = {**BASE, **(overrides or {})}
    for key in drop:
        raw.pop(key)
    path = folder / "task.yml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(TaskError) as info:
        load_task(path)
    message = str(info.value)
    assert str(path.resolve()) in message, f"the message does not name the file: {message}"
    assert info.value.path == path.resolve()
    return message


# -- errors -------------------------------------------------------------------------------------
def test_valid_base_loads(tmp_path):
    task = load_task(write_task(tmp_path / "addone"))
    assert task.name == "addone"
    assert task.tests == ({"size": 3, "seed": 1},)


def test_unknown_key(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"block_size": 128}))
    assert "unknown key" in message and "'block_size'" in message


def test_missing_description(tmp_path):
    message = load_error(write_task(tmp_path / "lb", drop=["description"]))
    assert "'description'" in message and "required" in message


def test_blank_description(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"description": "   "}))
    assert "'description'" in message


def test_submission_marker_absent(tmp_path):
    files = [{"name": "reference.py", "source": "reference.py"}]
    message = load_error(write_task(tmp_path / "lb", {"files": files}))
    assert "'files'" in message and "@SUBMISSION@" in message


def test_source_file_missing_names_the_entry(tmp_path):
    files = [*BASE["files"], {"name": "utils.py", "source": "../utils.py"}]
    message = load_error(write_task(tmp_path / "lb", {"files": files}))
    assert "files[2]" in message and "utils.py" in message and "not found" in message


def test_case_that_is_not_a_mapping_names_the_case(tmp_path):
    tests = [{"size": 3, "seed": 1}, [3, 1]]
    message = load_error(write_task(tmp_path / "lb", {"tests": tests}))
    assert "tests[1]" in message and "mapping" in message


def test_benchmark_case_that_is_not_a_mapping_names_the_case(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"benchmarks": ["size=1024"]}))
    assert "benchmarks[0]" in message


@pytest.mark.parametrize("ranking", ["median", "min", "", 3])
def test_ranking_by_must_be_last_mean_or_geom(tmp_path, ranking):
    message = load_error(write_task(tmp_path / "lb", {"ranking_by": ranking}))
    assert "'ranking_by'" in message and repr(ranking) in message


@pytest.mark.parametrize("ranking", ["last", "mean", "geom"])
def test_ranking_by_accepts_the_three_rules(tmp_path, ranking):
    assert load_task(write_task(tmp_path / "lb", {"ranking_by": ranking})).ranking_by == ranking


def test_multi_gpu_case_without_world_size_names_the_case(tmp_path):
    overrides = {
        "multi_gpu": True,
        "tests": [{"size": 3, "world_size": 2}],
        "benchmarks": [{"size": 8, "world_size": 4}, {"size": 16}],
    }
    message = load_error(write_task(tmp_path / "lb", overrides))
    assert "benchmarks[1]" in message and "world_size" in message


def test_multi_gpu_with_world_size_everywhere_loads(tmp_path):
    overrides = {"multi_gpu": True, "tests": [{"size": 3, "world_size": 2}], "benchmarks": []}
    assert load_task(write_task(tmp_path / "lb", overrides)).multi_gpu is True


def test_invalid_yaml(tmp_path):
    folder = tmp_path / "lb"
    folder.mkdir()
    path = folder / "task.yml"
    path.write_text("description: 'unterminated\ntests: [\n")
    message = load_error(path)
    assert "not valid YAML" in message


def test_top_level_not_a_mapping(tmp_path):
    folder = tmp_path / "lb"
    folder.mkdir()
    path = folder / "task.yml"
    path.write_text("- just\n- a list\n")
    assert "mapping" in load_error(path)


def test_missing_file(tmp_path):
    path = tmp_path / "lb" / "task.yml"
    assert "not found" in load_error(path)


@pytest.mark.parametrize("key", ["test_timeout", "benchmark_timeout", "ranked_timeout"])
@pytest.mark.parametrize("value", [0, -5, "soon", True, None])
def test_bad_timeout_names_the_key(tmp_path, key, value):
    message = load_error(write_task(tmp_path / "lb", {key: value}))
    assert f"'{key}'" in message and repr(value) in message


@pytest.mark.parametrize("value", ["tomorrow", "2030-13-01", "31/01/2030", "2030-01-31 25:00"])
def test_bad_deadline_names_the_key(tmp_path, value):
    message = load_error(write_task(tmp_path / "lb", {"deadline": value}))
    assert "'deadline'" in message and repr(value) in message


def test_unquoted_impossible_date_is_a_task_error(tmp_path):
    path = write_task(tmp_path / "lb")
    path.write_text(path.read_text() + "deadline: 2030-13-01\n")
    assert "not valid YAML" in load_error(path)


@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_non_finite_timeout(tmp_path, value):
    path = write_task(tmp_path / "lb")
    path.write_text(path.read_text() + f"test_timeout: {value}\n")
    assert "'test_timeout'" in load_error(path)


def test_no_tests(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"tests": []}))
    assert "'tests'" in message


def test_case_argument_that_is_not_an_identifier(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"tests": [{"block-size": 3}]}))
    assert "tests[0]" in message and "'block-size'" in message


def test_missing_template_file(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"templates": {"Triton": "template.py"}}))
    assert "templates.Triton" in message and "template.py" in message


def test_bad_lang(tmp_path):
    message = load_error(write_task(tmp_path / "lb", {"lang": "rust"}))
    assert "'lang'" in message and "'rust'" in message


# -- what a valid file gives --------------------------------------------------------------------
def test_case_values_keep_their_yaml_types(tmp_path):
    folder = tmp_path / "typed"
    folder.mkdir()
    (folder / "reference.py").write_text("# placeholder\n")
    (folder / "task.yml").write_text(
        "files:\n"
        '  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
        '  - {"name": "reference.py", "source": "reference.py"}\n'
        'description: "typed values"\n'
        "tests:\n"
        '  - {"size": 3, "causal": true, "masked": false, "label": "True",'
        ' "dims": [2, 4], "scale": 0.5, "note": "007"}\n'
    )
    (case,) = load_task(folder / "task.yml").tests
    assert case["causal"] is True and case["masked"] is False
    assert case["label"] == "True" and isinstance(case["label"], str)
    assert case["dims"] == [2, 4] and isinstance(case["dims"], list)
    assert case["size"] == 3 and type(case["size"]) is int
    assert case["scale"] == 0.5 and case["note"] == "007"


def test_defaults(tmp_path):
    task = load_task(write_task(tmp_path / "lb"))
    assert DEFAULT_TIMEOUT_S == 180
    assert task.test_timeout == task.benchmark_timeout == task.ranked_timeout == 180
    assert task.ranking_by == "last"
    assert task.lang == "py"
    assert task.deadline is None and not task.is_closed()
    assert task.multi_gpu is False and task.seed is None and task.gpus == ()


def test_timeouts_are_read(tmp_path):
    task = load_task(write_task(tmp_path / "lb", {"test_timeout": 20, "ranked_timeout": 7.5}))
    assert (task.test_timeout, task.benchmark_timeout, task.ranked_timeout) == (20, 180, 7.5)


def test_name_defaults_to_the_folder(tmp_path):
    assert load_task(write_task(tmp_path / "vectoradd_v2")).name == "vectoradd_v2"


def test_name_key_overrides_the_folder(tmp_path):
    task = load_task(write_task(tmp_path / "folder", {"name": "prefixsum"}))
    assert task.name == "prefixsum"


def test_group_layout_resolves_parent_sources(tmp_path):
    group = tmp_path / "leaderboards" / "pmpp"
    (group / "vectoradd").mkdir(parents=True)
    (group / "utils.py").write_text("# shared helpers\n")
    (group / "template.py").write_text("# starter\n")
    files = [*BASE["files"], {"name": "utils.py", "source": "../utils.py"}]
    write_task(group / "vectoradd", {"files": files, "templates": {"Python": "../template.py"}})
    catalog = load_catalog(tmp_path)
    task = catalog.get("vectoradd")
    assert task.root == (group / "vectoradd").resolve()
    support = dict(task.support_files())
    assert support["utils.py"] == (group / "utils.py").resolve()
    assert support["reference.py"] == (group / "vectoradd" / "reference.py").resolve()
    assert task.submission_name == "submission.py"


def test_catalog_finds_flat_and_grouped_leaderboards(tmp_path):
    write_task(tmp_path / "leaderboards" / "flat")
    write_task(tmp_path / "leaderboards" / "group" / "nested")
    # solutions/ folders are not leaderboards, even with a task.yml inside
    write_task(tmp_path / "leaderboards" / "flat" / "solutions")
    assert sorted(load_catalog(tmp_path).tasks) == ["flat", "nested"]


def test_duplicate_leaderboard_names_fail_only_that_name(tmp_path):
    write_task(tmp_path / "leaderboards" / "group_a" / "softmax")
    write_task(tmp_path / "leaderboards" / "group_b" / "softmax")
    write_task(tmp_path / "leaderboards" / "healthy")
    catalog = load_catalog(tmp_path)
    assert sorted(catalog.tasks) == ["healthy"]  # the other leaderboards still load
    with pytest.raises(TaskError) as info:
        catalog.get("softmax")
    message = str(info.value)
    assert "'softmax'" in message and "already used" in message
    assert "group_a" in message and "group_b" in message
    assert set(catalog.broken) == {
        (tmp_path / "leaderboards" / g / "softmax" / "task.yml").resolve()
        for g in ("group_a", "group_b")
    }


def test_duplicate_names_through_the_name_key(tmp_path):
    write_task(tmp_path / "leaderboards" / "one", {"name": "same"})
    write_task(tmp_path / "leaderboards" / "two", {"name": "same"})
    with pytest.raises(TaskError, match="'same'"):
        load_catalog(tmp_path).get("same")


def test_unknown_leaderboard_in_catalog_lists_known_names(tmp_path):
    write_task(tmp_path / "leaderboards" / "addone")
    with pytest.raises(KeyError, match="unknown leaderboard 'nope'.*addone"):
        load_catalog(tmp_path).get("nope")


# -- deadlines ----------------------------------------------------------------------------------
def test_deadline_date_only_is_midnight_utc(tmp_path):
    task = load_task(write_task(tmp_path / "lb", {"deadline": "2030-01-31"}))
    assert task.deadline == dt.datetime(2030, 1, 31, tzinfo=dt.UTC)


def test_deadline_with_time(tmp_path):
    task = load_task(write_task(tmp_path / "lb", {"deadline": "2030-01-31 12:30"}))
    assert task.deadline == dt.datetime(2030, 1, 31, 12, 30, tzinfo=dt.UTC)


def test_deadline_written_unquoted_in_yaml(tmp_path):
    folder = tmp_path / "lb"
    path = write_task(folder)
    path.write_text(path.read_text() + "deadline: 2030-01-31\n")
    assert load_task(path).deadline == dt.datetime(2030, 1, 31, tzinfo=dt.UTC)


def test_parse_deadline_forms():
    where = Path("task.yml")
    utc = dt.UTC
    assert parse_deadline("2030-01-31", where) == dt.datetime(2030, 1, 31, tzinfo=utc)
    assert parse_deadline("2030-01-31 12:30", where) == dt.datetime(2030, 1, 31, 12, 30, tzinfo=utc)
    assert parse_deadline(dt.date(2030, 1, 31), where) == dt.datetime(2030, 1, 31, tzinfo=utc)
    with pytest.raises(TaskError, match="task.yml: key 'deadline'"):
        parse_deadline("next week", where)


def test_is_closed(tmp_path):
    task = load_task(write_task(tmp_path / "lb", {"deadline": "2030-01-31 12:30"}))
    deadline = dt.datetime(2030, 1, 31, 12, 30, tzinfo=dt.UTC)
    assert not task.is_closed(deadline - dt.timedelta(minutes=1))
    assert task.is_closed(deadline)
    assert task.is_closed(deadline + dt.timedelta(days=1))
    assert not task.is_closed()  # now is before 2030


def test_past_deadline_is_closed_now(tmp_path):
    task = load_task(write_task(tmp_path / "lb", {"deadline": "2020-01-01"}))
    assert task.is_closed()
