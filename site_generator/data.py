"""Read leaderboards/ and results/ into what the pages need, in one streaming pass.

Record files are read once; each evaluation is reduced to a compact `Run` (the full
document is re-read later only for the pages that show it), and its dataset line is
written on the way. Rankings come from pytest_kernelboard.rankings.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import shutil
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

try:  # a fast JSON parser; reading records is most of a large build's input work
    import orjson

    _loads = orjson.loads

    def _dumps(value: Any) -> str:
        return orjson.dumps(value).decode()

except ImportError:  # pragma: no cover - the standard library does the same, slower
    orjson = None
    _loads = json.loads

    def _dumps(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)


from pytest_kernelboard import TIMING_METHOD, rankings
from pytest_kernelboard.results.store import code_index, iter_records
from pytest_kernelboard.results.summary import case_fast_p
from pytest_kernelboard.spec.discovery import Catalog, load_catalog
from pytest_kernelboard.spec.task import TaskSpec
from pytest_kernelboard.stats.speed_of_light import speed_of_light


def code_visible(task: TaskSpec, now: dt.datetime) -> bool:
    """Submitted code is public for open-code leaderboards, and for others after the deadline."""
    return task.open_code or task.is_closed(now)


@dataclass(slots=True)
class Run:
    """One evaluation of one record file, reduced."""

    path: str  # record file, relative to the repository root
    run_id: str
    index: int  # evaluation index in the original run
    leaderboard: str
    device: str
    author: str
    created_at: str
    mode: str
    status: str
    is_reference: bool
    ranked: bool
    score_us: float | None
    ci95_us: tuple[float, float] | None
    reference_score_us: float | None
    speedup: float | None
    # fast_p: faster than p x beyond noise (summary.case_fast_p, from the cases, so records
    # older than it read the same way); fast_p_raw: KernelBench's definition
    fast_p: dict[str, float] | None
    sha256: str
    submission_path: str
    tests: tuple[int, int]
    benchmarks: tuple[int, int]
    case_speedups: dict[int, float | None]  # benchmark case index -> speedup
    pull_request: int | None
    pr_url: str | None
    baseline: bool  # rankings.is_baseline: a filed reference run fit for the baseline row
    fast_p_raw: dict[str, float] | None = None
    tied: bool | None = None  # the speedup is within noise of 1 (tied_with_reference)
    timing_method: int | None = None  # harness.timing_method (None: not recorded, older)
    candidate: rankings.Candidate | None = None  # set when ranked; its payload is this run
    # A local run previewed with `site build --local`: never filed, never ranked; `path` is
    # then the document's own path, and `would_rank` the rank it would take if filed.
    local: bool = False
    would_rank: rankings.Projection | None = None

    @property
    def key(self) -> str:
        # a local run's page never takes the name of a filed one
        return f"{'local-' if self.local else ''}{self.run_id}-{self.index}"

    @property
    def date(self) -> str:
        return self.created_at[:10]


@dataclass
class Board:
    """One leaderboard on one device."""

    task: TaskSpec
    device: str
    runs: list[Run] = field(default_factory=list)
    candidates: list[rankings.Candidate] = field(default_factory=list)
    ranking: list[rankings.RankedEntry] = field(default_factory=list)
    reference: Run | None = None
    cases: dict[int, str] = field(default_factory=dict)  # benchmark case index -> label
    local: list[Run] = field(default_factory=list)  # previewed local runs (site/local.py)
    # The ranking is of the newest timing method among the board's eligible runs; runs of
    # older methods are ranked apart, per method (newest first), never against it.
    current_method: int | None = None
    apart: list[tuple[int | None, list[rankings.RankedEntry]]] = field(default_factory=list)
    baselines: list[Run] = field(default_factory=list)  # filed reference runs fit for it

    def rank(self) -> None:
        """Rank the candidates: the newest timing method's runs are the ranking, older
        methods' are ranked apart; the baseline is the latest reference run of that method."""
        groups = rankings.by_method(self.candidates)
        self.current_method = next(iter(groups), None)
        self.ranking = rankings.rank(groups.pop(self.current_method, []))
        self.apart = [(method, rankings.rank(group)) for method, group in groups.items()]
        same = [r for r in self.baselines if r.timing_method == self.current_method]
        self.reference = max(same, key=lambda r: r.created_at, default=None)

    @property
    def wants_remeasuring(self) -> bool:
        """Whether the ranking's runs were timed by an older method than this harness's own
        (or by none recorded): they rank among themselves, and the board says so."""
        current = self.current_method
        return bool(self.ranking) and (current is None or current < TIMING_METHOD)

    def ranking_for(self, method: int | None) -> list[rankings.RankedEntry]:
        """The ranking a run of this timing method is comparable with (empty when none)."""
        if method == self.current_method:
            return self.ranking
        return next((entries for m, entries in self.apart if m == method), [])

    @property
    def ranked_candidates(self) -> list[rankings.Candidate]:
        """Every eligible run of the current timing method (the history chart's points)."""
        return [c for c in self.candidates if c.timing_method == self.current_method]

    @property
    def entries(self) -> list[tuple[rankings.RankedEntry, Run]]:
        return [(e, e.candidate.payload) for e in self.ranking]

    def baseline(self) -> rankings.Baseline | None:
        """The reference row (rankings.baseline decides which number it shows)."""
        filed = (self.reference.score_us, self.reference.ci95_us) if self.reference else None
        return rankings.baseline(
            filed, ((r.created_at, r.reference_score_us) for _, r in self.entries)
        )


