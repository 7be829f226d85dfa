"""The report's "Decision" section: the answer a committee asked for, first, in figures and
plain sentences.

:func:`build_decision` reads what :func:`evaluator.report.build.build_report` already
gathered (the clinician-level estimates and differences, the agreement with the labels) and
returns a :class:`Decision`: per outcome (a criterion's mean, or a gate's pass rate) and
system the judge-only, labels-only and PPI++ figures with their 95% CIs on the rubric's
scale; per pair of systems the difference; one sentence per figure that a non-statistician
can repeat; the judge's agreement with clinicians beside the clinicians' with each other;
and what the figures rest on (design, labels, blind or not). Without labels it holds only
what the judge-only figures can and cannot tell, and how to get clinician-level ones.

The sentences never call a difference whose 95% CI holds 0 higher or lower: they say no
difference was detected and give the interval in words. A figure without an interval claims
nothing; why it has none is said once for the section (:class:`Reasons`), as is each
warning, naming the systems it is about. Numbers are written as the report's tables write
them (:func:`number`: the tables' ``num(3)``, ``format_number`` with 3 decimals; a CI's
ends the same way), so a sentence can be checked against its table row. Nothing here reads
or holds case text or case ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from evaluator.analysis.agreement.agreement import MIN_OVERLAP
from evaluator.analysis.agreement.records import AgreementReport, Ceiling, KappaFigures
from evaluator.analysis.estimate.ppi import WITHHELD_MARK
from evaluator.analysis.estimate.records import DifferenceRow, EstimateRow, SystemRow
from evaluator.analysis.estimate.text import no_ci_reason
from evaluator.analysis.intervals import NO_INTERVAL, format_number
from evaluator.analysis.minimum import PAIRED_LINE_PLAIN
from evaluator.common.record import Record
from evaluator.report.figures import ReportAgreement, ReportEstimates
from evaluator.rubrics.rubric import IntegerCriterion, Rubric

DIGITS = 3
KAPPA = "κw"  # quadratic-weighted kappa, as the agreement tables name it in words
Finding = Literal["higher", "lower", "no difference detected", "no interval", "no estimate",
                  "too few labels"]

# Without labels: what the judge-only figures can and cannot tell, and the commands that
# give clinician-level ones (docs/statistics.md, docs/labelling.md).
WITHOUT_LABELS = (
    "No clinician labels were given: every figure on this page is the judge's own.",
    ("The judge's figures tell how the judge scored these cases, and how the systems compare "
     "in the judge's eyes. They cannot tell what clinicians would say: the judge's bias is "
     "unknown, so its mean is not a clinician-level figure, and a difference between systems "
     "in its scores may be the judge's own, not the systems'."),
)
# Labels given, but no estimate could be made from them (e.g. a priority sheet: cases chosen
# for being hard): the page still has agreement figures, over the labelled cases only.
NO_ESTIMATE = (
    ("Clinician labels were given, but no clinician-level figure could be made from them "
     "(why: above). Every mean and difference on this page is the judge's own; the "
     "agreement with the labels describes the labelled cases only, not the whole run."),
    ("The judge's figures tell how the judge scored these cases, and how the systems compare "
     "in the judge's eyes. They cannot tell what clinicians would say over every case: the "
     "judge's bias there is unknown, so its mean is not a clinician-level figure, and a "
     "difference between systems in its scores may be the judge's own, not the systems'."),
)
HOW_TO_LABEL = (
    (("draw a random sheet of cases per results file (the same --n and --seed for every "
      "system, so their difference is paired)"),
     "evaluator review RESULTS --out SHEET_DIR --design random --n 60 --seed 1"),
    ("have clinicians label it", "evaluator label SHEET_DIR --labeller NAME"),
    ("make the report with the labels (one --labels per results file, in order)",
     "evaluator report RESULTS... --html report.html --labels SHEET_DIR"),
)


class Figure(Record):
    """One estimate with its 95% CI (None: none could be made; ``why`` says why) and the
    ``method`` that made it."""

    value: float | None
    ci95: list[float] | None
    why: str | None = None
    method: str | None = None


class SystemFigures(Record):
    """One system's figures for one outcome: the judge alone over every case, the labels
    alone, PPI++ (the clinician-level estimate), and the judge's bias (judge - label on the
    labelled cases); the page's number ``#n`` and the short ``name`` the sentences use."""

    number: int
    name: str
    judge: Figure
    labels_only: Figure
    ppi: Figure
    judge_bias: Figure
    n_labelled: int
    n_cases: int
    sentence: str


