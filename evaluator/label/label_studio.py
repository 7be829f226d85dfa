"""A labelling sheet as Label Studio tasks (``evaluator label SHEET_DIR --label-studio
OUT_DIR``), for a site that already runs Label Studio: ``OUT_DIR/tasks.json`` (Label
Studio's import format, a list of ``{"data": {...}}``, one task per drawn case, in the
sheet's order) and ``OUT_DIR/config.xml`` (the labelling config, generated from the
rubric: each shown field a ``<Text>``, each criterion a single ``<Choices>`` of its levels
with a "cannot judge" choice, as the labelling page offers them).

The tasks are as blind as the page (:mod:`evaluator.label.session`): a task's data holds
the case's fields the page shows (the rubric's inputs, read from the cases file the run
read), its ``case_id`` and the sheet's fingerprint (so that the export comes back to this
sheet: :mod:`evaluator.analysis.labels.label_studio` reads it), never the judge's verdict,
score, confidence or reasoning, the design's probabilities, or the names of the systems or
results files. The config is built with :mod:`xml.etree.ElementTree` (rubric text escaped,
never pasted). Both files are written atomically, mode 0600; an existing one is replaced
only with ``overwrite``. Case text goes into tasks.json (it is the task), never a message.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator.analysis.labels.label_studio import CANNOT_JUDGE, CASE_ID, FINGERPRINT
from evaluator.data.files import OutputRefused, refuse_unsafe_target, show_path, write_bytes_atomic
from evaluator.data.sheet import SheetError, read_sheet_info
from evaluator.data.sheet_cases import read_sheet_cases
from evaluator.label.criteria import LabelCriterion, label_criteria
from evaluator.label.fields import input_title, rated_input
from evaluator.label.session import LabelError, checked_rubric, read_review
from evaluator.rubrics.rubric import Rubric

TASKS = "tasks.json"
CONFIG = "config.xml"
CANNOT_JUDGE_TEXT = "Cannot judge"


@dataclass(frozen=True)
class Written:
    """What :func:`write_label_studio` wrote: the two files and the number of tasks."""

    tasks: Path
    config: Path
    count: int


# Characters XML 1.0 cannot hold (ElementTree writes them as they are: a file no parser
# reads).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def labelling_config(rubric: Rubric, criteria: Sequence[LabelCriterion]) -> bytes:
    """The Label Studio labelling config for ``criteria`` of ``rubric``: its inputs as the
    page shows them (the context first, then the answer rated), then per criterion a
    required single choice among its values (alias: the value; text: the value and its
    level) and "cannot judge" (alias :data:`CANNOT_JUDGE`); a typed-in number (an
    aggregate) a ``<Number>``. Pure: no file, no case."""
    view = ET.Element("View")
    rated = rated_input(rubric)
    names = [n for n in rubric.inputs if n != rated] + ([rated] if rated else [])
    for name in names:
        title = input_title(name)
        description = rubric.inputs[name].description
        heading = (f"To rate: {title}" if name == rated else title) + (
            f" ({description})" if description else "")
        ET.SubElement(view, "Header", value=heading, size="5")
        ET.SubElement(view, "Text", name=name, value=f"${name}")
    target = rated or names[-1]
    for c in criteria:
        ET.SubElement(view, "Header", value=c.key + (f": {c.description}" if c.description
                                                     else ""), size="5")
        if c.kind == "number":
            ET.SubElement(view, "Number", name=c.key, toName=target, required="true")
            continue
        choices = ET.SubElement(view, "Choices", name=c.key, toName=target, choice="single",
                                required="true", showInline="false")
        for o in c.options:
            ET.SubElement(choices, "Choice", alias=o.value,
                          value=o.label + (f" - {o.level}" if o.level else ""))
        ET.SubElement(choices, "Choice", alias=CANNOT_JUDGE, value=CANNOT_JUDGE_TEXT)
    for element in view.iter():
        if any(_NOT_XML.search(value) for value in element.attrib.values()):
            raise LabelError(f"rubric {rubric.name!r}: a criterion's text holds a control "
                             "character, which XML cannot carry: remove it from the rubric "
                             "file")
    ET.indent(view)
    return ET.tostring(view, encoding="utf-8", xml_declaration=False) + b"\n"


def write_label_studio(sheet_dir: Path, out_dir: Path, *, overwrite: bool = False,
                       rubrics_dirs: Sequence[Path] = ()) -> Written:
    """Write the sheet ``sheet_dir`` as Label Studio tasks and config into ``out_dir``
    (see the module docstring). Refused in one line: a pairwise sheet, a sheet whose rubric
    or review.jsonl changed since the draw, a rubric whose input is named like a criterion
    or a task key, an existing file without ``overwrite``."""
    sheet_dir, out_dir = Path(sheet_dir), Path(out_dir)
    try:
        info = read_sheet_info(sheet_dir)
    except SheetError as exc:
        raise LabelError(str(exc)) from None
    rubric = checked_rubric(sheet_dir, info, rubrics_dirs)
    if rubric.candidates is not None:  # two answers side by side: the page's own layout
        raise LabelError(f"{show_path(sheet_dir)} is a pairwise sheet: Label Studio tasks are "
                         "written for single-answer sheets only; label it with evaluator "
                         "label (the page shows the two answers in a random order)")
    criteria = label_criteria(rubric, info.criteria)
    clash = sorted(set(rubric.inputs) & ({c.key for c in criteria} | {CASE_ID, FINGERPRINT}))
    if clash:
        raise LabelError(f"rubric {info.rubric!r} has an input named {clash[0]!r}, as a "
                         "criterion or a task key is: Label Studio needs each name once; "
                         "rename the input in the rubric")
    targets = [out_dir / TASKS, out_dir / CONFIG]
    for target in targets:
        refuse_unsafe_target(target)
        if target.exists() and not overwrite:
            raise OutputRefused(f"{show_path(target)} exists; refusing to replace it (pass "
                                "--overwrite to replace it)")
    case_ids, _ = read_review(sheet_dir, info, keep_judge=False)
    try:
        cases = read_sheet_cases(sheet_dir, info, rubric, case_ids)
    except SheetError as exc:
        raise LabelError(str(exc)) from None
    tasks = [{"data": {CASE_ID: case, FINGERPRINT: info.fingerprint,
                       **{name: cases[case].get(name, "") for name in rubric.inputs}}}
             for case in case_ids]
    write_bytes_atomic(targets[0], (json.dumps(tasks, ensure_ascii=False, indent=1)
                                    + "\n").encode("utf-8"))
    write_bytes_atomic(targets[1], labelling_config(rubric, criteria))
    return Written(targets[0], targets[1], len(tasks))
