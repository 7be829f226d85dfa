"""One typed record of the labels a command was given (``--labels``), whatever they were read
from: :class:`LabelSet`, built once by a reader of :mod:`evaluator.analysis.labels.readers`
(a labels file, a labelling sheet's folder, a Label Studio export) and passed whole to
``agree``, ``estimate``, ``compare`` and ``report``, none of which asks what format it was.

Two shapes of labels, told apart by what the labels say, never by their format:

* **named** (``criteria`` not empty: a sheet, an export): per criterion, case and labeller,
  the label that counts (``ratings``), several labellers per case possible;
* **one column** (``criteria`` empty: a labels file): one label per case in the column
  ``--label-field`` names, rating whichever criteria the command names; read from ``rows``
  by :func:`evaluator.analysis.label_files.load_labels`.

Several labellers on one case: the cases are the sampling units, so each case gives one
label, by a rule that keeps each command's figures valid (:data:`RULES`; docs/statistics.md,
"Labels from a sheet"):

* ``draw`` (``agree``): the label of one of its labellers, drawn per case with a seeded
  hash: the figures are the judge's agreement with *a* clinician, cases independent;
* ``mean`` (``estimate``): the mean of its labellers' labels: the estimand is the mean
  clinician's score, each case once, so PPI++'s CI stays valid;
* ``majority`` (``compare``): the most frequent of A/B/tie, a tie between the labellers'
  choices counted as "tie" (the clinicians could not tell the answers apart).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evaluator.analysis.label_files import AgreementError

RULES = {
    "draw": ("each case counts once, with the label of one of its labellers drawn at random "
             "per case (seed {seed}): the figures are the judge's agreement with a "
             "clinician"),
    "mean": ("each case counts once, with the mean of its labellers' labels: the estimate "
             "is the mean clinician's"),
    "majority": ("each case counts once, with its labellers' majority choice (a tie between "
                 "their choices: tie)"),
}

Ratings = dict[str, dict[str, dict[str, float | str]]]


class LabelSetError(AgreementError):
    """Labels that cannot be used at all (a sheet or export that breaks its own rules); one
    line naming the file or folder and what to do, never a case id or a comment."""


# Kept as the name the sheet's errors have always had.
SheetLabelsError = LabelSetError


@dataclass
class LabelSet:
    """The labels of one ``--labels`` path.

    ``origin``: the path given; ``noun``: what it is, in a sentence ("sheet", "labels
    file", "Label Studio export");
    ``design_path``: the file whose rows (``rows``, with their line numbers) hold the
    drawn cases and their design columns (a sheet's review.jsonl; a labels file itself);
    ``id_column``: the rows' case id column; ``criteria``: the criteria the labels name
    (empty: one column, see the module docstring); ``ratings``: criterion -> case id ->
    labeller -> value of the labels that count; ``kind``: single-answer or pairwise;
    ``blind``: whether the labels were given blind to the judge (None: the source does not
    say; its rows are looked at instead, :mod:`evaluator.analysis.labels.verdict_seen`);
    ``shown``: why the labels were seen beside the judge's verdict, when the reader
    found out (a labels file with the judge's columns); ``judge_seen``: labels saved after
    the verdict was shown; ``cannot_judge``: labels saved
    as "cannot judge" (left out); ``notes``: what the reader had to say."""

    origin: Path
    noun: str
    design_path: Path
    rows: list[tuple[int, dict[str, Any]]]
    id_column: str = "case_id"
    criteria: list[str] = field(default_factory=list)
    ratings: Ratings = field(default_factory=dict)
    kind: Literal["single", "pairwise"] = "single"
    blind: bool | None = None
    shown: str | None = None
    judge_seen: int = 0
    cannot_judge: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def named(self) -> bool:
        """Whether the labels name their criteria (and labellers): a ``--label-field`` is
        then optional, the criterion to read."""
        return bool(self.criteria)

    @property
    def labellers(self) -> list[str]:
        """Everyone with a label that counts, sorted."""
        return sorted({name for cases in self.ratings.values() for by in cases.values()
                       for name in by})

    def criteria_for(self, label_field: str | None, criteria: Sequence[str] = ()) -> list[str]:
        """The criteria compared: ``--label-field`` KEY (or KEY.label), else ``criteria``
        (``--criterion``), else every criterion the labels name; one they do not name is
        refused."""
        wanted = ([label_field.removesuffix(".label")] if label_field else list(criteria)
                  or list(self.criteria))
        unknown = [key for key in wanted if key not in self.criteria]
        if unknown:
            raise LabelSetError(f"{self.origin}: the {self.noun} rates "
                                f"{', '.join(self.criteria)}, not {unknown[0]!r}; give one of "
                                "them as --label-field")
        if label_field and criteria and list(criteria) != wanted:
            raise LabelSetError(f"--criterion {criteria[0]!r} and --label-field "
                                f"{label_field!r} name different criteria; give one")
        return list(dict.fromkeys(wanted))

    @property
    def described(self) -> str:
        """How sentences name the labels: "the sheet DIR"."""
        return f"the {self.noun} {self.origin}"

    def several(self, criterion: str | None = None) -> int:
        """How many cases two or more labellers labelled (on ``criterion``, else any)."""
        keys = [criterion] if criterion else list(self.ratings)
        return len({case for key in keys for case, by in self.ratings.get(key, {}).items()
                    if len(by) >= 2})

    def overlap(self, criterion: str) -> dict[str, dict[str, float | str]]:
        """Case id -> labeller -> label, for the cases two or more labellers labelled."""
        return {case: by for case, by in self.ratings.get(criterion, {}).items()
                if len(by) >= 2}

    def combined(self, criterion: str, rule: str, seed: int = 0) -> dict[str, float | str]:
        """Case id -> its one label on ``criterion`` by ``rule`` (:data:`RULES`)."""
        out: dict[str, float | str] = {}
        for case, by in self.ratings.get(criterion, {}).items():
            names = sorted(by)
            if len(names) == 1:
                out[case] = by[names[0]]
            elif rule == "draw":
                out[case] = by[names[_drawn(seed, case, len(names))]]
            elif rule == "mean":
                out[case] = sum(float(by[n]) for n in names) / len(names)
            else:
                counts = Counter(str(by[n]) for n in names).most_common()
                out[case] = "tie" if len(counts) > 1 and counts[0][1] == counts[1][1] \
                    else counts[0][0]
        return out

    def rows_for(self, criterion: str, rule: str, seed: int = 0,
                 column: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The design rows with ``column`` (default ``KEY.label``) holding each case's one
        label (:meth:`combined`), None where nobody has labelled it yet: the rows of a
        worksheet, for the readers of labels files."""
        labels = self.combined(criterion, rule, seed)
        column = column or f"{criterion}.label"
        return [(line, {**row, column: labels.get(str(row.get(self.id_column)))})
                for line, row in self.rows]

    def rule_line(self, rule: str, seed: int = 0) -> str:
        """One line: who labelled, and how several labellers' labels of a case became one."""
        several = self.several()
        names = self.labellers
        who = (f"{len(names)} labeller(s) ({', '.join(names)})" if len(names) <= 6
               else f"{len(names)} labellers")
        if not several:
            return f"labels from {self.described}: {who}, one per case"
        return (f"labels from {self.described}: {who}; {several} case(s) labelled by "
                f"two or more: {RULES[rule].format(seed=seed)}")


def _drawn(seed: int, case_id: str, count: int) -> int:
    """A labeller's index for ``case_id``, drawn from a hash of the seed and the case: the
    same case gets the same labeller whatever else is on the sheet."""
    digest = hashlib.sha256(f"{seed}\0{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count