class Outcome(Record):
    """A criterion's mean or a gate's pass rate (``kind``), drawn on ``scale`` (the rubric's
    lowest and highest allowed value; 0 and 1 for a pass rate; widened to hold every
    estimate when labels are on another scale, never for an interval's end: the plot clips
    an interval at the scale and marks the clip); ``scale_text`` says what the axis is."""

    criterion: str
    kind: Literal["mean", "pass rate"]
    scale: tuple[float, float]
    scale_text: str
    systems: list[SystemFigures]


class Difference(Record):
    """b - a for one outcome: the PPI++ estimate and CI, how it was obtained (``mode``
    paired or independent, the labelled and total cases), the ``finding`` the sentence
    states and the sentence; ``scale`` is the outcome's (the plot's axis is sized by its
    span, so a difference without an interval still gets an axis that means something)."""

    criterion: str
    kind: Literal["mean", "pass rate"]
    scale: tuple[float, float] = (0.0, 1.0)
    a_number: int
    b_number: int
    a: str
    b: str
    difference: Figure
    mode: str
    n_labelled: int | None
    n_cases: int | None
    how: str
    finding: Finding
    sentence: str


class Validity(Record):
    """One criterion: the judge's quadratic-weighted kappa with clinicians per file, and
    the clinicians' with each other where several labelled the same cases, in one line."""

    criterion: str
    line: str


class Decision(Record):
    """The Decision section: ``labelled`` False holds only ``without_labels`` (and
    ``notes`` when labels were given but no estimate could be made). ``reasons``: why
    figures have no interval or no estimate, each reason once (its mark, e.g. "¹", ends
    the sentences it applies to) with the figures and systems it applies to.
    ``paired_line``: under the sentences when a difference is paired, why it need not
    equal the gap between the two systems' values."""

    labelled: bool
    outcomes: list[Outcome] = Field(default_factory=list)
    differences: list[Difference] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    validity: list[Validity] = Field(default_factory=list)
    rests_on: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    paired_line: str | None = None
    without_labels: list[str] = Field(default_factory=list)
    how_to_label: list[tuple[str, str]] = Field(default_factory=list)


def number(value: Any, digits: int = DIGITS) -> str:
    """A figure as the report's tables print it (their ``num`` filter)."""
    if value is None or isinstance(value, bool):
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_number(value, digits)
    return str(value)


def _zero(value: float) -> bool:
    """Prints as 0 (a figure that rounds to 0.000 is no direction)."""
    return float(number(abs(value))) == 0


def _figure(value: Any, ci: Any, method: str | None) -> Figure:
    ci = list(ci) if ci else None
    return Figure(value=value, ci95=ci, why=no_ci_reason(value, ci, method)
                  or (None if value is not None else method or "no estimate"), method=method)


def _reason(figure: Figure) -> str:
    """Why ``figure`` has no interval, for "no interval could be made¹": its reason
    without the words "no interval" again."""
    return (figure.why or "no reason recorded").removeprefix(f"{NO_INTERVAL}: ")


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class Reasons:
    """Why figures have no interval (or no estimate), each reason said once for the whole
    section: the page can have the same reason for a difference, each system's
    clinician-level figure and each judge's bias. A sentence ends its clause with the
    reason's mark (¹, ², ... in the order first used), and :meth:`lines` says each reason
    once, naming the figures and systems it applies to."""

    def __init__(self) -> None:
        self._uses: dict[str, dict[str, list[str]]] = {}

    def mark(self, reason: str, figure: str, system: str) -> str:
        """The mark of ``reason`` (given for ``figure`` of ``system``)."""
        systems = self._uses.setdefault(reason, {}).setdefault(figure, [])
        if system not in systems:
            systems.append(system)
        return self._mark(list(self._uses).index(reason))

    @staticmethod
    def _mark(index: int) -> str:
        return str(index + 1).translate(_SUPERSCRIPT)

    def lines(self) -> list[str]:
        """One line per reason: its mark, the reason, and what it applies to."""
        return [f"{self._mark(index)} {reason}: "
                + "; ".join(f"{figure} ({', '.join(systems)})"
                            for figure, systems in uses.items()) + "."
                for index, (reason, uses) in enumerate(self._uses.items())]


