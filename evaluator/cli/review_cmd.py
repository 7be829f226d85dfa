"""``evaluator review``: a worksheet of the cases most worth a clinician's time, and an
estimate of how many more labels an agreement CI needs."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from click.core import ParameterSource

from evaluator.analysis.designs import DEFAULT_FLOOR, DESIGNS, MIN_FLOOR
from evaluator.analysis.intervals import format_ci
from evaluator.analysis.review.cases import Given, sheet_reading
from evaluator.analysis.review.review import (
    DEFAULT_N,
    PHI_WARNING,
    ReviewError,
    ReviewSheet,
    build_review,
    write_review,
)
from evaluator.analysis.review.sample_size import TARGET_STATISTICS
from evaluator.analysis.review.signals import parse_gate
from evaluator.cli.options import case_options, label_options, rubrics_dir_option
from evaluator.common.columns import WIDTH, whole, wrap
from evaluator.data.files import show_path
from evaluator.data.sheet import sheet_path
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.run.manifest import case_reading, manifest_path_for, unfinished_run


def _estimate_lines(sheet: ReviewSheet) -> list[str]:
    lines = []
    for e in sheet.estimates:
        if "statistic" not in e:
            lines += wrap(f"estimate: {e['note']}")
            continue
        head = f"estimate for {e['results']}, {e['criterion']}, {e['name']} (n = {e['n']} labelled)"
        if e["n_needed"] is None:
            lines += wrap(f"{head}: {e['note']}")
            continue
        lines += wrap(f"{head}: {e['value']:.3f} {whole(format_ci(e['ci95']))} "
                      f"({e['ci_method']}), half-width {e['halfwidth']:.3f}; about "
                      f"{e['n_needed']} labelled cases ({e['more']} more) for a half-width of "
                      f"{e['target_halfwidth']:g} [{e['method']}]")
        lines += [line for k in ("warning", "note") if e.get(k) for line in wrap(e[k], "  ")]
    return lines


def _command(words: list[str]) -> list[str]:
    """A shell command to copy, in lines of at most 80 columns joined by `` \\`` (each word
    quoted as the shell needs, never split)."""
    lines = wrap(" ".join(whole(shlex.quote(word)) for word in words), "    ", "    ",
                 WIDTH - 2)
    return [f"{line} \\" for line in lines[:-1]] + lines[-1:]


def _summary_lines(sheet: ReviewSheet, results: tuple[Path, ...], csv_path: Path,
                   jsonl_path: Path) -> list[str]:
    """What was written and how to use it, in 80 columns; the follow-up command names the
    results file and the worksheet as they were given."""
    kind = "pairwise " if sheet.kind == "pairwise" else ""
    lines = wrap(f"review ({kind}{sheet.design} design): {len(sheet.rows)} case(s) in "
                 f"{show_path(csv_path)} and {show_path(jsonl_path)} ({sheet.candidates} "
                 f"unlabelled judged case(s); {sheet.labelled_skipped} labelled already, "
                 f"skipped; {sheet.not_ok} without an ok verdict)")
    lines += wrap(f"sheet: {show_path(sheet_path(csv_path.parent))} (what was drawn, how, and "
                  "who labels which case)")
    lines += wrap("blind: the sheet shows none of the judge's verdicts, confidences or "
                  "reasoning" if sheet.blind else
                  "not blind: the sheet shows the judge's verdicts (labels given with them in "
                  "view may echo them)")
    a = sheet.assignment
    sheet_dir = show_path(csv_path.parent)
    names = list(a.labellers) or ["NAME"]
    if a.labellers:
        per = ", ".join(f"{name} {len(a.cases[name])}" for name in a.labellers)
        lines += wrap(f"labellers: {per} case(s); {len(a.overlap_cases)} given to every "
                      f"one (overlap {a.overlap:g})")
    if not sheet.label_columns:
        return lines
    first = sheet.label_columns[0]
    pairwise = sheet.kind == "pairwise"
    command = "compare" if pairwise else "agree" if sheet.design == "priority" else "estimate"
    lines += wrap("label them on the labelling page (one link per labeller):", "  ")
    lines += _command(["evaluator", "label", sheet_dir,
                       *(word for name in names for word in ("--labeller", name))])
    lines += wrap("then, from the labels saved there:", "  ")
    lines += _command(["evaluator", command, show_path(results[0]), "--labels", sheet_dir,
                       *(["--label-field", first] if command == "estimate" else [])])
    if pairwise:
        lines += wrap(f"label columns (A, B or tie; A is {sheet.rows[0].get('system_a', 'A')}"
                      f", B {sheet.rows[0].get('system_b', 'B')}): "
                      f"{', '.join(sheet.label_columns)}" if sheet.rows else
                      f"label columns: {', '.join(sheet.label_columns)}")
        lines += wrap("or fill one in review.csv, then:", "  ")
        lines += _command(["evaluator", "compare", show_path(results[0]), "--labels",
                           show_path(csv_path), "--label-field", first])
        return lines
    lines += wrap(f"label columns: {', '.join(sheet.label_columns)}")
    which = ", for each results file (the first shown)" if len(results) > 1 else ""
    lines += wrap(f"or fill one in review.csv, then{which}:", "  ")
    lines += _command(["evaluator", command, show_path(results[0]), "--labels",
                       show_path(csv_path), "--label-field", first, "--criterion",
                       first.removesuffix(".label")])
    if sheet.design == "priority":
        lines += wrap("note: these cases were chosen for being hard: figures from their "
                      "labels describe them, not the run (--design random or active for "
                      "figures about the run)")
    return lines


@click.command("review")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Folder for review.csv, review.jsonl and sheet.json (created 0700; "
                   "files 0600).")
@click.option("--n", "n", type=click.IntRange(min=1), default=DEFAULT_N, show_default=True,
              help="Cases on the worksheet (--design active: the expected number).")
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="Criterion to rank and show (repeatable; default: every scored criterion).")
@click.option("--pass", "gates", multiple=True, metavar="CRITERION>=T",
              help="Pass threshold: cases whose expected score is near it rank high "
                   "(repeatable; an integer criterion or aggregate).")
@label_options("labels so far; their cases are skipped, and the sample-size estimate "
               "is made from them.", path_type=click.Path(path_type=Path))
@click.option("--target-halfwidth", type=click.FloatRange(min=0, min_open=True), default=0.1,
              show_default=True, help="With --labels: the 95% CI half-width to reach.")
@click.option("--target-statistic", type=click.Choice(list(TARGET_STATISTICS)),
              default="weighted_kappa", show_default=True,
              help="With --labels: the agreement statistic whose CI the estimate is for.")
@click.option("--show-text", is_flag=True,
              help="Add the cases' input fields (PHI!), read as the run read them (its "
                   "manifest), or from --cases. Without it the worksheet holds no case "
                   "text.")
@case_options("for --show-text.", path_type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace a worksheet already in --out.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the estimate's CI.")
@click.option("--seed", type=click.IntRange(min=0), default=20141, show_default=True,
              help="Seed of the draw (--design random|active), of the labellers' "
                   "assignment and of the estimate's bootstrap.")
@click.option("--design", type=click.Choice(list(DESIGNS)), default="priority",
              show_default=True,
              help="How the cases are picked: priority (the cases most worth a label: "
                   "figures from their labels describe those cases only), random (a simple "
                   "random sample: figures about the run) or active (each case drawn with a "
                   "known probability that grows with the judge's uncertainty on the first "
                   "--criterion; --n is the expected number).")
@click.option("--labeller", "labellers", multiple=True, metavar="NAME",
              help="A clinician who labels the sheet (repeatable); sheet.json records who "
                   "labels which case.")
@click.option("--overlap", type=float, default=None, metavar="SHARE",
              help="With 2 or more --labeller: the share of the drawn cases (0 to 1) given "
                   "to every labeller; the rest are split between them [default: 0].")
@click.option("--floor", type=click.FloatRange(min=MIN_FLOOR, max=1),
              default=DEFAULT_FLOOR, show_default=True,
              help="--design active: every case's probability is at least FLOOR x n/N.")
@rubrics_dir_option
def review_command(results: tuple[Path, ...], out_dir: Path, n: int, criteria: tuple[str, ...],
                   gates: tuple[str, ...], labels: LabelSource | None, target_halfwidth: float,
                   target_statistic: str, show_text: bool, cases: CaseSource, force: bool,
                   resamples: int, seed: int, design: str, labellers: tuple[str, ...],
                   overlap: float | None, floor: float,
                   rubrics_dirs: tuple[Path, ...]) -> None:
    """Write a worksheet (OUT/review.csv and OUT/review.jsonl) of N cases of RESULTS for a
    clinician to label (and OUT/sheet.json), with an empty '<criterion>.label' column per
    criterion for
    `evaluator agree` and `evaluator estimate`. --design priority (default): the cases most
    worth a clinician's time (lowest judge confidence, samples or judges disagreeing,
    closest to a --pass threshold), each row saying why; cases labelled in --labels are
    skipped, and the labels so far give an estimate of how many more a CI needs. --design
    random|active: cases drawn with known probabilities (each row carries its own), for
    figures about the whole run; these sheets are blind (no judge verdict in them). A
    pairwise rubric's results: --design random, A/B/tie labels for `evaluator compare`.
    No case text unless --show-text (the cases file and reading options the run recorded
    are used; --cases, --map, --case-id-column override them). A run not finished yet
    (still running, interrupted, killed) is refused: finish it first."""
    for path in results:
        # A sheet drawn while the run is unfinished holds only the cases judged so far:
        # `estimate` refuses it once the run is done, after clinicians labelled it.
        unfinished = unfinished_run(path)
        if unfinished is not None:
            raise ReviewError(f"{show_path(path)}: {unfinished}, then draw the worksheet")
    # How the run read its cases (its manifest), each option the user gives overriding it.
    context = click.get_current_context()
    given = Given(*(context.get_parameter_source(name) is ParameterSource.COMMANDLINE
                    for name in ("cases_path", "mappings", "case_id_column")))
    cases, cases_ref = sheet_reading(case_reading(results[0]), cases, given, read=show_text,
                                     manifest=manifest_path_for(results[0]).name)
    sheet = build_review(
        list(results), n=n, criteria=criteria, gates=[parse_gate(g) for g in gates],
        labels=labels, show_text=show_text, cases=cases, rubrics_dirs=rubrics_dirs,
        target_halfwidth=target_halfwidth, target_statistic=target_statistic,
        resamples=resamples, seed=seed, design=design, floor=floor, labellers=labellers,
        overlap=overlap, cases_ref=cases_ref)
    if sheet.exhausted:
        # Not an error: the labels cover the run. No sheet, no follow-up command; the
        # labels' sample-size estimate still says how far they reach.
        for line in [*wrap(sheet.nothing_to_draw), *_estimate_lines(sheet)]:
            click.echo(line)
        return
    inputs = [*results, *(labels.paths if labels else ()), *([cases.path] if cases.path else [])]
    csv_path, jsonl_path = write_review(sheet, out_dir, force=force, inputs=inputs)
    for line in _summary_lines(sheet, results, csv_path, jsonl_path):
        click.echo(line)
    for line in [*(x for note in sheet.notes for x in wrap(note)), *_estimate_lines(sheet)]:
        click.echo(line)
    if show_text:
        for line in wrap(PHI_WARNING):
            click.echo(line, err=True)
