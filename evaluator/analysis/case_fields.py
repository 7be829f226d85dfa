"""The input fields the judge was shown, per case, for the agreement diagnostics (circular
labels, the length of the evaluated text). Nothing here is printed: callers get field names,
lengths and counts, never the text.

The cases file is the one given (``--cases``) or the ``input_file`` the records name, looked
for beside the results file, then in the current folder. It is read with the run's reader
(:func:`evaluator.data.cases.read_cases`, with the run's ``--map``/``--id-column``) and used
only when every joined record's ``input_line`` holds that record's case id there: another
file, or one changed since the run, is said in a note instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from evaluator.data.cases import Case, InputFileError, read_cases
from evaluator.data.results import ResultRecord
from evaluator.data.sources import CaseSource
from evaluator.rubrics.rubric import Rubric

# Input descriptions that mark the text being evaluated (every built-in rubric has one).
EVALUATED_MARKERS = ("being evaluated", "being judged")


# The marker ends what the description says of the input ("... being evaluated." or "...
# being evaluated, ..."): "the answer is being judged against" describes a reference.
_EVALUATED = re.compile(rf"\b(?:{'|'.join(EVALUATED_MARKERS)})\s*(?:[.;,:)]|$)")


def evaluated_field(rubric: Rubric) -> str | None:
    """The rubric input holding the evaluated (generated) text: the one input whose
    description says it is "being evaluated" (or "being judged"), the words ending a
    sentence or clause; None when there is not exactly one."""
    found = [name for name, spec in rubric.inputs.items()
             if _EVALUATED.search((spec.description or "").lower())]
    return found[0] if len(found) == 1 else None


def _candidates(recorded: str, results_path: Path) -> list[Path]:
    path = Path(recorded)
    return [path] if path.is_absolute() else list(dict.fromkeys(
        [results_path.parent / path, path]))


def case_fields(records: Iterable[ResultRecord], results_path: Path, rubric: Rubric,
                cases: CaseSource) -> tuple[dict[str, dict[str, str]] | None, str]:
    """(case id -> {input field: text}, a note saying where they came from or why there are
    none) for ``records``, read from ``cases`` (its path, else the one the records name)."""
    records, cases_path = [r for r in records], cases.path
    if cases_path is None:
        named = sorted({r.input_file for r in records if r.input_file})
        if len(named) != 1:
            return None, ("the records name no cases file" if not named else
                          f"the records name {len(named)} cases files") + \
                ": give --cases for the circular-label check and text lengths"
        found = [p for p in _candidates(named[0], Path(results_path)) if p.is_file()]
        if not found:
            return None, (f"cases file {named[0]} (named by the records) not found: give "
                          "--cases for the circular-label check and text lengths")
        cases_path = found[0]
    try:
        items = read_cases(Path(cases_path), rubric, mapping=cases.mapping,
                           id_column=cases.id_column)
    except InputFileError as exc:
        return None, f"cases file cannot be read ({exc}): no circular-label check"
    by_line = {item.line: item for item in items}
    fields: dict[str, dict[str, str]] = {}
    mismatched = 0
    for record in records:
        item = by_line.get(record.input_line) if record.input_line is not None else None
        if isinstance(item, Case) and item.case_id == record.case_id:
            fields[record.case_id] = dict(item.fields)
        else:
            mismatched += 1
    if mismatched:
        return None, (f"cases file {cases_path} does not match the run ({mismatched} "
                      "record(s) name a line holding another case, or an unreadable row): "
                      "give the file the run read with --cases (and its --map, "
                      "--case-id-column)")
    return fields, f"case fields from {cases_path}"
