"""How a leaderboard's statement (task.yml's Markdown `description`) reads outside its page:
as a tile's plain-text summary, and beside task.yml's `tolerance` note."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pytest_kernelboard.spec.task import TaskSpec


def _plain(token: Token) -> str:
    """The text an inline Markdown token shows: code keeps every character, marks go."""
    if token.type in ("text", "code_inline", "html_inline"):
        return token.content
    if token.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain(child) for child in token.children or ())


def summary_line(md: MarkdownIt, description: str) -> str:
    """The statement's first paragraph as plain text (its first heading when it has no
    paragraph), from the Markdown's own tokens: `slope * x` keeps its `*`."""
    tokens = md.parse(description)
    heading = ""
    for opener, inline in zip(tokens, tokens[1:], strict=False):
        if inline.type != "inline":
            continue
        if opener.type == "paragraph_open":
            return _plain(inline).strip()
        if opener.type == "heading_open" and not heading:
            heading = _plain(inline).strip()
    return heading


# A statement that says its own tolerance ("Tolerance: ..."): task.yml's `tolerance` note
# would say it a second time on the page.
_STATES_TOLERANCE = re.compile(r"\btolerance\s*:", re.IGNORECASE)


def tolerance_note(task: TaskSpec) -> str | None:
    """task.yml's `tolerance` note, unless the statement already states the tolerance."""
    if not task.tolerance or _STATES_TOLERANCE.search(task.description or ""):
        return None
    return task.tolerance
