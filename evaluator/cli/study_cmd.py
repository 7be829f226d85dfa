"""``evaluator study``: a comparison of systems declared before labelling (issue 48).
``study check STUDY`` reads and checks the plan (``STUDY/study.yaml``) and prints what it
declares and its SHA-256; ``study draw STUDY`` draws its sheets and each clinician's
system-blind queue (:mod:`evaluator.study.draw`); ``study label STUDY`` serves the queues,
one link per clinician (:mod:`evaluator.label.study_session`)."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.analysis.review.cases import Given, sheet_reading
from evaluator.analysis.review.review import ReviewError
from evaluator.cli.label_cmd import echo_links
from evaluator.cli.options import listen_options, rubrics_dir_option
from evaluator.common.columns import wrap
from evaluator.data.files import show_path
from evaluator.data.sheet import CasesRef
from evaluator.data.sources import CaseSource
from evaluator.data.study_draw import labels_dir
from evaluator.label.serve import Listen, check_listen, require_extra, serve
from evaluator.label.study_session import StudySession
from evaluator.run.manifest import case_reading, manifest_path_for, unfinished_run
from evaluator.study.draw import StudyDrawRefused, draw_study
from evaluator.study.plan import load_plan, plan_path


@click.group("study")
def study_command() -> None:
    """A comparison of systems with its endpoint, margin and labels design declared before
    any label (STUDY/study.yaml; docs/study.md)."""


@study_command.command("check")
@click.argument("study", type=click.Path(exists=True, path_type=Path))
@rubrics_dir_option
def check_command(study: Path, rubrics_dirs: tuple[Path, ...]) -> None:
    """Check STUDY's plan (a study folder holding study.yaml, or the plan file): every
    problem on one line, exit 2; else what it declares and its SHA-256."""
    loaded = load_plan(study, rubrics_dirs)
    plan = loaded.plan
    lines = [f"study: {plan.title}", f"plan: {loaded.path} (sha256 {loaded.sha256})",
             f"rubric: {loaded.rubric.name}"]
    for system, path in zip(plan.systems, loaded.results, strict=True):
        role = "reference" if system.name == plan.comparison.reference else "compared"
        lines.append(f"system {system.name} ({role}): {path}")
    lines += wrap(f"primary endpoint: {plan.hypothesis()}")
    for endpoint in plan.secondary:
        lines.append(f"secondary (reported, never decisive): {endpoint.describe()}")
    design = plan.labels
    lines += wrap(f"labels: {design.design} sheet of {design.n} case(s), labellers "
                  f"{', '.join(design.labellers)}, overlap {design.overlap:g}, seed "
                  f"{design.seed}")
    for line in lines:
        click.echo(line)


def _cases_ref(results: Path) -> CasesRef:
    """The cases file ``results``' run read and how (its manifest, as ``evaluator review``
    finds it), checked unchanged: the labelling page shows each answer from it."""
    unfinished = unfinished_run(results)
    if unfinished is not None:
        raise ReviewError(f"{show_path(results)}: {unfinished}, then draw the study")
    _, ref = sheet_reading(case_reading(results), CaseSource(), Given(), read=True,
                           manifest=manifest_path_for(results).name)
    if ref is None:
        raise StudyDrawRefused(f"{show_path(results)}: its run's manifest records no cases "
                               "file (the labelling page shows each answer from it): judge "
                               "it again with this version")
    return ref


@study_command.command("draw")
@click.argument("study", type=click.Path(exists=True, path_type=Path))
@rubrics_dir_option
def draw_command(study: Path, rubrics_dirs: tuple[Path, ...]) -> None:
    """Draw STUDY's labels once (STUDY/labels): the plan's random cases, one sheet per
    system (labels/system-K) with the same cases and labellers, and labels/study-draw.json
    (the plan's hash and text, each system's results hash, each labeller's queue of both
    systems' answers in a seeded order). Refused if STUDY is drawn already."""
    loaded = load_plan(study, rubrics_dirs)
    refs = [_cases_ref(path) for path in loaded.results]
    draw = draw_study(loaded, refs, rubrics_dirs)
    folder = labels_dir(loaded.path.parent)
    click.echo(f"drawn: {show_path(folder)} under plan {show_path(loaded.path)} (sha256 "
               f"{draw.plan_sha256})")
    click.echo(f"cases: {len(draw.cases)}, each rated on both systems' answers")
    for name, items in draw.queues.items():
        click.echo(f"  {name}: {len(items)} item(s) in a blind queue")
    click.echo("label them (one link per clinician for the whole study):")
    click.echo(f"    evaluator study label {show_path(plan_path(study).parent)}")


@study_command.command("label")
@click.argument("study", type=click.Path(exists=True, path_type=Path))
@click.option("--labeller", "labellers", multiple=True, metavar="NAME",
              help="Who labels (repeatable; default: every labeller of the study): each "
                   "gets one URL, with a token of her own, for the whole study.")
@listen_options
@rubrics_dir_option
def label_command(study: Path, labellers: tuple[str, ...], listen: Listen,
                  rubrics_dirs: tuple[Path, ...]) -> None:
    """Serve STUDY's queues: one page per clinician where she rates both systems' answers
    to her cases, one at a time, in a seeded order, blind to the system and to the judge.
    Each label goes to its system's sheet journal (labels/system-K/journal.jsonl). Prints
    one URL per labeller; stop with Ctrl-C."""
    require_extra()
    check_listen(listen)  # before the cases are read
    session = StudySession(labels_dir(plan_path(study).parent), labellers,
                           rubrics_dirs=rubrics_dirs)
    # Once, if a line another server appends breaks a sheet's rules (saving stops).
    session.notify = lambda problem: click.echo(f"error: {problem}", err=True)

    def announce(links: list[tuple[str, str]]) -> None:
        counts = {p.name: len(p.cases) for p in session.labellers.values()}
        click.echo(f"Labelling the study in {show_path(session.labels)} (blind to the system "
                   f"and the judge): {len(session.draw.cases)} cases, each system's answer "
                   "an item of its own.")
        echo_links(links, counts, "item")

    serve(session, listen, announce)
