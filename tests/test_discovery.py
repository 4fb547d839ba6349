"""Which leaderboard and author a submission file belongs to, and how devices are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kernelboard.judge.devices import leaderboard_device_name
from pytest_kernelboard.spec.discovery import find_repo_root, identify_submission, popcorn_headers

CORRECT = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"


def write(path: Path, text: str = CORRECT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_path_names_leaderboard_and_author(tmp_path):
    path = write(tmp_path / "submissions" / "addone" / "alice" / "submission.py")
    ref = identify_submission(path)
    assert (ref.leaderboard, ref.author, ref.display) == ("addone", "alice", "alice/submission.py")
    assert ref.path == path.resolve()


def test_nested_file_under_author(tmp_path):
    path = write(tmp_path / "submissions" / "addone" / "alice" / "v2" / "fast.py")
    ref = identify_submission(path)
    assert (ref.leaderboard, ref.author, ref.display) == ("addone", "alice", "alice/v2/fast.py")


def test_path_beats_popcorn_header(tmp_path):
    path = write(
        tmp_path / "submissions" / "addone" / "alice" / "submission.py",
        "#!POPCORN leaderboard softmax\n" + CORRECT,
    )
    assert identify_submission(path).leaderboard == "addone"


def test_option_beats_path_and_header(tmp_path):
    path = write(
        tmp_path / "submissions" / "addone" / "alice" / "submission.py",
        "#!POPCORN leaderboard softmax\n" + CORRECT,
    )
    ref = identify_submission(path, override="grayscale")
    assert ref.leaderboard == "grayscale"
    assert ref.author == "alice"  # the path still names the author


def test_header_outside_submissions(tmp_path):
    path = write(
        tmp_path / "scratch" / "mine.py", "#!POPCORN leaderboard addone\n#!POPCORN gpu H100\n"
    )
    ref = identify_submission(path)
    assert ref.leaderboard == "addone"
    assert ref.author == "scratch"  # no submissions/ path: the folder stands in for the author
    assert ref.display == "mine.py"


def test_option_without_header_outside_submissions(tmp_path):
    path = write(tmp_path / "scratch" / "mine.py")
    assert identify_submission(path) is None
    assert identify_submission(path, override="addone").leaderboard == "addone"


def test_too_shallow_submissions_path_falls_back_to_header(tmp_path):
    # submissions/<leaderboard>/<file> has no author folder: the path does not count
    plain = write(tmp_path / "submissions" / "addone" / "submission.py")
    assert identify_submission(plain) is None
    headed = write(
        tmp_path / "submissions" / "other" / "submission.py", "#!POPCORN leaderboard addone\n"
    )
    assert identify_submission(headed).leaderboard == "addone"


def test_header_must_be_near_the_top(tmp_path):
    late = write(tmp_path / "scratch" / "late.py", "\n" * 20 + "#!POPCORN leaderboard addone\n")
    assert identify_submission(late) is None


def test_popcorn_headers_parse():
    text = "#!POPCORN leaderboard vectoradd_py\n#!popcorn GPU  H100\nimport torch\n"
    assert popcorn_headers(text) == {"leaderboard": "vectoradd_py", "gpu": "H100"}
    assert popcorn_headers("# POPCORN leaderboard x\n#!POPCORNleaderboard y\n") == {}


def test_innermost_submissions_folder_wins(tmp_path):
    path = write(tmp_path / "submissions" / "x" / "submissions" / "addone" / "bob" / "s.py")
    ref = identify_submission(path)
    assert (ref.leaderboard, ref.author) == ("addone", "bob")


def test_find_repo_root(tmp_path):
    (tmp_path / "leaderboards").mkdir()
    deep = tmp_path / "submissions" / "addone" / "alice"
    deep.mkdir(parents=True)
    assert find_repo_root(deep) == tmp_path.resolve()
    assert find_repo_root(tmp_path) == tmp_path.resolve()


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A10G", "A10G"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("AMD Instinct MI300X", "MI300"),
        (None, "CPU"),
        ("", "CPU"),
    ],
)
def test_leaderboard_device_name(product, expected):
    assert leaderboard_device_name(product) == expected


def test_unknown_card_keeps_its_name_without_vendor():
    assert leaderboard_device_name("NVIDIA GeForce RTX 4090") == "GeForce RTX 4090"
    assert leaderboard_device_name("NVIDIA L40") == "L40"  # not L4, not L40S