def _scale(rubric: Rubric, criterion: str, kind: str,
           figures: Sequence[Figure]) -> tuple[tuple[float, float], str]:
    """The axis: a pass rate 0..1; a criterion its allowed values' range; anything else (an
    aggregate) the figures' own range. Widened to hold every estimate (labels on another
    scale), not an interval's end: a mean's normal-approximation CI can run past the
    scale's end, and the plot clips it there and marks the clip."""
    ends = [f.value for f in figures if f.value is not None]
    if kind == "pass rate":
        low, high, text = 0.0, 1.0, "pass rate, 0 to 1"
    else:
        field = next((f for f in rubric.output if isinstance(f, IntegerCriterion)
                      and f.key == criterion), None)
        if field is not None:
            low, high = float(min(field.allowed)), float(max(field.allowed))
            text = f"{criterion}'s scale, {min(field.allowed)} to {max(field.allowed)}"
        else:
            low, high = (min(ends), max(ends)) if ends else (0.0, 1.0)
            text = "the figures' range (an aggregate has no fixed scale)"
    if ends and (min(ends) < low or max(ends) > high):
        low, high = min(low, *ends), max(high, *ends)
        text += "; widened to hold every estimate"
    if high <= low:
        high = low + 1.0
    return (low, high), text


def _what(criterion: str, kind: str) -> str:
    return f"mean {criterion}" if kind == "mean" else f"the pass rate ({criterion})"


def _end(value: float, subject: str, up: str, down: str) -> str:
    """One end of an interval in words: "B (#2) 0.050 lower", "no difference"."""
    if _zero(value):
        return "no difference"
    return f"{subject}{number(abs(value))} {up if value > 0 else down}"


def _span(ci: Sequence[float], subject: str, up: str, down: str) -> str:
    """An interval holding 0, in words, the subject (if any) named once: "B (#2) 0.050
    lower to 0.120 higher"."""
    subject = f"{subject} " if subject else ""
    first = _end(ci[0], subject, up, down)
    second = _end(ci[1], "" if first != "no difference" else subject, up, down)
    return f"{first} to {second}"


def _tiny(ci: Sequence[float]) -> bool:
    """Both ends print as 0.000: "from no difference to no difference" would say nothing."""
    return _zero(ci[0]) and _zero(ci[1])


TINY = f"less than {number(10.0 ** -DIGITS)}"


def _one_side(ci: Sequence[float]) -> str:
    """An interval on one side of 0 as magnitudes, nearer end first: "0.220 to 0.330"."""
    low, high = sorted(abs(v) for v in ci)
    return f"{number(low)} to {number(high)}"


def _spans_zero(ci: Sequence[float]) -> bool:
    return ci[0] <= 0 <= ci[1] or _zero(ci[0]) or _zero(ci[1])


def _labels_alone(row: EstimateRow) -> str | None:
    """When the judge added nothing to the clinician-level figure (PPI++'s weight on it,
    lambda, is 0: a constant judge, or one whose scores go against the labels), the words
    saying the figure is the labels' own (issue 48); else None. Only 0 exactly: lambda is
    a slope, so a small one on labels of small units can still carry much of the judge."""
    if row.lam != 0 or row.ppi_estimate is None:
        return None
    return "the labels alone: the judge's scores added nothing (weight lambda 0)"


def _not_given(figure: Figure) -> str:
    """"is given" where ``figure``'s interval was withheld under a minimum of labels
    (:func:`evaluator.analysis.estimate.ppi.withheld`'s mark in its reason), "could be
    made" where none could be."""
    return "is given" if WITHHELD_MARK in (figure.why or "") else "could be made"


