"""Drawing a study's labels (issue 48, item 2): one system-blind queue per clinician.

Comparing two systems with one sheet and one labelling link per system tells the clinician
which system she rates. :func:`draw_study` draws the plan's cases once for both systems:
one ordinary random sheet per system (``evaluator review``'s :func:`build_review` and
:func:`write_review`, with the plan's ``n``, seed, labellers and overlap), into
``STUDY_DIR/labels/system-K``; the two draw the same cases and give each labeller the same
ones, because the draw and the assignment depend only on the ok case ids and the seed, and
both systems must have judged the same cases ok (the estimate refuses a sheet drawn from
another population than its results file's ok cases). Then ``labels/study-draw.json``
(:mod:`evaluator.data.study_draw`) records the plan as it is (its hash and text), each
system's results hash and sheet, and each labeller's queue: both systems' answers for each
of her cases, as separate items shuffled with a seed of her own, so that neither order nor
position tells the system.

A study is drawn once: a folder that holds a draw is never drawn again (its labels belong
to it). The sheets are written first and ``study-draw.json`` last, so a draw stopped midway
leaves no record, and drawing again replaces its sheets (never one with saved labels). The
check that the study is not drawn and the writing are done holding the draw's lock
(``labels/study-draw.evaluator-lock``, :func:`~evaluator.data.study_draw.draw_lock_path`):
a second draw started meanwhile is refused and replaces nothing of the first's.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from evaluator.analysis.review.review import ReviewSheet, build_review, write_review
from evaluator.common.errors import UserError
from evaluator.data.files import OutputBusy, OutputRefused, exclusive_lock, show_path
from evaluator.data.results import ResultsFileDamaged, read_results
from evaluator.data.sheet import CasesRef, journal_with_labels, now, read_sheet_info
from evaluator.data.study_draw import (
    DrawnSystem,
    StudyDraw,
    StudyDrawError,
    draw_lock_path,
    labels_dir,
    read_study_draw,
    sheet_name,
    study_draw_path,
    write_study_draw,
)
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric
from evaluator.study.plan import LoadedPlan, StudyPlan

ACTIVE_REFUSED = ("a study draws each case once for both systems; labels.design active draws "
                  "per system (different cases), use random (docs/statistics.md finds "
                  "random the advice)")


class StudyDrawRefused(UserError, ValueError):
    """A study that cannot be drawn (now, or again): one line saying why and what to do."""


def draw_study(loaded: LoadedPlan, cases: Sequence[CasesRef],
               rubrics_dirs: Sequence[Path] = ()) -> StudyDraw:
    """Draw the study of ``loaded`` into ``STUDY_DIR/labels`` (the module docstring) and
    return what ``study-draw.json`` records. ``cases``: per system, in the plan's order, the
    cases file its run read and how (from the run's manifest, as ``evaluator review`` finds
    it): the page shows each system's answer from it."""
    plan = loaded.plan
    if plan.labels.design != "random":
        raise StudyDrawRefused(ACTIVE_REFUSED)
    if len(cases) != len(plan.systems):
        raise ValueError("one cases reading per system")
    labels = labels_dir(loaded.path.parent)
    _refuse_drawn(labels)  # first, so a drawn study says so before any other check
    plan_text = _plan_text(loaded)
    _check_same_cases(loaded, rubrics_dirs)
    criteria = sheet_criteria(plan, loaded.rubric)
    dirs = _rubric_dirs(loaded, rubrics_dirs)
    design = plan.labels
    sheets = [build_review([path], n=design.n, design="random", seed=design.seed,
                           labellers=design.labellers, criteria=criteria, cases_ref=ref,
                           overlap=design.overlap if len(design.labellers) > 1 else None,
                           rubrics_dirs=dirs)
              for path, ref in zip(loaded.results, cases, strict=True)]
    drawn = _same_draw(sheets)
    with _draw_lock(labels):
        # Again under the lock: another draw may have written its record since the check
        # above; from here to this draw's record no other draw can pass it.
        _refuse_drawn(labels)
        return _write_draw(loaded, labels, sheets, drawn, plan_text)