@dataclass
class SiteData:
    root: Path
    catalog: Catalog
    now: dt.datetime
    boards: dict[tuple[str, str], Board]
    runs_by_author: dict[str, list[Run]]
    total_runs: int
    skipped: list[str]
    code_paths: dict[str, Path]

    def boards_of(self, task: TaskSpec) -> list[Board]:
        """The task's listed devices, then devices only local runs were made on (a preview).
        Listed devices whose ranking this harness's own timing method made come first, else
        in task.yml's order: a board opens on today's ranking, not on one whose runs want
        re-measuring."""
        listed = sorted(
            (self.boards[(task.name, device)] for device in task.gpus),
            key=lambda board: board.wants_remeasuring,
        )
        local_only = [
            board
            for (name, device), board in sorted(self.boards.items())
            if name == task.name and device not in task.gpus
        ]
        return listed + local_only


def case_label(case: dict[str, Any]) -> str:
    spec = case.get("spec") or {}
    parts = [f"{k}={v}" for k, v in spec.items() if k != "seed"]
    return ", ".join(parts) or case.get("id") or f"#{case.get('index')}"


def _dataset_line(
    run: dict[str, Any], evaluation: dict[str, Any], code: str | None, rel: str
) -> str:
    summary = evaluation.get("summary") or {}
    cases = []
    for case in evaluation.get("cases") or []:
        timing = case.get("timing") or None
        cases.append(
            {
                "kind": case.get("kind"),
                "id": case.get("id"),
                "spec": case.get("spec"),
                "status": case.get("status"),
                "timing": None
                if timing is None
                else {
                    k: timing.get(k)
                    for k in ("n", "mean_us", "median_us", "std_us", "min_us", "max_us", "ci95_us")
                },
                "reference_mean_us": (case.get("reference_timing") or {}).get("mean_us"),
                "speedup": case.get("speedup"),
                "speed_of_light": speed_of_light(timing),
            }
        )
    line = {
        "leaderboard": evaluation["leaderboard"]["name"],
        "device": run["environment"]["device"],
        "author": evaluation["submission"]["author"],
        "created_at": run["created_at"],
        "mode": run["mode"],
        "status": summary.get("status"),
        "score_us": summary.get("score_us"),
        "speedup": summary.get("speedup"),
        "lang": evaluation["leaderboard"].get("lang"),
        "sha256": evaluation["submission"]["sha256"],
        "code": code,
        "cases": cases,
        "record": rel,
    }
    return _dumps(line)