def _system_sentence(name: str, criterion: str, kind: str, ppi: Figure, judge: Figure,
                     bias: Figure, n_labelled: int, n_cases: int, other_scale: bool,
                     reasons: Reasons, too_few: str | None = None,
                     labels_alone: str | None = None) -> str:
    what = _what(criterion, kind)
    basis = f"{n_labelled} of {n_cases} cases labelled"
    if labels_alone:
        basis += f"; {labels_alone}"
    if ppi.value is None:
        mark = reasons.mark(ppi.why or "no estimate", f"{what} by clinicians' standard", name)
        head = (f"{name}: no clinician-level estimate of {what} could be made{mark}; "
                "nothing is claimed.")
    elif ppi.ci95 is None:
        mark = reasons.mark(_reason(ppi), f"{what} by clinicians' standard", name)
        head = (f"{name}: by clinicians' standard, {what} is {number(ppi.value)}, but no "
                f"interval {_not_given(ppi)}{mark} ({basis}), so nothing is claimed.")
    else:
        head = (f"{name}: by clinicians' standard, {what} is {number(ppi.value)} (95% CI "
                f"{number(ppi.ci95[0])} to {number(ppi.ci95[1])}; {basis}).")
    if judge.value is None:
        return head
    alone = f"The judge alone says {number(judge.value)}"
    if other_scale:
        return (f"{head} {alone}, on another scale than the labels: the two are not "
                "comparable.")
    bias_of = f"the judge's bias in {what}"
    if bias.value is None:
        mark = reasons.mark(bias.why or "no estimate", bias_of, name)
        return f"{head} {alone}; how far it is off could not be measured{mark}."
    # The bias is measured on the labelled cases (judge - label there; on an active sheet
    # weighted by each case's draw probability), not the gap between the judge's mean over
    # every case and the PPI++ value: said so, so that the figures are not read as a
    # subtraction of the two means. It is a mean: a judge that is far off case by case in
    # both directions can have none (its kappa, below, tells that).
    where = f"on the {n_labelled} labelled cases"
    if "inverse-probability" in (bias.method or ""):
        where += " (weighted by how likely each was drawn)"
    if too_few:
        # Under the minimum the bias is a figure, not a direction: no "higher", "lower" or
        # "no bias detected" (evaluator.analysis.minimum).
        interval = (f"95% CI {number(bias.ci95[0])} to {number(bias.ci95[1])}" if bias.ci95
                    else f"no interval{reasons.mark(_reason(bias), bias_of, name)}")
        return (f"{head} {alone}; its bias (judge − label) {where} is "
                f"{number(bias.value)} ({interval}): {too_few}.")
    if bias.ci95 is None:
        size = ("the same as the clinicians" if _zero(bias.value) else
                f"{number(abs(bias.value))} {'higher' if bias.value > 0 else 'lower'} than "
                "the clinicians")
        # A mean with no interval was still measured (e.g. every judge - label difference
        # the same): say what it was there, and claim nothing beyond those cases.
        mark = reasons.mark(_reason(bias), bias_of, name)
        return (f"{head} {alone}; {where} it scored {size} on average, but no interval "
                f"{_not_given(bias)}{mark}: nothing is claimed beyond those cases.")
    if _spans_zero(bias.ci95):
        span = (f"within {TINY} of the clinicians'" if _tiny(bias.ci95) else
                f"consistent with anything from {_span(bias.ci95, '', 'higher', 'lower')} "
                "than the clinicians'")
        return f"{head} {alone}; {where} no bias was detected: its mean score is {span} (95% CI)."
    way = "higher" if bias.value > 0 else "lower"
    return (f"{head} {alone}; {where} it scored {number(abs(bias.value))} {way} than the "
            f"clinicians on average (95% CI {_one_side(bias.ci95)} {way}).")


