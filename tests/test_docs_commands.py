"""The commands in README.md and docs/*.md run as written.

Every ```bash / ```sh / ```console block (and every inline `kernelboard ...` or `pytest ...`
span) is read as the shell would split it, and each command is checked against what it names:

- `kernelboard <subcommand> ...`: the subcommand and each flag exist in the real argparse parser
  (pytest_kernelboard/cli.py), and a command without placeholders parses as a whole;
- `pytest ...`: every `--kb-*` flag is one of the plugin's options (with a valid choice), and
  every other flag is one that pytest and its installed plugins know;
- `pip install`: the extras named exist, and the package is this checkout (`-e .`);
- every leaderboard named (`kernelboard judge NAME`, `--kb-leaderboard`, `judge_many("NAME")`, a
  JSON job's "leaderboard") is in leaderboards/, and a JSON job is one the service accepts;
- every path under the repository exists, unless a command before it in the same block makes it.

A few cheap commands also run end to end: `kernelboard --help` and the help of every documented
subcommand, `kernelboard new` into a temporary folder, `kernelboard runner-labels` against its
documented output.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_kernelboard import cli
from pytest_kernelboard import plugin as kb_plugin
from pytest_kernelboard.service.jobs import parse_job
from pytest_kernelboard.spec.discovery import load_catalog

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", "2>", "&>", "2>&1", ">&"}
# Paths the docs name that a command earlier in the same block makes (checked: that command
# must be there), beyond what mkdir, cp, redirections and `kernelboard new` make.
MADE_BY = {
    "leaderboards/kernelbench": "kernelboard import kernelbench",
    "leaderboards/pmpp_v2": "kernelboard import gpumode",
}
# Options whose value is a file or folder a command writes.
OUTPUT_OPTIONS = {"--out", "--dest", "--workdir", "--kb-results", "--state", "--benchmark-json"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str

    def where(self, offset: int = 0) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line + 1 + offset}"


@dataclass
class Command:
    tokens: list[str]
    where: str
    text: str
    block: Block | None = None
    made: set[str] = field(default_factory=set)  # paths made by the commands before it


def parse_blocks(path: Path, text: str) -> list[Block]:
    """The fenced blocks of one markdown text."""
    found, start, lang, body = [], None, "", []
    for number, line in enumerate(text.splitlines()):
        fence = re.match(r"^(\s*)```(\w*)", line)
        if fence and start is None:
            start, lang, body = number, fence.group(2), []
        elif fence and start is not None:
            found.append(Block(path, start, lang, "\n".join(body)))
            start = None
        elif start is not None:
            body.append(line)
    return found


def blocks() -> list[Block]:
    return [b for path in DOCS for b in parse_blocks(path, path.read_text())]


def shell_blocks() -> list[Block]:
    return [b for b in blocks() if b.lang in SHELL_LANGS]


def split_commands(text: str) -> list[list[str]]:
    """One shell line as simple commands (split at ;, &&, |, ...; redirections kept as a
    ['>', target] pair at the end of their command); comments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in SEPARATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def block_commands(block: Block) -> list[Command]:
    """The commands of a block, in order, each knowing what the ones before it made."""
    joined, offsets, pending, first = [], [], "", None
    for offset, line in enumerate(block.text.splitlines()):
        if block.lang == "console":
            if not pending and not line.startswith("$ "):
                continue  # a command's output
            line = line.removeprefix("$ ") if not pending else line
        first = offset if not pending else first
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        offsets.append(first)
        pending = ""
    commands, made = [], set()
    for line, offset in zip(joined, offsets, strict=True):
        for tokens in split_commands(line):
            for inner in substitutions(tokens):
                commands.append(Command(inner, block.where(offset), line, block, set(made)))
            tokens = without_redirections(tokens, made)
            if tokens:
                commands.append(Command(tokens, block.where(offset), line, block, set(made)))
                made |= makes(tokens)
    return commands