def _write_draw(loaded: LoadedPlan, labels: Path, sheets: Sequence[ReviewSheet],
                drawn: list[str], plan_text: str) -> StudyDraw:
    """Write the sheets, then ``study-draw.json`` (with the draw's lock held)."""
    plan, design = loaded.plan, loaded.plan.labels
    fingerprints = []
    for index, (sheet, path) in enumerate(zip(sheets, loaded.results, strict=True)):
        folder = labels / sheet_name(index)
        # force: a sheet a stopped draw left (it has no record); one with labels is refused.
        write_review(sheet, folder, force=True, inputs=[path])
        fingerprints.append(read_sheet_info(folder).fingerprint)
    assignment = sheets[0].assignment
    # A secret of this draw seeds the queues with the plan's seed: the plan and the results
    # alone (which a clinician may have) do not tell which item is which system's.
    salt = secrets.token_hex(16)
    queues = {name: queue(design.seed, name, assignment.cases[name], len(sheets), salt)
              for name in assignment.labellers}
    draw = StudyDraw(
        plan_sha256=loaded.sha256, plan_text=plan_text, drawn=now(),
        systems=[DrawnSystem(name=system.name, results=system.results,
                             results_sha256=sheet.results[0].sha256, sheet=sheet_name(index),
                             fingerprint=fingerprint)
                 for index, (system, sheet, fingerprint)
                 in enumerate(zip(plan.systems, sheets, fingerprints, strict=True))],
        cases=drawn, seed=design.seed, queues=queues)
    write_study_draw(labels, draw)
    return draw


def queue(seed: int, labeller: str, cases: Sequence[str], systems: int, salt: str = "",
          ) -> list[tuple[int, str]]:
    """``labeller``'s items: every system's answer for each of her ``cases``, as
    ``(system index, case id)``, shuffled by a generator seeded from the study's seed, the
    draw's secret ``salt`` and her name (different between labellers and between draws;
    the order drawn is recorded in ``study-draw.json``)."""
    items = [(system, case_id) for case_id in cases for system in range(systems)]
    digest = hashlib.sha256(f"{seed}\0{salt}\0{labeller}".encode()).digest()
    random.Random(int.from_bytes(digest, "big")).shuffle(items)
    return items


def sheet_criteria(plan: StudyPlan, rubric: Rubric) -> tuple[str, ...]:
    """The criteria the sheets ask: the endpoints' (primary first, aliases resolved); every
    criterion a sheet asks (empty: ``build_review``'s default) when an endpoint is an
    aggregate, which clinicians label through its parts."""
    scored = {f.key for f in rubric.output if isinstance(f, (IntegerCriterion, ItemsCriterion))}
    keys = [rubric.aliases.get(e.criterion, e.criterion) for e in [plan.primary, *plan.secondary]]
    if any(key not in scored for key in keys):
        return ()
    return tuple(dict.fromkeys(keys))


@contextmanager
def _draw_lock(labels: Path) -> Iterator[None]:
    """Hold the study's draw lock (:func:`draw_lock_path`, an exclusive ``flock``: the
    system gives it back when its process ends, however it ends, so a crashed draw blocks
    no later one); held by another draw, refused at once in one line."""
    lock = draw_lock_path(labels)
    with ExitStack() as held:
        try:
            held.enter_context(exclusive_lock(lock, study_draw_path(labels),
                                              writer="`evaluator study draw`",
                                              wait_option=None))
        except OutputBusy:
            raise StudyDrawRefused(
                f"{show_path(labels)}: a draw of this study is already under way (another "
                f"`evaluator study draw` holds {show_path(lock.name)}); nothing was "
                "written: a study is drawn once, that draw is its draw") from None
        except OutputRefused:  # a file of that name this tool did not write, or a link
            raise StudyDrawRefused(
                f"{show_path(lock)} exists and is not a lock file of this tool; refusing to "
                "use or change it: move it away, then draw again") from None
        yield