def _difference_sentence(what: str, a: str, b: str, figure: Figure, how: str,
                         reasons: Reasons, too_few: str | None = None,
                         label_more: str | None = None) -> tuple[Finding, str]:
    of, pair = f"the difference in {what}", f"{b} − {a}"
    if figure.value is None:
        mark = reasons.mark(figure.why or "no estimate", of, pair)
        return "no estimate", (f"No difference in {what} between {b} and {a} could be "
                               f"estimated{mark}; nothing is claimed.")
    if figure.ci95 is None:
        mark = reasons.mark(_reason(figure), of, pair)
        return "no interval", (f"No interval could be made for the difference in {what} "
                               f"between {b} and {a}{mark} ({how}); nothing is claimed.")
    if too_few:
        return "too few labels", (
            f"The difference in {what}, {b} − {a}, is {number(figure.value)} (95% CI "
            f"{number(figure.ci95[0])} to {number(figure.ci95[1])}; {how}): {too_few}.")
    more = f" {label_more[:1].upper()}{label_more[1:]}." if label_more else ""
    if _spans_zero(figure.ci95):
        return "no difference detected", (
            f"No difference detected in {what} between {b} and {a}: by clinicians' standard, "
            f"the labels are consistent with "
            + (f"a difference of {TINY} either way" if _tiny(figure.ci95) else
               f"anything from {_span(figure.ci95, b, 'higher', 'lower')}")
            + f" (95% CI; {how}).{more}")
    finding: Finding = "higher" if figure.value > 0 else "lower"
    return finding, (f"By clinicians' standard, {what} is {number(abs(figure.value))} "
                     f"{finding} for {b} than for {a} (95% CI {_one_side(figure.ci95)} "
                     f"{finding}; {how}).")


def _kind(row: EstimateRow) -> Literal["mean", "pass rate"]:
    return "pass rate" if row.outcome == "pass rate" else "mean"


def _grouped(items: Sequence[tuple[int, str]], numbers: Numbers) -> str:
    """Per system ``(number, text)`` as one line, each system called as the page calls it
    (:meth:`Numbers.tag`): the text once when every system's is the same ("#1, #2: ..."),
    else "#1: ...; #2: ..."."""
    if not items:
        return ""
    texts = list(dict.fromkeys(text for _, text in items))
    if len(texts) == 1:
        tags = ", ".join(numbers.tag(n) for n, _ in items)
        return texts[0] if len(items) == 1 else f"{tags}: {texts[0]}"
    return "; ".join(f"{numbers.tag(n)}: {text}" for n, text in items)


def _kappa_text(stats: Mapping[str, Any] | None) -> str:
    """The judge's kappa against the labels on one criterion of one file, in words."""
    if not stats:
        return "no joined cases"
    figures = KappaFigures.of(stats)
    if not figures.computed:
        return figures.note or "no statistics"
    kappa = figures.kappa
    if kappa.not_applicable:
        why = kappa.not_applicable
        # The reason may already begin "not applicable to ...": said once.
        text = why if why.startswith("not applicable") else f"not applicable ({why})"
        if figures.icc.value is None:
            return f"{text} (n = {figures.n})"
        # Expected scores are not categories: the agreement figure that applies to them,
        # the ICC (two-way, absolute agreement, single rater), in kappa's place.
        return (f"{text}; ICC(A,1) {number(figures.icc.value)} "
                f"({_ci_words(figures.icc.ci95)}, n = {figures.n})")
    if kappa.value is None:
        return (f"not computed ({kappa.note if kappa.note is not None else 'no value'}; "
                f"n = {figures.n})")
    text = f"{number(kappa.value)} ({_ci_words(kappa.ci95)}, n = {figures.n})"
    if kappa.meaningless:
        text += f", meaningless here ({kappa.meaningless})"
    return text


def _ci_words(ci: Sequence[float] | None) -> str:
    return f"95% CI {number(ci[0])} to {number(ci[1])}" if ci else "no interval"


def _ceiling_text(ceiling: Ceiling) -> str | None:
    """The clinicians' kappa with each other on the overlap cases (None: not computed)."""
    if ceiling.kappa is None:
        return None
    figure = ceiling.kappa.clinicians
    return f"{number(figure.value)} ({_ci_words(figure.ci95)}, {ceiling.n} cases)"


NO_OVERLAP = "no case labelled by two clinicians: their own agreement is unknown"


