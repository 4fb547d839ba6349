"""What a participant reads about a case: which limit applied and how to change it, which case
an import failure or a timeout was first reported on. The judge says what happened; this adds
what only the evaluation knows (the session's limits, the cases judged before)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.core import CaseOutcome
from ..spec.cases import Case
from .limits import task_timeout

if TYPE_CHECKING:
    from .submission import SubmissionEvaluation


def case_label(evaluation: SubmissionEvaluation, case: Case) -> str:
    """The case as a test id a participant can paste back into pytest."""
    return f"{evaluation.ref.display}::{evaluation.task.name}::{case.kind}[{case.id}]"


def explain(evaluation: SubmissionEvaluation, case: Case, outcome: CaseOutcome) -> CaseOutcome:
    """The outcome with the message a participant acts on."""
    session, task = evaluation.session, evaluation.task
    first = evaluation.first_failure
    if outcome.status == "timeout" and outcome.timed_out_after_s is not None:
        limit = session.limits.describe(task, case.kind, session.mode)
        key, task_s = task_timeout(task, case.kind, session.mode)
        if session.limits.override_s:
            how = f"without it, {key} in {task.path.name} allows {task_s:g} s"
        else:
            how = "change it with --kb-timeout SECONDS"
        outcome.message = (
            f"timed out after {outcome.timed_out_after_s:g} s (the limit that applied: {limit}; "
            f"{how})" + _rest(outcome.message)
        )
    elif outcome.status == "not_run" and outcome.after_failure and first is not None:
        label = case_label(evaluation, first[0])
        outcome.message = f"not run: an earlier case, {label}, {outcome.after_failure}"
    elif outcome.during_import and first is not None and first[1].during_import:
        outcome.message = (
            f"the submission failed to import; the message is shown once, on "
            f"{case_label(evaluation, first[0])}"
        )
    return outcome


def _rest(message: str) -> str:
    """What the worker's failure said after its first line (its output's last lines)."""
    _, _, rest = message.partition("\n")
    return f"\n{rest}" if rest else ""