class _CodeReader:
    """Submitted code by sha256, read once, only for leaderboards whose code is public."""

    def __init__(self, index: dict[str, Path]):
        self.index = index
        self.cache: dict[str, str | None] = {}

    def __call__(self, sha256: str) -> str | None:
        if sha256 not in self.cache:
            path = self.index.get(sha256)
            self.cache[sha256] = path.read_text(errors="replace") if path else None
        return self.cache[sha256]


def reduce_run(
    doc: dict[str, Any], evaluation: dict[str, Any], index: int, path: str, task: TaskSpec
) -> Run:
    """One evaluation of a document, reduced to what the pages need (no provenance yet)."""
    summary = evaluation["summary"]
    submission = evaluation["submission"]
    ci = summary.get("score_ci95_us")
    # from the cases (no case with a speedup: none), so a record stored before fast_p was
    # noise-aware shows the same shares as one stored after
    shares = case_fast_p(evaluation.get("cases") or []) or (None, None)
    return Run(
        path=path,
        run_id=doc["run_id"],
        index=index,
        leaderboard=evaluation["leaderboard"]["name"],
        device=doc["environment"]["device"],
        author=submission["author"],
        created_at=doc["created_at"],
        mode=doc.get("mode", ""),
        status=summary.get("status", ""),
        is_reference=bool(submission.get("is_reference")),
        ranked=rankings.is_ranked(doc, evaluation, task),
        score_us=summary.get("score_us"),
        ci95_us=(ci[0], ci[1]) if ci and len(ci) == 2 else None,
        reference_score_us=summary.get("reference_score_us"),
        speedup=summary.get("speedup"),
        fast_p=shares[0],
        fast_p_raw=shares[1],
        tied=summary.get("tied_with_reference"),
        timing_method=rankings.timing_method(doc),
        sha256=submission["sha256"],
        submission_path=submission.get("path", ""),
        tests=(summary.get("tests_passed", 0), summary.get("tests_total", 0)),
        benchmarks=(summary.get("benchmarks_passed", 0), summary.get("benchmarks_total", 0)),
        case_speedups={
            case.get("index", 0): case.get("speedup")
            for case in evaluation.get("cases") or ()
            if case.get("kind") == "benchmark"
        },
        pull_request=None,
        pr_url=None,
        baseline=rankings.is_baseline(doc, evaluation, task),
    )


@dataclass
class _Chunk:
    """What one reader produced: runs in file order, case labels, problems."""

    runs: list[tuple[Run, int]]  # (run, evaluation offset in its document)
    cases: dict[tuple[str, str], dict[int, str]]
    skipped: list[str]