def substitutions(tokens: list[str]) -> list[list[str]]:
    """The commands inside $(...) of the tokens."""
    inner = []
    for token in tokens:
        for text in re.findall(r"\$\(([^)]*)\)", token):
            inner.extend(split_commands(text))
    return inner


def without_redirections(tokens: list[str], made: set[str]) -> list[str]:
    kept, skip = [], False
    for token in tokens:
        if skip:
            made.add(normal(token))
            skip = False
        elif token in REDIRECTS:
            skip = True
        else:
            kept.append(token)
    return kept


def normal(path: str) -> str:
    return path.rstrip("/").removeprefix("./")


def makes(tokens: list[str]) -> set[str]:
    """What a command makes that a later command of its block may name."""
    out = set()
    if tokens[0] == "mkdir":
        out |= {normal(t) for t in tokens[1:] if not t.startswith("-")}
    elif tokens[0] == "cp" and len(tokens) >= 3:
        out.add(normal(tokens[-1]))
    elif tokens[:2] == ["kernelboard", "new"]:
        names = [t for t in tokens[2:] if not t.startswith("-")]
        group = tokens[tokens.index("--group") + 1] if "--group" in tokens else None
        out.add("/".join(["leaderboards", *([group] if group else []), names[0]]))
    for option in OUTPUT_OPTIONS:
        if option in tokens[:-1]:
            out.add(normal(tokens[tokens.index(option) + 1]))
    text = " ".join(tokens)
    out |= {path for path, maker in MADE_BY.items() if text.startswith(maker)}
    return out


def all_commands() -> list[Command]:
    return [c for b in shell_blocks() for c in block_commands(b)]


def inline_spans() -> list[tuple[str, str]]:
    """(where, text) of every inline code span outside fenced blocks."""
    spans = []
    for path in DOCS:
        inside = False
        for number, line in enumerate(path.read_text().splitlines()):
            if re.match(r"^\s*```", line):
                inside = not inside
                continue
            if not inside:
                for span in re.findall(r"`([^`]+)`", line):
                    spans.append((f"{path.relative_to(REPO)}:{number + 1}", span))
    return spans


def inline_commands(program: str) -> list[Command]:
    found = []
    for where, span in inline_spans():
        if span.startswith(program + " "):
            for tokens in split_commands(span):
                found.append(Command(tokens, where, span))
    return found


# -- what the commands are checked against -------------------------------------------------------


def placeholder(token: str) -> bool:
    """PATH, RUN.json, OWNER/NAME, <id>, $USER, [--pr N], ...: a stand-in, not a value."""
    return bool(
        re.fullmatch(r"[A-Z][A-Z0-9_]*([./-][A-Za-z0-9_]+)*", token)
        or re.search(r"[<>\[\]$]|\.\.\.", token)
    )


def kernelboard_parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return None


