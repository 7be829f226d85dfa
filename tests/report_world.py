"""Two synthetic systems for the HTML report's decision tests: A and B answer the same
``n`` questions (trial_eligibility verdicts, case ids ``q-0000``...), B's answers are truly
better (clinicians' labels drawn from a higher distribution), and each system's judge is
biased upwards (A by +0.5, B by +0.2). The clinicians' true label of every case is kept, so
the true means and their difference are known.

Each system's labels come the way a hospital gets them: ``evaluator review --design random``
draws a blind sheet (the same ``--n`` and ``--seed`` for both, so the difference is paired),
two clinicians (``ana``, ``ben``) share it with an overlap, and their labels go to the
sheet's journal as the labelling page saves them (``ana``: the truth; ``ben``: off by one on
every fourth case). Or, as a plain labels file: a filled copy of the sheet's review.csv.
Clearly synthetic: no case text (the reasoning fields hold a marker that must never be
shown)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.sheet import JournalEntry, append_label, now, read_sheet_info
from evaluator.rubrics.load import load_rubric
from tests.label_world import SECRET, fill_sheet, world, write_results

# Label distributions over 1..5: A's answers are worse than B's.
LABEL_P = {"A": (0.15, 0.25, 0.3, 0.2, 0.1), "B": (0.02, 0.08, 0.25, 0.35, 0.3)}
BIAS = {"A": 0.5, "B": 0.2}
SEED = {"A": 11, "B": 12}
CRITERIA = ("accuracy", "clarity")
LABELLERS = ("ana", "ben")
__all__ = ["SECRET", "System", "two_systems"]


@dataclass
class System:
    """One system's results file, its sheet folder, a filled labels CSV, and the truth."""

    name: str
    results: Path
    sheet: Path
    labels_csv: Path
    truth: dict[str, int]

    @property
    def true_mean(self) -> float:
        return statistics.fmean(self.truth.values())


def _invoke(*args) -> str:
    run = CliRunner().invoke(cli, [str(a) for a in args])
    assert run.exit_code == 0, run.output
    return run.output


def _ben(value: int, i: int) -> int:
    return value if i % 4 else (value - 1 if value > 1 else value + 1)


def _label_sheet(sheet: Path, truth: dict[str, int]) -> None:
    info = read_sheet_info(sheet)
    rubric_hash = load_rubric(info.rubric).source_sha256
    for labeller in LABELLERS:
        for i, case in enumerate(info.assignment.get(labeller, ())):
            value = truth[case] if labeller == "ana" else _ben(truth[case], i)
            for criterion in info.criteria:
                append_label(sheet, JournalEntry(
                    labeller=labeller, time=now(), case_id=case, criterion=criterion,
                    value=value, sheet=info.fingerprint, rubric_hash=rubric_hash))


def two_systems(folder: Path, *, n: int = 600, labelled: int = 60,
                overlap: float = 0.5, criteria: tuple[str, ...] = CRITERIA,
                ) -> dict[str, System]:
    """Systems A and B (see the module docstring) under ``folder``, their sheets rating
    ``criteria``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in ("A", "B"):
        records, truth = world(n, seed=SEED[name], bias=BIAS[name], prefix="q",
                               label_p=LABEL_P[name])
        results = write_results(folder / f"{name}.jsonl", records)
        sheet = folder / f"sheet-{name}"
        options = [word for key in criteria for word in ("--criterion", key)]
        _invoke("review", results, "--out", sheet, "--design", "random", "--n", labelled,
                "--seed", 7, *options, "--labeller", LABELLERS[0], "--labeller",
                LABELLERS[1], "--overlap", overlap)
        _label_sheet(sheet, truth)
        labels_csv = fill_sheet(sheet / "review.csv", folder / f"{name}.labels.csv", truth)
        out[name] = System(name, results, sheet, labels_csv, truth)
    return out