def _refuse_drawn(labels: Path) -> None:
    """A labels folder with a draw is never drawn again; a sheet with labels and no draw is
    not replaced either."""
    target = study_draw_path(labels)
    if target.exists() or target.is_symlink():
        try:
            old = read_study_draw(labels)
        except StudyDrawError as exc:
            raise StudyDrawRefused(f"{exc}; a study's draw is never replaced: restore it "
                                   "(its labels belong to it)") from None
        raise StudyDrawRefused(f"{show_path(labels)}: already drawn on {old.drawn[:10]} under "
                               f"plan sha256 {old.plan_sha256[:12]}…; its labels belong to that "
                               "draw (a study is drawn once: for another draw, start a new "
                               "study folder)")
    for index in range(2):
        folder = labels / sheet_name(index)
        if journal_with_labels(folder):
            raise StudyDrawRefused(f"{show_path(folder)} holds saved labels but "
                                   f"{show_path(target)} is missing: they belong to no recorded "
                                   "draw; move the labels folder aside, then draw again")


def _plan_text(loaded: LoadedPlan) -> str:
    """The plan's exact text, the bytes :func:`load_plan` hashed (refused if it changed
    since)."""
    try:
        raw = loaded.path.read_bytes()
    except OSError as exc:
        raise StudyDrawRefused(f"cannot read {show_path(loaded.path)} ({exc.strerror})") from None
    if hashlib.sha256(raw).hexdigest() != loaded.sha256:
        raise StudyDrawRefused(f"{show_path(loaded.path)} changed while the study was drawn; "
                               "draw again")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StudyDrawRefused(f"{show_path(loaded.path)}: not UTF-8 text") from None


def _ok_cases(path: Path, rubrics_dirs: Sequence[Path]) -> set[str]:
    """The case ids judged ok (with scores): the population a sheet draws from."""
    try:
        records = read_results(path, rubrics_dirs)
    except ResultsFileDamaged as exc:
        raise StudyDrawRefused(str(exc)) from None
    return {r.case_id for r in records if r.status == "ok" and r.scores is not None}


def _check_same_cases(loaded: LoadedPlan, rubrics_dirs: Sequence[Path]) -> None:
    """Both systems judged the same cases ok: each case is drawn once for both, and each
    sheet's population must be its results file's ok cases."""
    a, b = (_ok_cases(path, rubrics_dirs) for path in loaded.results)
    if a == b:
        return
    first, second = (s.name for s in loaded.plan.systems)
    raise StudyDrawRefused(
        f"the systems judged different cases ok ({first} has {len(a - b)} that {second} has "
        f"not, {second} {len(b - a)} that {first} has not): judge them again so that both "
        "systems are compared on the same cases (evaluator run into the same --output judges "
        "again the cases missing or with a backend_error; other failures need --force-new)")


def _same_draw(sheets: Sequence[ReviewSheet]) -> list[str]:
    """The drawn case ids, the same on every sheet with the same assignment (they follow
    from the same ok cases and seed; checked, as the queues rest on it)."""
    first = sheets[0]
    drawn = [record["case_id"] for record in first.records]
    for sheet in sheets[1:]:
        if ([r["case_id"] for r in sheet.records] != drawn
                or sheet.assignment.cases != first.assignment.cases
                or sheet.assignment.overlap_cases != first.assignment.overlap_cases):
            raise StudyDrawRefused("the systems' sheets drew different cases or assignments "
                                   "from the same ok cases and seed; nothing was written "
                                   "(report this)")
    return drawn


def _rubric_dirs(loaded: LoadedPlan, rubrics_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """Where the sheets find the plan's rubric by name: ``rubrics_dirs``, and the folder of
    a rubric the plan names by its file."""
    source = loaded.rubric.source_path
    if loaded.plan.rubric.endswith((".yaml", ".yml")) and source is not None:
        return (*rubrics_dirs, Path(source).parent)
    return tuple(rubrics_dirs)