def walk(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(the subcommand path, the problems) of `kernelboard ...` tokens, read against the parser:
    each subcommand must be one, each flag one of its parser's."""
    parser, path, problems = kernelboard_parser(), [], []
    rest = [t.strip("[]") for t in tokens[1:] if t.strip("[]") and t != "..."]
    index = 0
    while index < len(rest):
        token = rest[index]
        index += 1
        if token.startswith("-") and token != "-":
            name = token.split("=", 1)[0]
            action = parser._option_string_actions.get(name)
            if action is None:
                problems.append(f"`kernelboard {' '.join(path)}` has no option {name}")
                continue
            if "=" in token or action.nargs == 0:
                continue
            if action.nargs is None:
                index += 1
            elif action.nargs in ("?", "+", "*"):
                while index < len(rest) and not rest[index].startswith("-"):
                    index += 1
                    if action.nargs == "?":
                        break
            else:
                index += int(action.nargs)
            continue
        choices = subcommands(parser)
        if choices is not None:
            if placeholder(token):
                break  # `kernelboard import <source>`: any of them
            if token not in choices:
                problems.append(
                    f"`kernelboard {' '.join(path)}` has no subcommand {token!r} "
                    f"(it has {', '.join(sorted(choices))})"
                )
                break
            parser = choices[token]
            path.append(token)
    return path, problems


def parses(tokens: list[str]) -> str | None:
    """argparse's own complaint about a whole command line, or None."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            kernelboard_parser().parse_args(tokens[1:])
        except SystemExit as exc:
            if exc.code:
                return err.getvalue().strip().splitlines()[-1]
    return None


class _Options:
    """A stand-in for pytest's parser that records what plugins add."""

    def __init__(self) -> None:
        self.options: dict[str, dict] = {}

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        for name in names:
            self.options[name] = kwargs

    _addoption = addoption

    def __getattr__(self, name):  # addini, addini's relatives: not options
        return lambda *args, **kwargs: None


def kb_options() -> dict[str, dict]:
    recorder = _Options()
    kb_plugin.pytest_addoption(recorder)
    return recorder.options


def pytest_options(config: pytest.Config) -> dict[str, dict]:
    """Every option pytest and its installed plugins (xdist, pytest-benchmark, ...) add."""
    recorder = _Options()
    arguments = {"parser": recorder, "pluginmanager": config.pluginmanager}
    for impl in config.hook.pytest_addoption.get_hookimpls():
        impl.function(**{name: arguments[name] for name in impl.argnames})
    return recorder.options


def leaderboards() -> set[str]:
    return set(load_catalog(REPO).tasks)


def top_level() -> set[str]:
    return {p.name for p in REPO.iterdir() if not p.name.startswith(".") or p.name == ".github"}


def repository_path(token: str) -> str | None:
    """The part of a token that names a path under the repository (up to any placeholder)."""
    token = normal(token.strip("[]\"'"))
    if "/" not in token or token.split("/", 1)[0] not in top_level():
        return None
    parts = []
    for part in token.split("/"):
        if placeholder(part) or "*" in part:
            break
        parts.append(part)
    return "/".join(parts) or None


# -- the checks: each returns the problems it finds in what it is given --------------------------


def kernelboard_problems(commands: list[Command]) -> list[str]:
    problems = []
    for command in commands:
        if command.tokens[0] != "kernelboard":
            continue
        _, found = walk(command.tokens)
        problems += [f"{command.where}: {p}\n    {command.text}" for p in found]
        if not found and not any(placeholder(t) for t in command.tokens) and command.block:
            complaint = parses(command.tokens)
            if complaint:
                problems.append(f"{command.where}: {complaint}\n    {command.text}")
    return problems


def pytest_problems(
    commands: list[Command], kb: dict[str, dict], everything: dict[str, dict]
) -> list[str]:
    problems = []
    for command in commands:
        if command.tokens[0] != "pytest":
            continue
        for index, token in enumerate(command.tokens):
            name, _, value = token.partition("=")
            if not name.startswith("-") or placeholder(name):
                continue
            if name.startswith("--kb-"):
                if name not in kb:
                    problems.append(f"{command.where}: the plugin has no option {name}")
                    continue
                choices = kb[name].get("choices")
                value = value or (command.tokens[index + 1 : index + 2] or [""])[0]
                if choices and value not in choices and not placeholder(value):
                    problems.append(f"{command.where}: {name} {value}: not one of {choices}")
            elif name not in everything:
                problems.append(f"{command.where}: pytest has no option {name}")
    return problems


def kb_mention_problems(texts: dict[str, str], kb: dict[str, dict]) -> list[str]:
    named = {
        (where, option)
        for where, text in texts.items()
        for option in re.findall(r"--kb-[a-z][a-z-]*[a-z]", text)
    }
    return sorted(f"{where}: no option {option}" for where, option in named if option not in kb)


def pip_problems(installs: list[tuple[str, str]]) -> list[str]:
    """(where, `pip install ...`) -> what would not install this checkout as written."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    problems = []
    for where, text in installs:
        tokens = shlex.split(text)
        for index, token in enumerate(tokens):
            if token == "-r" and not (REPO / tokens[index + 1]).exists():
                problems.append(f"{where}: {tokens[index + 1]} does not exist")
            match = re.fullmatch(r"([\w.-]*)\[([\w,]+)\]", token)
            if not match:
                continue
            if match.group(1) not in ("", "."):
                problems.append(
                    f"{where}: {token!r} asks the package index for {match.group(1)!r}; this "
                    'package installs from its checkout: pip install -e ".[extra]"'
                )
            problems += [
                f"{where}: no extra {name!r} (pyproject.toml has {sorted(extras)})"
                for name in match.group(2).split(",")
                if name not in extras
            ]
    return problems


def leaderboard_problems(commands: list[Command], found_blocks: list[Block]) -> list[str]:
    known, problems = leaderboards(), []
    pr_fixture = {p.name for p in (REPO / "tests/fixtures/pr/repo/leaderboards").iterdir()}
    for command in commands:
        tokens, named = command.tokens, []
        if tokens[:2] == ["kernelboard", "judge"]:
            named += [t for t in tokens[2:] if not t.startswith("-")][:1]
        if "--kb-leaderboard" in tokens[:-1]:
            named.append(tokens[tokens.index("--kb-leaderboard") + 1])
        if tokens[:3] == ["kernelboard", "pr", "simulate"] and "--leaderboard" in tokens[:-1]:
            name = tokens[tokens.index("--leaderboard") + 1]
            if name not in pr_fixture:  # simulate's leaderboards are its fixture's
                problems.append(f"{command.where}: tests/fixtures/pr has no leaderboard {name!r}")
        problems += [
            f"{command.where}: no leaderboard {name!r} in leaderboards/\n    {command.text}"
            for name in named
            if not placeholder(name) and name not in known
        ]
    for block in found_blocks:
        if block.lang == "python":
            for call in re.finditer(
                r"(judge_many_on_ray\(\s*\"[^\"]*\",|judge_many\(|\.judge\()\s*\"([\w-]+)\"",
                block.text,
            ):
                if call.group(2) not in known:
                    problems.append(f"{block.where()}: no leaderboard {call.group(2)!r}")
        if block.lang == "json":
            for name in re.findall(r'"leaderboard":\s*"([^"]+)"', block.text):
                if not placeholder(name) and name not in known:
                    problems.append(
                        f"{block.where()}: no leaderboard {name!r}: POST /v1/jobs answers 404"
                    )
    return problems


def job_problems(found_blocks: list[Block]) -> tuple[int, list[str]]:
    """(the request bodies found, what posting each verbatim would be refused for)."""
    from pytest_kernelboard.service.jobs import BadJob
    from pytest_kernelboard.service.judges import RepositoryJudge

    judge, jobs, problems = RepositoryJudge(REPO), 0, []
    for block in found_blocks:
        if block.lang != "json":
            continue
        try:
            body = json.loads(block.text)
        except ValueError:
            continue  # an answer with elisions ({...}), not a request body
        if not isinstance(body, dict) or "candidates" not in body:
            continue
        jobs += 1
        try:
            request = parse_job(body, max_candidates=100)
        except BadJob as exc:
            problems.append(f"{block.where()}: 400 {exc}")
            continue
        if not judge.knows(request.leaderboard):
            problems.append(f"{block.where()}: 404 no leaderboard {request.leaderboard!r}")
    return jobs, problems


def path_problems(commands: list[Command]) -> list[str]:
    problems = []
    for command in commands:
        if command.tokens[0] == "mkdir":
            continue
        for index, token in enumerate(command.tokens):
            path = repository_path(token)
            if path is None or (index and command.tokens[index - 1] in OUTPUT_OPTIONS):
                continue
            if command.tokens[0] == "cp" and index == len(command.tokens) - 1:
                continue
            made = any(path == m or path.startswith(m + "/") for m in command.made)
            if not made and not (REPO / path).exists():
                problems.append(f"{command.where}: {path} does not exist\n    {command.text}")
    return problems


def doc_texts() -> dict[str, str]:
    return {str(path.relative_to(REPO)): path.read_text() for path in DOCS}


def test_the_docs_have_command_blocks_to_check():
    """The collection itself: a regression to zero blocks would pass every check below."""
    commands = all_commands()
    assert len(shell_blocks()) >= 15
    assert sum(c.tokens[0] == "kernelboard" for c in commands) >= 20
    assert sum(c.tokens[0] == "pytest" for c in commands) >= 8


def test_every_block_of_commands_is_tagged_so_it_is_checked():
    """A fence without a shell language escapes every check here: commands go in ```bash (or
    ```console with `$ ` prompts); diagrams in ```text."""
    untagged = [
        f"{b.where()}: {line.strip()!r}"
        for b in blocks()
        if b.lang not in SHELL_LANGS | {"python", "json", "cpp", "yaml", "text", "toml"}
        for line in b.text.splitlines()
        if re.match(r"\s*(\$ |kernelboard |pytest |python |pip )", line)
    ]
    assert not untagged, "command blocks without a shell tag:\n" + "\n".join(untagged)


def test_kernelboard_commands_exist_with_their_flags():
    problems = kernelboard_problems(all_commands() + inline_commands("kernelboard"))
    assert not problems, "\n".join(problems)


def test_pytest_flags_exist(pytestconfig):
    commands = all_commands() + inline_commands("pytest")
    problems = pytest_problems(commands, kb_options(), pytest_options(pytestconfig))
    assert not problems, "\n".join(problems)


def test_every_kb_option_named_anywhere_in_the_docs_exists():
    """Prose too: `--kb-compile-timeout SECONDS` in a paragraph is a command a reader types."""
    problems = kb_mention_problems(doc_texts(), kb_options())
    assert not problems, "\n".join(problems)


def test_pip_installs_name_this_package_and_its_extras():
    installs = [
        (c.where, shlex.join(c.tokens))
        for c in all_commands()
        if c.tokens[:2] == ["pip", "install"]
    ]
    installs += [(where, span) for where, span in inline_spans() if span.startswith("pip install")]
    assert len(installs) >= 3
    problems = pip_problems(installs)
    assert not problems, "\n".join(problems)


def test_leaderboards_named_exist():
    problems = leaderboard_problems(all_commands(), blocks())
    assert not problems, "\n".join(problems)


def test_documented_jobs_are_accepted_as_posted():
    """A JSON job in the docs, posted verbatim, is a job (not a 400) for a leaderboard the
    server knows (not a 404)."""
    jobs, problems = job_problems(blocks())
    assert jobs, "docs/agents.md shows the body of POST /v1/jobs"
    assert not problems, "\n".join(problems)


def test_paths_under_the_repository_exist():
    commands = all_commands()
    problems = path_problems(commands)
    assert not problems, "\n".join(problems)
    for path, maker in MADE_BY.items():
        for command in commands:
            if any(repository_path(t) == path for t in command.tokens):
                assert path in command.made, f"{command.where}: {path} without `{maker}` before"


BROKEN = """
```bash
kernelboard judge vectoradd_py candidates/ --ray auto --out records.jsonl
kernelboard serve --prot 8000
kernelboard judge vectoradd attempts/ --mode fast
kernelboard sevre --state serve-state/
pytest submissions/vectoradd/me/submission.py --kb-mdoe benchmark
pytest submissions/vectoradd/example --kb-mode fast -x --no-such-flag
pip install 'kernelboard[jax]' -e ".[gpu]"
mkdir -p submissions/vectoradd/new && cp leaderboards/vectoradd/template.py submissions/vectoradd/new/submission.py
pytest submissions/vectoradd/new/submission.py
```

```json
{"leaderboard": "vectoradd_py", "mode": "test",
 "candidates": [{"id": "rollout-17", "source": "def custom_kernel(data): ...", "lang": "py"}]}
