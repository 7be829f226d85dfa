"""What a study's report opens with (issue 48, item 3): the declared question, the rule
applied to the primary endpoint in one sentence (:mod:`evaluator.study.rule`), what the
judge added to that figure, the secondary endpoints as supporting figures that decide
nothing, and what the decision rests on (the plan's hash and the date it was frozen,
blindness to the judge and to the system, the labellers and their overlap).

Built from the same rows as the page's tables (:class:`~evaluator.analysis.estimate.records.
DifferenceRow`), numbers written as the tables write them (three decimals,
:func:`~evaluator.analysis.intervals.format_number`), so every number of a sentence can be
checked against its table. Nothing here reads case text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evaluator.analysis.estimate.records import DifferenceRow
from evaluator.analysis.gates import Gate
from evaluator.analysis.intervals import format_number
from evaluator.common.record import Record
from evaluator.rubrics.rubric import Rubric
from evaluator.study.plan import Endpoint, StudyPlan
from evaluator.study.rule import Rule, decide

DIGITS = 3  # the report's tables' decimals (evaluator.report.decision.DIGITS)
SECONDARY_HEADING = ("Secondary endpoints: supporting figures, declared in the plan; they "
                     "decide nothing (no adjustment for multiplicity is made, so no direction "
                     "is read from them)")
BLIND = ("Blind to the judge (the study's sheets show no verdict) and to the system (one "
         "queue per clinician: each system's answer to a case is its own item, in an order "
         "shuffled per clinician, and no page, address or form names a system)")


def fmt(value: float) -> str:
    return format_number(value, DIGITS)


@dataclass(frozen=True)
class Drawn:
    """What the study's draw recorded: the plan's SHA-256 and text then, when, and the
    plan's SHA-256 now (None: the file is gone or unreadable)."""

    plan_path: str
    plan_sha256: str
    drawn: str
    current_sha256: str | None
    overlap_cases: int = 0


class StudySummary(Record):
    """The study's block, first on the report's page."""

    title: str
    question: str
    verdict: str
    sentence: str
    judge_line: str | None
    secondary_heading: str = SECONDARY_HEADING
    secondary: list[str]
    rests_on: list[str]
    plan_changed: str | None


def outcome_name(endpoint: Endpoint, rubric: Rubric) -> str:
    """The ``criterion`` of the estimate rows that carry ``endpoint``: its criterion (an
    alias resolved) for a mean, the gate's rule for a pass rate."""
    key = rubric.aliases.get(endpoint.criterion, endpoint.criterion)
    gate = endpoint.parsed_gate
    if gate is None:
        return key
    return Gate(key, gate.op, gate.threshold).rule


def _row(rows: Sequence[DifferenceRow], outcome: str, a_file: str, b_file: str,
         ) -> DifferenceRow | None:
    return next((d for d in rows if d.criterion == outcome and d.a_file == a_file
                 and d.b_file == b_file), None)


def _signed(value: float) -> str:
    text = fmt(value)
    return text if text.startswith("-") else f"+{text}"


def _secondary(endpoint: Endpoint, row: DifferenceRow | None, a: str, b: str) -> str:
    what = endpoint.describe()
    if row is None or row.estimate is None:
        return f"{what}: no figure could be made"
    ci = (f"95% CI {fmt(row.ci[0])} to {fmt(row.ci[1])}" if row.ci else "no interval")
    how = (f"paired, {row.n_labelled} labelled cases" if row.mode == "paired" else row.mode)
    line = f"{what}: {b} - {a} = {_signed(row.estimate)} ({ci}; {how})"
    return f"{line}; {row.too_few}" if row.too_few else line


def _judge_line(row: DifferenceRow) -> str | None:
    if row.lam is None or row.estimate is None:
        return None
    if row.lam == 0:
        return ("The judge added nothing to this figure (PPI++ weight 0): it is the labels "
                "alone, the mean of the clinicians' per-case differences.")
    return (f"The judge's scores on all {row.n_cases} cases are combined with the clinicians' "
            f"labels on {row.n_labelled} (PPI++, weight {row.lam:.2f} on the judge).")


def study_summary(plan: StudyPlan, rubric: Rubric, differences: Sequence[DifferenceRow],
                  a_file: str, b_file: str, drawn: Drawn, agreement: Sequence[str] = (),
                  ) -> StudySummary:
    """The block for ``plan`` from the report's difference rows (b - a: ``b_file`` the
    candidate's results, ``a_file`` the reference's); ``agreement``: the primary
    criterion's line of the judge's and the clinicians' agreement (the ceiling)."""
    a, b = plan.reference.name, plan.candidate.name
    primary = plan.primary
    rule = Rule(plan.comparison.type, primary.better, plan.comparison.margin,
                primary.describe(), a, b)
    row = _row(differences, outcome_name(primary, rubric), a_file, b_file)
    if row is None:
        verdict, judge = "no estimate", None
        sentence = ("No clinician-level figure could be made for the primary endpoint (why: "
                    "in the estimates below); nothing is decided.")
    else:
        decision = decide(rule, row.estimate, row.ci, row.n_labelled or 0, row.n_cases or 0,
                          fmt, why_no_ci=row.method or None)
        verdict, sentence = decision.verdict, decision.sentence
        # What the judge added to a figure the sentence reads; none where it reads none.
        judge = _judge_line(row) if verdict in ("shown", "not shown") else None
    secondary = [_secondary(e, _row(differences, outcome_name(e, rubric), a_file, b_file),
                            a, b) for e in plan.secondary]
    labels = plan.labels
    changed = None
    if drawn.current_sha256 != drawn.plan_sha256:
        now = ("is gone or cannot be read" if drawn.current_sha256 is None else
               f"now has sha256 {drawn.current_sha256[:12]}")
        changed = (f"Plan changed after labelling began: {drawn.plan_path} {now}, not the "
                   f"sha256 {drawn.plan_sha256[:12]} it had when the labels were drawn "
                   f"({drawn.drawn}); the decision applies the plan as declared then.")
    overlap = (f"; overlap {labels.overlap:g} ({drawn.overlap_cases} case(s) given to every "
               "labeller, for their agreement with each other)" if labels.overlap else "")
    rests_on = [
        (f"Plan: {drawn.plan_path}, sha256 {drawn.plan_sha256}, frozen when the labels "
         f"were drawn ({drawn.drawn})."),
        (f"Design: a {labels.design} sheet of {labels.n} cases judged ok for both systems "
         f"(seed {labels.seed}), each case labelled for both systems (paired)."),
        f"{BLIND}.",
        f"Labellers: {', '.join(labels.labellers)}{overlap}.",
        *(f"Agreement, {line}" for line in agreement),
    ]
    return StudySummary(title=plan.title, question=plan.hypothesis(), verdict=verdict,
                        sentence=sentence, judge_line=judge, secondary=secondary,
                        rests_on=rests_on, plan_changed=changed)
