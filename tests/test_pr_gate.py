"""Gate rules, on a real git repository made from the fixture."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_kernelboard.pr import gate

FIXTURE = Path(__file__).parent / "fixtures" / "pr"
NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
CORRECT = (FIXTURE / "submissions" / "correct.py").read_bytes()


def run(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def commit(root, message):
    run(root, "add", "-A")
    run(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", message)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE / "repo", root)
    run(root, "init", "-q", "-b", "main")
    commit(root, "base")
    run(root, "checkout", "-q", "-b", "pr")
    return root


def pr(root, files: dict[str, bytes | None], **kwargs):
    """Commit `files` on the pr branch (None deletes) and run the gate."""
    for rel, data in files.items():
        path = root / rel
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    commit(root, "pr")
    kwargs.setdefault("now", NOW)
    author = kwargs.pop("author", "alice")
    association = kwargs.pop("association", "CONTRIBUTOR")
    return gate.check(root, "main", "pr", author, association, **kwargs)


def codes(result):
    return sorted(p.code for p in result.problems)


def test_accepts_one_submission(repo):
    result = pr(repo, {"submissions/tiny/alice/submission.py": CORRECT})
    assert result.accepted, result.problems
    assert (result.leaderboard, result.author, result.lang) == ("tiny", "alice", "py")
    assert result.devices == ["CPU"]
    assert result.submission == "submissions/tiny/alice/submission.py"
    assert len(result.sha256) == 64
    assert result.environment == gate.ENV_APPROVAL
    assert result.matrix == {
        "include": [
            {"device": "CPU", "label": "cpu", "runs_on": ["self-hosted", "kernelboard", "cpu"]}
        ]
    }


def test_workflow_edit_is_rejected(repo):
    result = pr(
        repo,
        {
            "submissions/tiny/alice/submission.py": CORRECT,
            ".github/workflows/ci.yml": b"name: pwned\n",
        },
    )
    assert not result.accepted
    assert codes(result) == ["outside_submissions"]
    assert "the workflows" in result.problems[0].message


@pytest.mark.parametrize(
    "path, what",
    [
        ("pytest_kernelboard/plugin/__init__.py", "the harness"),
        ("leaderboards/tiny/reference.py", "the leaderboards"),
        ("results/tiny/CPU/x.json", "the results"),
        ("site_generator/x.py", "the site"),
        ("setup.py", "files outside submissions/"),
    ],
)
def test_nothing_outside_submissions(repo, path, what):
    result = pr(repo, {path: b"x = 1\n"})
    assert codes(result) == ["outside_submissions"]
    assert what in result.problems[0].message


def test_author_mismatch(repo):
    result = pr(repo, {"submissions/tiny/bob/submission.py": CORRECT})
    assert codes(result) == ["author"]
    assert "`alice`" in result.problems[0].message and "bob" in result.problems[0].message


def test_author_match_ignores_case(repo):
    assert pr(repo, {"submissions/tiny/Alice/submission.py": CORRECT}, author="alice").accepted


def test_maintainer_may_submit_for_others(repo):
    result = pr(repo, {"submissions/tiny/bob/submission.py": CORRECT}, association="MEMBER")
    assert result.accepted and result.maintainer
    assert result.environment == gate.ENV_TRUSTED


def test_unknown_leaderboard(repo):
    result = pr(repo, {"submissions/nope/alice/submission.py": CORRECT})
    assert codes(result) == ["unknown_leaderboard"]
    assert "`tiny`" in result.problems[0].message


def test_deadline(repo):
    result = pr(repo, {"submissions/closed/alice/submission.py": CORRECT})
    assert codes(result) == ["deadline"]
    assert "2001-01-01T12:00:00Z" in result.problems[0].message


def test_deadline_is_judged_at_the_given_time(repo):
    early = dt.datetime(2000, 6, 1, tzinfo=dt.UTC)
    assert pr(repo, {"submissions/closed/alice/submission.py": CORRECT}, now=early).accepted


def test_file_type_must_fit_the_language(repo):
    result = pr(repo, {"submissions/tiny/alice/kernel.cu": b"__global__ void k() {}\n"})
    assert codes(result) == ["file_type"]
    assert "`py`" in result.problems[0].message


def test_size_limit(repo):
    result = pr(repo, {"submissions/tiny/alice/submission.py": b"#" * 2000}, max_bytes=1000)
    assert codes(result) == ["size"]


def test_binary_refused(repo):
    result = pr(repo, {"submissions/tiny/alice/submission.py": b"\x00\x01\xff"})
    assert codes(result) == ["binary"]


def test_one_file_per_pull_request(repo):
    result = pr(
        repo,
        {
            "submissions/tiny/alice/a.py": CORRECT,
            "submissions/tiny/alice/b.py": CORRECT,
        },
    )
    assert codes(result) == ["several_files"]


def test_layout(repo):
    result = pr(repo, {"submissions/tiny/alice/deep/submission.py": CORRECT})
    assert codes(result) == ["layout"]


def test_deleting_is_refused(repo):
    run(repo, "checkout", "-q", "main")
    (repo / "submissions/tiny/alice").mkdir(parents=True)
    (repo / "submissions/tiny/alice/old.py").write_bytes(CORRECT)
    commit(repo, "an older submission on main")
    run(repo, "branch", "-f", "pr", "main")
    run(repo, "checkout", "-q", "pr")
    result = pr(repo, {"submissions/tiny/alice/old.py": None})
    assert codes(result) == ["deletion"]


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_symlink_refused(repo):
    link = repo / "submissions/tiny/alice/submission.py"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../../leaderboards/tiny/reference.py")
    result = pr(repo, {})
    assert codes(result) == ["file_kind"]


def test_rate_limit(repo):
    files = {"submissions/tiny/alice/submission.py": CORRECT}
    result = pr(repo, files, recent_evaluations=4, max_per_hour=4)
    assert codes(result) == ["rate_limit"]
    assert "4 per hour" in result.problems[0].message


def test_rate_limit_spares_maintainers(repo):
    files = {"submissions/tiny/alice/submission.py": CORRECT}
    assert pr(repo, files, recent_evaluations=9, association="OWNER").accepted


def test_empty_pull_request(repo):
    run(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@x",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "e",
    )
    result = gate.check(repo, "main", "pr", "alice", now=NOW)
    assert codes(result) == ["empty"]


def test_odd_paths_are_made_inert(repo):
    result = pr(repo, {"docs/`@everyone <b>.md": b"x"})
    message = result.problems[0].message
    assert "@" not in message and "<b>" not in message


def test_json_round_trip_and_outputs(repo, tmp_path):
    result = pr(repo, {"submissions/tiny/alice/submission.py": CORRECT})
    doc = json.loads(json.dumps(result.to_json()))
    again = gate.GateResult.from_json(doc)
    assert again == result
    out = tmp_path / "github_output"
    gate.write_outputs(result, out)
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert lines["accepted"] == "true"
    assert lines["submission"] == "submissions/tiny/alice/submission.py"
    assert json.loads(lines["matrix"])["include"][0]["label"] == "cpu"
    assert lines["environment"] == gate.ENV_APPROVAL


def test_rejected_outputs_carry_no_path(repo, tmp_path):
    result = pr(repo, {"submissions/tiny/bob/x\ny.py": CORRECT})
    out = tmp_path / "github_output"
    gate.write_outputs(result, out)
    text = out.read_text()
    assert "accepted=false" in text and "submission=\n" in text and "x\ny" not in text
