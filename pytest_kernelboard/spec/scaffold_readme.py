"""A README that `kernelboard new` wrote, left describing its example problem.

The scaffold's README states the example (element-wise ReLU). Once reference.py or task.yml
define another problem, a README that still states it describes a problem the leaderboard no
longer has: the self-check (plugin/selfcheck.py) fails it, naming the file to edit. A freshly
scaffolded folder, whose problem is still the example, passes.
"""

from __future__ import annotations

from pathlib import Path

from .scaffold import TEMPLATE_FILES, render, template_text

README = "README.md"
# The files that define the problem: once either differs from the scaffold's, the scaffold's
# README describes a problem the leaderboard no longer has.
PROBLEM_FILES = ("reference.py", "task.yml")


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def example_statement() -> str:
    """The scaffold README's statement of its example problem: its first paragraph of prose."""
    for paragraph in template_text(README).split("\n\n"):
        if paragraph.strip() and not paragraph.lstrip().startswith("#"):
            return _normalized(paragraph)
    raise AssertionError("the scaffold README has no statement paragraph")


def readme_from_scaffold(folder: Path) -> bool:
    """Whether the folder's README.md still states the scaffold's example problem."""
    try:
        text = (folder / README).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return example_statement() in _normalized(text)


def stale_scaffold_readme(folder: Path) -> str | None:
    """Why the folder's README.md is out of date, or None: it still states the scaffold's
    example problem although reference.py or task.yml define another one."""
    if not readme_from_scaffold(folder):
        return None
    template_of = {relative: template for template, relative in TEMPLATE_FILES.items()}
    changed = []
    for relative in PROBLEM_FILES:
        expected = render(template_text(template_of[relative]), folder.name)
        try:
            actual = (folder / relative).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            actual = None
        if actual is None or _normalized(actual) != _normalized(expected):
            changed.append(relative)
    if not changed:
        return None  # still the example problem: its README is right
    return (
        f"{folder / README} still describes the example problem of `kernelboard new` "
        f"({example_statement().splitlines()[0]!r}) while {' and '.join(changed)} "
        f"{'define' if len(changed) > 1 else 'defines'} another: edit README.md to describe "
        "your problem (statement, input and output, tolerance)"
    )