```

```json
{"leaderboard": "vectoradd", "mode": "fast", "candidates": [{"id": "a", "source": "x"}]}
```

```python
records = list(judges.judge("vectoradd_py", candidates, mode="test"))
```
"""


def test_the_checks_catch_what_they_are_for(pytestconfig):
    """Each check finds its kind of mistake in docs written the way they were before issue 36
    (a leaderboard only tests/fixtures/ has, misspelt flags, a package the index does not have),
    and lets pass what a block makes for itself."""
    found = parse_blocks(REPO / "docs" / "broken.md", BROKEN)
    commands = [c for b in found if b.lang in SHELL_LANGS for c in block_commands(b)]
    kb = kb_options()

    def joined(problems: list[str]) -> str:
        return "\n".join(problems)

    text = joined(kernelboard_problems(commands))
    assert "`kernelboard serve` has no option --prot" in text
    assert "has no subcommand 'sevre'" in text
    assert "argument --mode: invalid choice: 'fast'" in text
    text = joined(pytest_problems(commands, kb, pytest_options(pytestconfig)))
    assert "no option --kb-mdoe" in text and "--kb-mode fast: not one of" in text
    assert "pytest has no option --no-such-flag" in text and " -x" not in text
    text = joined(kb_mention_problems({"docs/broken.md": BROKEN}, kb))
    assert text == "docs/broken.md: no option --kb-mdoe"
    installs = [(c.where, shlex.join(c.tokens)) for c in commands if c.tokens[0] == "pip"]
    text = joined(pip_problems(installs))
    assert "asks the package index for 'kernelboard'" in text and "no extra 'gpu'" in text
    text = joined(leaderboard_problems(commands, found))
    assert text.count("no leaderboard 'vectoradd_py'") == 3, text
    assert "POST /v1/jobs answers 404" in text
    jobs, problems = job_problems(found)
    assert jobs == 2
    assert "404 no leaderboard 'vectoradd_py'" in problems[0] and "400 mode" in problems[1]
    assert path_problems(commands) == [
        "docs/broken.md:6: submissions/vectoradd/me/submission.py does not exist\n"
        "    pytest submissions/vectoradd/me/submission.py --kb-mdoe benchmark"
    ]


# -- run end to end ------------------------------------------------------------------------------


def documented_subcommands() -> list[list[str]]:
    paths = set()
    for command in all_commands() + inline_commands("kernelboard"):
        if command.tokens[0] == "kernelboard":
            path, problems = walk(command.tokens)
            if not problems:
                paths.add(tuple(path))
    return [list(p) for p in sorted(paths)]


def kernelboard_command() -> list[str]:
    found = shutil.which("kernelboard", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "pytest_kernelboard.cli"]


def test_kernelboard_help_runs():
    result = subprocess.run(
        [*kernelboard_command(), "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    for name in subcommands(kernelboard_parser()):
        assert name in result.stdout


@pytest.mark.parametrize("path", documented_subcommands(), ids=" ".join)
def test_each_documented_subcommand_has_help(path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*path, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: kernelboard {' '.join(path)}".rstrip())


def new_commands() -> list[Command]:
    return [c for c in all_commands() if c.tokens[:2] == ["kernelboard", "new"]]


@pytest.mark.parametrize("command", new_commands(), ids=lambda c: " ".join(c.tokens))
def test_kernelboard_new_as_documented(command, tmp_path):
    """`kernelboard new` in a fresh folder makes the leaderboard the next documented command
    names (`pytest leaderboards/mykernel`)."""
    result = subprocess.run(
        [*kernelboard_command(), *command.tokens[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (made,) = makes(command.tokens)
    assert (tmp_path / made / "task.yml").is_file()
    assert f"pytest {made}" in result.stdout  # what it tells the reader to run next


def test_runner_labels_prints_what_the_docs_show():
    console = [b for b in shell_blocks() if "$ kernelboard runner-labels" in b.text]
    assert console, "docs/self-hosted-runner.md shows runner-labels with its output"
    for block in console:
        lines = block.text.splitlines()
        prompt = next(i for i, line in enumerate(lines) if line.startswith("$ kernelboard"))
        shown = lines[prompt + 1]
        assert "two H200s" in lines[0]
        result = subprocess.run(
            [*kernelboard_command(), "runner-labels", "--device", "H200", "--gpus", "2"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == shown.strip()
