"""The typed results model: stored records round-trip byte for byte, and the JSON schema
generated from it is at least as strict as the hand-written one it replaced."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.results import store
from pytest_kernelboard.results.recorder import RunRecorder
from pytest_kernelboard.results.records import RUN_SCHEMA, RecordError, parse_run, validate_run
from pytest_kernelboard.results.result_model import (
    ABSENT,
    CaseRecord,
    Mode,
    ModelError,
    Run,
    Status,
    Summary,
    json_schema,
)
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.spec.discovery import SubmissionRef
from pytest_kernelboard.spec.task import load_task

FIXTURES = Path(__file__).parent / "fixtures"
HAND_SCHEMA = FIXTURES / "records" / "hand_written_run_schema.json"


def stored_records() -> list[Path]:
    """Every results document kept in the repository (the fixture stores' results/ folders)."""
    found = [
        path
        for path in sorted(FIXTURES.rglob("*.json"))
        if "results" in path.parts
        and json.loads(path.read_text()).get("schema") == "kernelboard.run/1"
    ]
    assert found, "the repository keeps results documents under tests/fixtures"
    return found


def timed_sample() -> dict[str, Any]:
    """A stored record whose last case was timed and that has provenance."""
    for path in stored_records():
        doc = json.loads(path.read_text())
        if doc["evaluations"][0]["cases"][-1].get("timing") and "provenance" in doc:
            return copy.deepcopy(doc)
    raise AssertionError("no stored record with a timed case")


def dumped(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"  # as store.add_run writes


@pytest.mark.parametrize("path", stored_records(), ids=lambda p: p.name[:30])
def test_stored_record_validates_and_round_trips_byte_for_byte(path: Path):
    text = path.read_text()
    validate_run(json.loads(text))
    run = Run.from_json(json.loads(text))
    assert dumped(run.to_json()) == text


def timing(mean_us: float) -> dict[str, Any]:
    """A timing block with the keys measure.py writes, known to the model and not."""
    return {
        "clock": "cuda_event",
        "n": 3,
        "mean_us": mean_us,
        "median_us": mean_us,
        "std_us": 0.5,
        "min_us": mean_us - 1,
        "max_us": mean_us + 1,
        "ci95_us": [mean_us - 1, mean_us + 1],
        "statistic": "median",
        "rank_us": mean_us,
        "rank_ci95_us": [mean_us - 1, mean_us + 1],
        "samples_us": [mean_us - 1, mean_us, mean_us + 1],
        "wall_us": [mean_us + 3] * 3,
        "warmup_calls": 2,  # not in the model: kept in `extra`
        "stop_reason": "converged",
        "floor_us": mean_us / 2,
        "blocking_off": None,
        "event_overhead_us": 1.25,
        "host_bound_calls": 0,
        "wall_s": {"timed": 0.01},
        "flags": [],
        "elapsed_s": 0.5,
    }


def produced_document(tmp_path: Path) -> dict[str, Any]:
    """A results document the recorder writes: a failed test, timed benchmarks with a stored
    reference and a profile, an unknown detail, and a reference measured in the run."""
    task = load_task(FIXTURES / "core" / "leaderboards" / "addone" / "task.yml")
    sub = tmp_path / "submission.py"
    sub.write_text("def custom_kernel(data):\n    return data\n")
    ref = SubmissionRef(sub, task.name, "alice")
    recorder = RunRecorder("benchmark")
    recorder.seeds[task.name] = {"tests": 1}
    recorder.record(task, ref, Case(TEST, 0, dict(task.tests[0])), CaseOutcome("failed", "off"))
    bench = Case(BENCHMARK, 0, dict(task.benchmarks[0]))
    outcome = CaseOutcome(
        "passed",
        duration_s=1.23456789,
        timing=timing(20.0),
        reference_timing=timing(30.0),
        speedup=1.5,
    )
    outcome.details["reference_run"] = {"source": "store", "file": "results/x.json"}
    outcome.details["eval_py"] = {"mode": "benchmark", "returncode": 0}
    outcome.details["profile"] = {
        "tool": "torch.profiler",
        "report": None,
        "what": "kernels",
        "calls_total": 2,
        "duration_us_total": 4.0,
        "top": [{"name": "k", "calls": 2, "duration_us": 4.0}],
    }
    recorder.record(task, ref, bench, outcome)
    recorder.record_reference(task, bench, timing(30.0))
    return recorder.document()


def test_a_produced_document_validates_and_round_trips(tmp_path: Path):
    doc = produced_document(tmp_path)
    validate_run(doc)
    assert dumped(Run.from_json(doc).to_json()) == dumped(doc)
    submission, reference = doc["evaluations"]
    assert [c["status"] for c in submission["cases"]] == ["failed", "passed"]
    case = submission["cases"][1]
    # Today's order: the case's own keys, then its details in the order they were added.
    assert list(case)[:11] == list(CaseRecord.__dataclass_fields__)[:4] + [
        "seed",
        "status",
        "message",
        "duration_s",
        "timing",
        "reference_timing",
        "speedup",
    ]
    assert list(case)[11:] == ["reference_run", "eval_py", "profile"]
    assert case["duration_s"] == 1.234568
    assert case["timing"]["warmup_calls"] == 2
    assert case["timing"]["speed_of_light"] is not None
    assert list(submission["summary"]) == [
        "status",
        "tests_passed",
        "tests_total",
        "benchmarks_passed",
        "benchmarks_total",
        "score_us",
        "score_ci95_us",
        "reference_score_us",
        "speedup",
        "speedup_ci95",
        "tied_with_reference",
        "fast_p",
        "fast_p_raw",
    ]
    assert submission["summary"]["status"] == "failed"  # its test failed; the benchmark passed
    assert submission["summary"]["speedup"] == pytest.approx(1.5)
    assert reference["submission"]["is_reference"] is True
    assert reference["summary"]["score_us"] == pytest.approx(30.0)
    assert list(doc)[:8] == [
        "schema",
        "run_id",
        "created_at",
        "mode",
        "harness",
        "environment",
        "seeds",
        "evaluations",
    ]


def test_filed_records_round_trip(tmp_path: Path):
    """What `kernelboard results add` writes reads back through the model unchanged."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "site" / "leaderboards", repo / "leaderboards")
    run = json.loads(stored_records()[-1].read_text())
    run.pop("evaluation_index", None)
    run.pop("provenance", None)
    run["run_id"] = "a" * 32
    filed = store.add_run(repo, run, {"pull_request": 7, "repository": "o/n"})
    assert filed
    for item in filed:
        text = (repo / item.record).read_text()
        assert dumped(parse_run(json.loads(text)).to_json()) == text


def test_absent_and_null_stay_apart():
    doc = json.loads(stored_records()[0].read_text())
    case = doc["evaluations"][0]["cases"][0]
    case.pop("timing", None)
    case["speedup"] = None
    record = CaseRecord.from_json(case)
    assert record.timing is ABSENT and record.speedup is None
    assert record.status is Status(case["status"])
    out = record.to_json()
    assert "timing" not in out and out["speedup"] is None
    assert Run.from_json(doc).mode in set(Mode)


def test_from_json_names_the_missing_key():
    with pytest.raises(ModelError, match=r"\$: 'tests_total' is a required property"):
        Summary.from_json({"status": "passed", "tests_passed": 1})
    with pytest.raises(ModelError, match=r"\$.status: 'won' is not one of"):
        Summary.from_json({"status": "won", "tests_passed": 1, "tests_total": 1})


# ---------------------------------------------------------------- the generated schema


def _looser(old: dict[str, Any], new: dict[str, Any], path: str) -> list[str]:
    """Where `new` accepts something `old` refused (for the keywords the old schema used)."""
    problems = []
    for key, value in old.items():
        if key == "required":
            missing = set(value) - set(new.get("required", []))
            problems += [f"{path}: {m} not required" for m in sorted(missing)]
        elif key == "properties":
            for name, sub in value.items():
                if name not in new.get("properties", {}):
                    problems.append(f"{path}.{name}: not in the generated schema")
                else:
                    problems += _looser(sub, new["properties"][name], f"{path}.{name}")
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            problems += _looser(value, new.get(key, {}), f"{path}[{key}]")
        elif key == "type":
            types = set(value if isinstance(value, list) else [value])
            got = new.get("type")
            if got is None and "enum" not in new and "const" not in new:
                problems.append(f"{path}: no type")
            elif got is not None and not set(got if isinstance(got, list) else [got]) <= types:
                problems.append(f"{path}: type {got} wider than {value}")
        elif new.get(key) != value:
            problems.append(f"{path}: {key} {new.get(key)!r} instead of {value!r}")
    return problems


def test_generated_schema_is_at_least_as_strict_as_the_hand_written_one():
    hand = json.loads(HAND_SCHEMA.read_text())
    assert _looser(hand, RUN_SCHEMA, "$") == []
    assert RUN_SCHEMA["title"] == "kernelboard.run/1"
    assert RUN_SCHEMA["properties"]["schema"]["const"] == "kernelboard.run/1"


def test_the_schema_follows_the_types():
    case = json_schema(CaseRecord)
    assert case["properties"]["speedup"] == {"type": ["number", "null"], "minimum": 0}
    assert "speedup" not in case["required"] and "status" in case["required"]
    assert case["properties"]["status"] == {"enum": [s.value for s in Status]}
    assert case["properties"]["timing"]["type"] == ["object", "null"]
    assert case["properties"]["timing"]["properties"]["wall_s"] == {
        "type": "object",
        "additionalProperties": {"type": "number", "minimum": 0},
    }
    assert json_schema(Summary)["properties"]["status"] == {"enum": ["passed", "failed", "skipped"]}


def _set(path: tuple[Any, ...], value: Any):
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


_DELETE = object()
_CASE = ("evaluations", 0, "cases", 0)
_BENCH = ("evaluations", 0, "cases", -1)
_SUMMARY = ("evaluations", 0, "summary")

MUTATIONS = {
    "wrong schema id": (_set(("schema",), "kernelboard.run/2"), "$.schema"),
    "no schema": (_set(("schema",), _DELETE), "'schema' is a required property"),
    "short run id": (_set(("run_id",), "abc"), "$.run_id"),
    "unknown mode": (_set(("mode",), "race"), "$.mode"),
    "no environment": (_set(("environment",), _DELETE), "'environment' is a required"),
    "empty device": (_set(("environment", "device"), ""), "$.environment.device"),
    "device kind": (_set(("environment", "device_kind"), "tpu"), "$.environment.device_kind"),
    "unknown status": (_set((*_CASE, "status"), "won"), "status"),
    "unknown kind": (_set((*_CASE, "kind"), "fuzz"), "kind"),
    "negative index": (_set((*_CASE, "index"), -1), "index"),
    "negative duration": (_set((*_CASE, "duration_s"), -1.0), "duration_s"),
    "no message": (_set((*_CASE, "message"), _DELETE), "'message' is a required property"),
    "zero calls": (_set((*_BENCH, "timing", "n"), 0), "timing.n"),
    "three-point interval": (_set((*_BENCH, "timing", "ci95_us"), [1, 2, 3]), "ci95_us"),
    "negative mean": (_set((*_BENCH, "timing", "mean_us"), -2.0), "mean_us"),
    "unknown clock": (_set((*_BENCH, "timing", "clock"), "sundial"), "clock"),
    "summary error": (_set((*_SUMMARY, "status"), "error"), "summary.status"),
    "negative score": (_set((*_SUMMARY, "score_us"), -1.0), "score_us"),
    "negative fast_p": (_set((*_SUMMARY, "fast_p"), {"1": -0.5}), "fast_p"),
    "bad sha": (_set(("evaluations", 0, "submission", "sha256"), "XYZ"), "sha256"),
    "empty author": (_set(("evaluations", 0, "submission", "author"), ""), "author"),
    "ranking_by": (_set(("evaluations", 0, "leaderboard", "ranking_by"), "max"), "ranking_by"),
    "pull request text": (_set(("provenance", "pull_request"), "7"), "pull_request"),
    "not finite": (_set((*_CASE, "duration_s"), float("nan")), "not a finite number"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutations_are_refused(name: str):
    import jsonschema

    mutate, message = MUTATIONS[name]
    doc = timed_sample()
    mutate(doc)
    with pytest.raises(RecordError, match=message.replace("$", r"\$").replace("[", r"\[")):
        validate_run(doc)
    hand = jsonschema.Draft202012Validator(json.loads(HAND_SCHEMA.read_text()))
    if name != "not finite":  # the hand schema refused these too (non-finite: validate_run)
        assert list(hand.iter_errors(doc))