def _read_chunk(
    root: Path,
    paths: list[Path],
    catalog: Catalog,
    visible: dict[str, bool],
    code_paths: dict[str, Path],
    dataset: IO[str] | None,
) -> _Chunk:
    read_code = _CodeReader(code_paths)
    chunk = _Chunk([], defaultdict(dict), [])
    prefix = len(str(root)) + 1
    for path in paths:
        rel = str(path)[prefix:].replace("\\", "/")
        try:
            doc = _loads(path.read_bytes())
            device = doc["environment"]["device"]
            evaluations = doc["evaluations"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            chunk.skipped.append(f"{rel}: {exc}")
            continue
        provenance = doc.get("provenance") or {}
        pr = provenance.get("pull_request")
        pr_url = provenance.get("url")
        if pr_url is None and pr is not None and provenance.get("repository"):
            pr_url = f"https://github.com/{provenance['repository']}/pull/{pr}"
        base_index = doc.get("evaluation_index", 0)
        for offset, evaluation in enumerate(evaluations):
            try:
                name = evaluation["leaderboard"]["name"]
                submission = evaluation["submission"]
                if not isinstance(evaluation["summary"], dict):
                    raise TypeError("summary is not an object")
            except (KeyError, TypeError) as exc:
                chunk.skipped.append(f"{rel}: {exc}")
                continue
            task = catalog.tasks.get(name)
            if dataset is not None:
                code = read_code(submission["sha256"]) if visible.get(name) else None
                dataset.write(_dataset_line(doc, evaluation, code, rel) + "\n")
            if task is None or device not in task.gpus:
                chunk.skipped.append(
                    f"{rel}: leaderboard {name!r} on {device!r} is not in the catalog"
                )
                continue
            run = reduce_run(doc, evaluation, base_index + offset, rel, task)
            run.pull_request, run.pr_url = pr, pr_url
            labels = chunk.cases[(name, device)]
            for case in evaluation.get("cases") or ():
                if case.get("kind") == "benchmark" and case.get("index", 0) not in labels:
                    labels[case.get("index", 0)] = case_label(case)
            if run.ranked:
                run.candidate = rankings.Candidate.of(doc, offset, payload=run)
            chunk.runs.append((run, offset))
    chunk.cases = dict(chunk.cases)
    return chunk


_JOB: dict[str, Any] = {}
MIN_RECORDS_PER_WORKER = 500  # below this, a process costs more than it saves


def _read_chunk_job(index: int) -> _Chunk:
    job = _JOB
    part = job["parts"][index]
    dataset = open(part, "w") if part else None  # noqa: SIM115 - closed below
    try:
        return _read_chunk(
            job["root"],
            job["chunks"][index],
            job["catalog"],
            job["visible"],
            job["code_paths"],
            dataset,
        )
    finally:
        if dataset:
            dataset.close()


def load_site_data(
    root: Path,
    now: dt.datetime | None = None,
    dataset: Path | None = None,
    workers: int = 1,
) -> SiteData:
    """Load the catalog and every record (in `workers` processes where fork is available);
    write the dataset export (JSON Lines) to `dataset` if given."""
    root = Path(root).resolve()
    now = now or dt.datetime.now(dt.UTC)
    catalog = load_catalog(root)
    boards: dict[tuple[str, str], Board] = {}
    for task in catalog.tasks.values():
        for device in task.gpus:
            boards[(task.name, device)] = Board(task, device)
    visible = {name: code_visible(task, now) for name, task in catalog.tasks.items()}
    code_paths = code_index(root)
    paths = list(iter_records(root))
    workers = max(1, min(workers, len(paths) // MIN_RECORDS_PER_WORKER or 1))
    size = -(-len(paths) // workers) if paths else 0
    chunks = [paths[i * size : (i + 1) * size] for i in range(workers)]
    parts = [
        (dataset.with_name(f"{dataset.name}.part{i}") if workers > 1 else dataset)
        if dataset
        else None
        for i in range(workers)
    ]
    _JOB.update(
        root=root,
        chunks=chunks,
        parts=parts,
        catalog=catalog,
        visible=visible,
        code_paths=code_paths,
    )
    try:
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                results = pool.map(_read_chunk_job, range(workers))
        else:
            results = [_read_chunk_job(0)]
    finally:
        _JOB.clear()
    if dataset and workers > 1:
        with open(dataset, "wb") as joined:
            for part in parts:
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, joined)
                part.unlink()

    by_author: dict[str, list[Run]] = defaultdict(list)
    skipped: list[str] = []
    total = 0
    for chunk in results:
        skipped.extend(chunk.skipped)
        for key, labels in chunk.cases.items():
            for idx, label in labels.items():
                boards[key].cases.setdefault(idx, label)
        for run, _offset in chunk.runs:
            board = boards[(run.leaderboard, run.device)]
            total += 1
            board.runs.append(run)
            if run.candidate is not None:
                board.candidates.append(run.candidate)
            elif run.baseline:
                board.baselines.append(run)
            if not run.is_reference:
                by_author[run.author].append(run)
    for board in boards.values():
        board.rank()
    for name in skipped[:20]:
        print(f"warning: skipped {name}", file=sys.stderr)
    return SiteData(root, catalog, now, boards, dict(by_author), total, skipped, code_paths)


def read_record(root: Path, run: Run) -> dict[str, Any]:
    """The full document of a record (or of a local run: its path is absolute), with
    `evaluation` set to this run's evaluation."""
    doc = _loads((Path(root) / run.path).read_bytes())
    base = doc.get("evaluation_index", 0)
    doc["evaluation"] = doc["evaluations"][run.index - base]
    return doc