def _no_ceiling_text(result: AgreementReport, criterion: str) -> str | None:
    """Why the clinicians' agreement with each other has no figure although some cases
    were labelled by two or more of them (None: no such case). Below ``MIN_OVERLAP``
    overlap cases agree() makes no ceiling (a bootstrap over a handful says little)."""
    n = result.sheet.overlap.get(criterion, 0) if result.sheet is not None else 0
    if not n:
        return None
    if n < MIN_OVERLAP:
        return f"too few overlap cases ({n}) for a ceiling (it needs {MIN_OVERLAP})"
    if result.score_mode.mode == "expected":
        return f"no ceiling with expected scores (not categories; {n} overlap cases)"
    return f"no ceiling ({n} overlap cases)"


def _validity(criteria: Sequence[str], agreement: ReportAgreement | None,
              numbers: Numbers) -> list[Validity]:
    """Per criterion one line: the judge against clinicians per file, and beside it the
    clinicians against each other where the labels hold a ceiling (cases labelled by two
    or more), or why they hold none: no overlap case at all, or too few. Each file is
    called as the page calls it (``numbers``: a study's system by its name)."""
    if not agreement:
        return []
    lines = []
    for criterion in criteria:
        judge, clinicians, without = [], [], []
        for index, item in enumerate(agreement.files, start=1):
            result = item.result
            if result is None:
                judge.append((index, item.note or "no agreement"))
                continue
            judge.append((index, _kappa_text(result.criteria.get(criterion))))
            ceilings = [text for c in result.ceiling if c.criterion == criterion
                        if (text := _ceiling_text(c)) is not None]
            why = _no_ceiling_text(result, criterion)
            if ceilings:
                clinicians.append((index, ceilings[0]))
            elif why:
                without.append((index, why))
        line = f"{criterion}: judge vs clinicians, {KAPPA} {_grouped(judge, numbers)}"
        if clinicians:
            line += (f"; clinicians vs each other, {KAPPA} "
                     f"{_grouped(clinicians + without, numbers)}")
        elif without:
            texts = {text for _, text in without}
            line += "; clinicians vs each other: " + (
                texts.pop() if len(texts) == 1 else _grouped(without, numbers))
        else:
            line += f"; {NO_OVERLAP}"
        lines.append(Validity(criterion=criterion, line=line + "."))
    return lines


def _blind(system: SystemRow, result: AgreementReport | None) -> str:
    """Whether the labels were given blind to the judge's verdict, as far as is recorded."""
    sheet = result.sheet if result is not None else None
    if sheet is not None:
        seen = []
        if not sheet.blind:
            seen.append("the sheet showed the judge's verdicts")
        if sheet.judge_seen:
            seen.append(f"{sheet.judge_seen} label(s) saved after the verdict was shown")
        if seen:
            return (f"not blind ({'; '.join(seen)}): the judge's agreement with the labels, "
                    "and the weight the clinician-level figures give the judge, may be "
                    "inflated")
        return "blind (the sheet showed no verdict of the judge's)"
    if result is not None and result.verdict_seen:
        return "not blind: " + result.verdict_seen.removeprefix("NOTE: ")
    if system.design in ("random", "active"):
        return (f"a {system.design} worksheet, which shows no verdict; whether the "
                "labellers saw one elsewhere is not recorded")
    return "not recorded whether the labellers saw the judge's verdict (a plain labels file)"


def _rests_on(estimates: ReportEstimates, agreement: ReportAgreement | None,
              numbers: Numbers) -> list[str]:
    """Design, labels and blindness per system (the same text for several said once), then
    each warning once, naming the systems (results files) it is about, and the notes."""
    results = {index: item.result for index, item in
               enumerate(agreement.files if agreement else [], start=1)}
    # Each criterion's labelled count per file: a sheet's criteria can be labelled to
    # different extents ("cannot judge" on one), and ``systems`` holds the first one's.
    counts: dict[str, dict[str, int]] = {}
    for row in estimates.rows:
        counts.setdefault(row.file, {}).setdefault(row.criterion, row.n_labelled)
    designs, labels, blind = [], [], []
    warnings: dict[str, list[str]] = {}
    for system in estimates.systems:
        n = numbers.get(system.file, 0)
        designs.append((n, system.design_text.removeprefix("design: ")))
        per_criterion = counts.get(system.file, {})
        if len(set(per_criterion.values())) > 1:
            labelled = (", ".join(f"{key} {count}" for key, count in per_criterion.items())
                        + f" labelled cases of {system.n_cases}")
        else:
            labelled = (f"{next(iter(per_criterion.values()), system.n_labelled)} "
                        f"labelled cases of {system.n_cases}")
        if system.unlabelled_rows:
            labelled += f" ({system.unlabelled_rows} sheet rows not labelled yet)"
        result = results.get(n)
        if result is not None and result.sheet is not None and result.sheet.labellers:
            labelled += f", {len(result.sheet.labellers)} labeller(s)"
        labels.append((n, labelled))
        blind.append((n, _blind(system, result)))
        for note in system.notes:
            if note.startswith("WARNING"):
                warnings.setdefault(note.removeprefix("WARNING: "), []).append(
                    _short(system.file, numbers))
    lines = [f"Design: {_grouped(designs, numbers)}.", f"Labels: {_grouped(labels, numbers)}.",
             f"Blind: {_grouped(blind, numbers)}."]
    lines += [f"Warning ({', '.join(names)}): {text}" for text, names in warnings.items()]
    for note in (estimates.scale_note, estimates.shared_note):
        if note:
            lines.append(f"Note: {note}")
    return lines


class Numbers(dict[str, int]):
    """Each results file's number on the page (1, 2, ...), and the systems' names where a
    study gave them (``names``: file -> name)."""

    def __init__(self, paths: Sequence[str], names: Mapping[str, str] | None = None):
        super().__init__({str(path): index for index, path in enumerate(paths, start=1)})
        self.names = {str(k): v for k, v in (names or {}).items()}

    def tag(self, number: int) -> str:
        """How a line listing systems calls the one numbered ``number``: its study name,
        else ``#number``."""
        file = next((path for path, n in self.items() if n == number), None)
        return self.names.get(file, f"#{number}") if file is not None else f"#{number}"


def _numbers(paths: Sequence[str], names: Mapping[str, str] | None = None) -> Numbers:
    return Numbers(paths, names)


def _short(file: str, numbers: Mapping[str, int]) -> str:
    """How the page calls a system: its study name, else its file's stem and number."""
    named = getattr(numbers, "names", {}).get(str(file))
    return named or f"{Path(file).stem} (#{numbers.get(str(file), '?')})"


Scales = dict[tuple[str, str], tuple[tuple[float, float], str]]


def _by_outcome(rows: Sequence[EstimateRow]) -> dict[tuple[str, str], list[EstimateRow]]:
    by_outcome: dict[tuple[str, str], list[EstimateRow]] = {}
    for row in rows:
        by_outcome.setdefault((row.criterion, _kind(row)), []).append(row)
    return by_outcome


def _row_figures(row: EstimateRow) -> tuple[Figure, Figure, Figure, Figure]:
    """One estimates row's judge-only, labels-only, PPI++ and judge-bias figures."""
    return (_figure(row.judge_mean, row.judge_ci, row.judge_method),
            _figure(row.classical_estimate, row.classical_ci, row.classical_method),
            _figure(row.ppi_estimate, row.ppi_ci, row.ppi_method),
            _figure(row.judge_bias, row.judge_bias_ci, row.judge_bias_method))


def _scales(rows: Sequence[EstimateRow], rubric: Rubric) -> Scales:
    """Each outcome's axis and its words (:func:`_scale`), from its rows' estimates."""
    return {(criterion, kind): _scale(rubric, criterion, kind,
                                      [f for row in group for f in _row_figures(row)[:3]])
            for (criterion, kind), group in _by_outcome(rows).items()}


def _outcomes(rows: Sequence[EstimateRow], scales: Scales, numbers: Mapping[str, int],
              scale_note: str | None, reasons: Reasons) -> list[Outcome]:
    outcomes = []
    for (criterion, kind), group in _by_outcome(rows).items():
        other_scale = kind == "mean" and bool(scale_note) and repr(criterion) in scale_note
        systems = []
        for row in group:
            judge, labels_only, ppi, bias = _row_figures(row)
            name = _short(row.file, numbers)
            systems.append(SystemFigures(
                number=numbers.get(row.file, 0), name=name, judge=judge,
                labels_only=labels_only, ppi=ppi, judge_bias=bias,
                n_labelled=row.n_labelled, n_cases=row.n_cases,
                sentence=_system_sentence(name, criterion, kind, ppi, judge, bias,
                                          row.n_labelled, row.n_cases, other_scale,
                                          reasons, row.too_few, _labels_alone(row))))
        scale, scale_text = scales[(criterion, kind)]
        outcomes.append(Outcome(criterion=criterion, kind=kind, scale=scale,
                                scale_text=scale_text, systems=systems))
    return outcomes


def _differences(differences: Sequence[DifferenceRow], rows: Sequence[EstimateRow],
                 numbers: Mapping[str, int], scales: Scales,
                 reasons: Reasons) -> list[Difference]:
    labelled = {(r.file, r.criterion): (r.n_labelled, r.n_cases) for r in rows}
    out = []
    for d in differences:
        criterion = d.criterion
        # A gate's rows say "pass rate"; a difference names only its outcome.
        kind = next((_kind(r) for r in rows if r.criterion == criterion), "mean")
        a, b = _short(d.a_file, numbers), _short(d.b_file, numbers)
        if d.mode == "paired":
            how = f"paired, {d.n_labelled} labelled cases out of {d.n_cases}"
        else:
            la = labelled.get((d.a_file, criterion), ("?", "?"))
            lb = labelled.get((d.b_file, criterion), ("?", "?"))
            how = (f"independent: each system's own labels, {la[0]} of {la[1]} and "
                   f"{lb[0]} of {lb[1]} cases")
        figure = _figure(d.estimate, d.ci, d.method)
        finding, sentence = _difference_sentence(_what(criterion, kind), a, b, figure, how,
                                                 reasons, d.too_few, d.label_more_text)
        scale = scales.get((criterion, kind), ((0.0, 1.0), ""))[0]
        out.append(Difference(
            criterion=criterion, kind=kind, scale=scale,
            a_number=numbers.get(d.a_file, 0), b_number=numbers.get(d.b_file, 0), a=a, b=b,
            difference=figure, mode=d.mode, n_labelled=d.n_labelled, n_cases=d.n_cases,
            how=how, finding=finding, sentence=sentence))
    return out


def build_decision(rubric: Rubric, paths: Sequence[str], estimates: ReportEstimates | None,
                   agreement: ReportAgreement | None,
                   names: Mapping[str, str] | None = None) -> Decision:
    """The Decision section of a report on the results files at ``paths`` (in the page's
    order) of ``rubric``: its clinician-level ``estimates`` and ``agreement`` with the
    labels (both None without labels; see :func:`evaluator.report.build.build_report`).
    ``names``: path -> the system's name (a study's), in place of the file's stem."""
    how = list(HOW_TO_LABEL)
    if estimates is None:
        return Decision(labelled=False, without_labels=list(WITHOUT_LABELS), how_to_label=how)
    if not estimates.rows:
        return Decision(labelled=False, notes=[estimates.note or
                                               "no clinician-level estimate could be made"],
                        without_labels=list(NO_ESTIMATE), how_to_label=how)
    numbers = _numbers(paths, names)
    rows = estimates.rows
    scales, reasons = _scales(rows, rubric), Reasons()
    # The differences first: the page states them first, so their reasons get the first
    # marks.
    differences = _differences(estimates.differences, rows, numbers, scales, reasons)
    outcomes = _outcomes(rows, scales, numbers, estimates.scale_note, reasons)
    criteria = list(dict.fromkeys(o.criterion for o in outcomes if o.kind == "mean"))
    return Decision(
        labelled=True, outcomes=outcomes, differences=differences, reasons=reasons.lines(),
        paired_line=(PAIRED_LINE_PLAIN if any(d.mode == "paired" for d in differences)
                     else None),
        validity=_validity(criteria, agreement, numbers),
        rests_on=_rests_on(estimates, agreement, numbers),
        notes=list(estimates.failed))
