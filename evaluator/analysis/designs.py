"""Label designs: which cases a clinician labels, drawn with known probabilities, and the
design read back from a labels file (a filled-in worksheet).

``evaluator review --design``:

* ``priority`` - the cases most worth a label (:mod:`evaluator.analysis.review.signals`:
  lowest confidence, disagreeing verdicts, nearest a gate). They are chosen *for being hard*,
  with no known probability: figures from their labels describe those cases, not the run.
* ``random`` - a simple random sample of ``n`` of the ``N`` cases, without replacement:
  every case has inclusion probability pi = n/N. Drawn from the sorted case ids with
  ``numpy.random.default_rng(seed)``, so two results files of the same cases (two systems)
  with the same ``n`` and seed give the same cases: a paired sample.
* ``active`` - Poisson sampling (active statistical inference, Zrnic & Candes 2024): each
  case is drawn independently with probability pi_i = min(1, c * ((1 - floor) * u_i / mean(u)
  + floor)), u_i the judge's uncertainty on the criterion (the standard deviation of its
  score distribution; the largest over an items criterion's items; 0 without a
  distribution), c set so the pi sum to ``n`` (the expected sample size). It is a mixture:
  a share ``floor`` of the draw is uniform, the rest follows the uncertainty, so every case
  keeps at least ``floor`` * n/N and no weight 1/pi exceeds 1/floor times a random sheet's.
  The default floor, :data:`DEFAULT_FLOOR` = 0.6, keeps the 95% CIs covering where the
  judge is confidently wrong (docs/statistics.md has the figures): at 0.2, the few labels
  on the judge's sure cases weighed up to 5 times a random sheet's, and carried too much.

Every worksheet row carries :data:`DESIGN_COLUMNS`: the design, the row's inclusion
probability (empty for ``priority``), and the draw's population size N, criterion, seed,
floor and a SHA-256 of the population's sorted case ids (so an estimate can check it is made
over the cases the sheet was drawn from). :func:`read_design` reads them back.

numpy is imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.distributions import criterion_paths
from evaluator.analysis.intervals import kish_n_eff
from evaluator.analysis.label_files import AgreementError, label_number, label_rows
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion

DESIGNS = ("priority", "random", "active")
WITH_PROBABILITIES = ("random", "active")
# The share of an active draw spread uniformly (the defensive mixture): 0.6 since issue 34
# (0.2 before; a sheet records the floor it was drawn with, so older sheets still re-check).
DEFAULT_FLOOR = 0.6
DESIGN_COLUMNS = ("design", "inclusion_probability", "design_population", "design_n",
                  "design_criterion", "design_seed", "design_floor", "design_files",
                  "design_population_sha256")
# Every worksheet row since issue 37: the SHA-256 of the results files it was drawn from
# (joined by ";"), so an estimate can tell labels of another system's answers on a blind sheet.
RESULTS_SHA256 = "results_sha256"
MIN_FLOOR = 0.01
# Below it a probability is no draw of review's (whose floor keeps pi >= 0.01 n/N) and 1/pi
# overflows what the estimators can weigh.
MIN_PROBABILITY = 1e-9
# The columns every worksheet of `evaluator review` had before designs: a labels file with
# them and no design column is a priority sheet.
LEGACY_REVIEW_COLUMNS = ("rank", "reason", "min_confidence", "max_spread", "gate_margin")
PRIORITY_WARNING = (
    "WARNING: these labels come from a 'priority' worksheet (evaluator review): its cases "
    "were chosen for being hard (low judge confidence, disagreeing verdicts, near a pass "
    "gate), so every figure below describes those cases, not the run. For figures about the "
    "run, label a sheet drawn with known probabilities: evaluator review --design random "
    "(or active)")
# Kish's effective n of the labelled cases' weights below this share of their number: the
# weights are too uneven for a normal interval, said in a warning (docs/statistics.md).
UNEVEN_WEIGHTS = 0.5


class DesignError(AgreementError):
    """A design that cannot be drawn or read back (bad columns, mixed designs, a draw from
    other cases); the message names the file, line and column, never a case id."""


def uneven_weights_warning(weights: Sequence[float]) -> str | None:
    """A warning when the design weights 1/pi of the labelled cases are too uneven for a
    normal 95% interval: Kish's effective n, (sum w)^2 / sum w^2, below
    :data:`UNEVEN_WEIGHTS` of their number. A few heavily weighted labels then carry the
    figure; where the judge is confidently wrong on the cases they stand for, the interval
    covered less than 95% in simulation. None when the weights are even enough. The text
    has no "WARNING: " of its own: each command prints its warnings its way."""
    n = len(weights)
    if n < 2:
        return None
    n_eff = kish_n_eff(weights)
    if n_eff >= UNEVEN_WEIGHTS * n:
        return None
    return (f"the {n} labelled cases' weights 1/pi are uneven (from "
            f"{min(weights):.3g} to {max(weights):.3g}): Kish's effective n is {n_eff:.1f}, "
            f"under {UNEVEN_WEIGHTS:.0%} of them, so a few heavily weighted labels carry the "
            "figures and their 95% CIs may cover less than 95% (in simulation 87-93% where "
            "the judge is confidently wrong). Draw the next sheet with a higher --floor "
            f"(default {DEFAULT_FLOOR}), or --design random")


def population_fingerprint(case_ids: Sequence[str]) -> str:
    """SHA-256 of the sorted, distinct case ids, one per line: which cases a draw was from
    (the ids themselves are never written to the sheet's design columns)."""
    text = "\n".join(sorted(set(case_ids)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Draw:
    """A draw: the drawn case ids (sorted) and every population case's probability."""

    design: str
    chosen: list[str]
    probabilities: dict[str, float]
    population: int
    population_sha256: str
    criterion: str | None = None
    seed: int | None = None
    floor: float | None = None
    n: int | None = None
    files: int = 1
    notes: list[str] = field(default_factory=list)

    def columns(self, case_id: str) -> dict[str, Any]:
        """The design columns of ``case_id``'s worksheet row."""
        return {"design": self.design,
                "inclusion_probability": self.probabilities.get(case_id),
                "design_population": self.population, "design_n": self.n,
                "design_criterion": self.criterion, "design_seed": self.seed,
                "design_floor": self.floor, "design_files": self.files,
                "design_population_sha256": self.population_sha256}


def random_draw(case_ids: Sequence[str], n: int, seed: int) -> Draw:
    """A simple random sample of ``min(n, N)`` of the distinct ``case_ids`` (pi = n/N)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    population = sorted(set(case_ids))
    if not population:
        raise DesignError("no judged case to draw from")
    size = min(n, len(population))
    rng = np.random.default_rng(seed)
    picked = sorted(population[i] for i in rng.choice(len(population), size=size,
                                                      replace=False))
    pi = size / len(population)
    notes = ([(f"--n {n} is more than the {len(population)} judged cases: every case is on "
               "the sheet")] if n > len(population) else [])
    return Draw("random", picked, {c: pi for c in population}, len(population),
                population_fingerprint(population), seed=seed, n=n, notes=notes)


def inclusion_probabilities(uncertainty: Sequence[float], n: float,
                            floor: float = DEFAULT_FLOOR) -> list[float]:
    """pi_i = min(1, c * ((1 - floor) * u_i / mean(u) + floor)), with c such that the pi sum
    to ``n`` (at most N; all 1 when n >= N). All u 0: every pi is n/N."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    u = np.asarray(uncertainty, dtype=float)
    size = len(u)
    if size == 0:
        return []
    if not MIN_FLOOR <= floor <= 1:
        raise DesignError(f"--floor must be from {MIN_FLOOR} to 1")
    if np.any(~np.isfinite(u)) or np.any(u < 0):
        raise DesignError("an uncertainty is negative or not finite")
    if n >= size:
        return [1.0] * size
    mean = float(u.mean())
    base = np.full(size, 1.0) if mean == 0 else (1 - floor) * u / mean + floor
    # sum(min(1, c * base)) rises with c from 0 to N: bisect for n (sum(base) = N).
    low, high = 0.0, 1.0 / float(base.min())
    for _ in range(200):
        middle = (low + high) / 2
        if float(np.minimum(1.0, middle * base).sum()) < n:
            low = middle
        else:
            high = middle
    return [float(p) for p in np.minimum(1.0, high * base)]


def active_draw(uncertainty: Mapping[str, float | None], n: int, seed: int, *,
                criterion: str, floor: float = DEFAULT_FLOOR) -> Draw:
    """Poisson sampling of the cases of ``uncertainty`` (case id -> the judge's uncertainty,
    None without a distribution: it gets the floor) with expected size ``n``."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    population = sorted(uncertainty)
    if not population:
        raise DesignError("no judged case to draw from")
    missing = [c for c in population if uncertainty[c] is None]
    values = [uncertainty[c] or 0.0 for c in population]
    probabilities = inclusion_probabilities(values, n, floor)
    rng = np.random.default_rng(seed)
    draws = rng.random(len(population))
    chosen = [c for c, p, r in zip(population, probabilities, draws, strict=True) if r < p]
    notes = []
    if missing:
        notes.append(f"{len(missing)} of the {len(population)} cases have no score "
                     f"distribution on {criterion!r}: they get the floor probability "
                     f"({min(probabilities):.3g})")
    if n >= len(population):
        notes.append(f"--n {n} is at least the {len(population)} judged cases: every case "
                     "is on the sheet")
    return Draw("active", chosen, dict(zip(population, probabilities, strict=True)),
                len(population), population_fingerprint(population), criterion=criterion,
                seed=seed, floor=floor, n=n, notes=notes)


def case_uncertainty(criterion: IntegerCriterion | ItemsCriterion,
                     records: Sequence[ResultRecord]) -> float | None:
    """The judge's uncertainty on ``criterion`` for one case (its ``ok`` records, one per
    results file): the standard deviation of its score distribution, the largest over an
    items criterion's items and over the records; None when none has a distribution."""
    sds = [distribution_sd(record.distributions[path].probabilities)
           for record in records for path in criterion_paths(criterion, record)
           if record.distributions and path in record.distributions]
    return max(sds) if sds else None


def distribution_sd(probabilities: Mapping[Any, float]) -> float:
    """The standard deviation of a score distribution (value -> probability)."""
    total = sum(probabilities.values())
    if total <= 0:
        return 0.0
    mean = sum(float(v) * p for v, p in probabilities.items()) / total
    variance = sum(p * (float(v) - mean) ** 2 for v, p in probabilities.items()) / total
    return math.sqrt(max(variance, 0.0))


@dataclass
class LabelDesign:
    """The design of a labels file: ``kind`` None when it records none (a plain labels
    file), else one of :data:`DESIGNS`; per drawn case id its inclusion probability (None
    for ``priority``); the draw's population size, fingerprint, criterion and seed;
    ``legacy``: a review sheet written before designs (a priority sheet)."""

    kind: str | None
    probabilities: dict[str, float | None] = field(default_factory=dict)
    population: int | None = None
    population_sha256: str | None = None
    criterion: str | None = None
    seed: int | None = None
    n: int | None = None
    files: int = 1
    floor: float | None = None
    legacy: bool = False

    @property
    def known_probabilities(self) -> bool:
        """Whether every drawn case has a known inclusion probability."""
        return self.kind in WITH_PROBABILITIES

    def weight(self, case_id: str) -> float:
        """1/pi of a drawn case (1 without a design with probabilities)."""
        pi = self.probabilities.get(case_id)
        return 1.0 / pi if self.known_probabilities and pi else 1.0

    def describe(self) -> str:
        """One line: what the design is and what figures from its labels describe."""
        if self.kind is None:
            return ("design: none recorded (a plain labels file): the labelled cases are "
                    "taken as they are")
        if self.kind == "priority":
            return ("design: priority (cases chosen for being hard"
                    + (", a worksheet from before designs" if self.legacy else "") + ")")
        drawn = len(self.probabilities)
        if self.kind == "random":
            return (f"design: random, {drawn} of N = {self.population} cases drawn, seed "
                    f"{self.seed}, pi = {drawn}/{self.population}")
        return (f"design: active, {drawn} of N = {self.population} cases drawn with known "
                f"probabilities favouring the judge's uncertain cases on "
                f"{self.criterion!r} (seed {self.seed})")


def _cell(row: Mapping[str, Any], column: str) -> Any:
    value = row.get(column)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _constant(path: Path, rows: Sequence[tuple[int, Mapping[str, Any]]], column: str) -> Any:
    seen: dict[str, int] = {}
    for number, row in rows:
        value = _cell(row, column)
        seen.setdefault(str(value), number)
    if len(seen) > 1:
        first, second = list(seen.values())[:2]
        raise DesignError(f"{path} lines {first} and {second}: column {column!r} differs: "
                          "rows of different draws; give one worksheet's labels at a time")
    return _cell(rows[0][1], column) if rows else None


def _integer(path: Path, line: int, column: str, value: Any) -> int | None:
    if value is None:
        return None
    number = label_number(value)
    if number is None or not number.is_integer() or number < 0:
        raise DesignError(f"{path} line {line}: column {column!r} is not a whole number")
    return int(number)


def read_design(path: Path, id_column: str = "case_id",
                rows: list[tuple[int, dict[str, Any]]] | None = None) -> LabelDesign:
    """The design recorded in a labels file's :data:`DESIGN_COLUMNS` (every row, labelled
    or not: unlabelled rows were drawn too). A file without a ``design`` column records
    none, unless it has the columns of an older review worksheet (then: ``priority``).
    ``rows``: the file's :func:`label_rows`, when the caller has read them already."""
    path = Path(path)
    rows = label_rows(path) if rows is None else rows
    if not rows:
        raise DesignError(f"{path}: no rows")
    if not any("design" in row for _, row in rows):
        others = [c for c in DESIGN_COLUMNS[1:] if any(c in row for _, row in rows)]
        if others:
            raise DesignError(f"{path}: column 'design' is missing but {others[0]!r} is there "
                              "(a worksheet whose design column was deleted): restore it, or "
                              "use the sheet as evaluator review wrote it")
        legacy = all(all(c in row for c in LEGACY_REVIEW_COLUMNS) for _, row in rows)
        return LabelDesign("priority", legacy=True) if legacy else LabelDesign(None)
    kinds: dict[str, int] = {}
    for number, row in rows:
        kind = _cell(row, "design")
        if kind not in DESIGNS:
            raise DesignError(f"{path} line {number}: column 'design' is not one of "
                              f"{', '.join(DESIGNS)}")
        kinds.setdefault(str(kind), number)
    if len(kinds) > 1:
        (a, first), (b, second) = list(kinds.items())[:2]
        raise DesignError(f"{path} lines {first} and {second}: designs {a!r} and {b!r} "
                          "mixed; give one worksheet's labels at a time")
    kind = next(iter(kinds))
    design = LabelDesign(kind)
    if kind == "priority":
        design.probabilities = {str(row.get(id_column)): None for _, row in rows}
        return design
    first_line = rows[0][0]
    design.population = _integer(path, first_line, "design_population",
                                 _constant(path, rows, "design_population"))
    design.seed = _integer(path, first_line, "design_seed", _constant(path, rows, "design_seed"))
    sha = _constant(path, rows, "design_population_sha256")
    design.population_sha256 = None if sha is None else str(sha)
    criterion = _constant(path, rows, "design_criterion")
    design.criterion = None if criterion is None else str(criterion)
    design.n = _integer(path, first_line, "design_n", _constant(path, rows, "design_n"))
    files = _integer(path, first_line, "design_files", _constant(path, rows, "design_files"))
    design.files = files or 1
    floor = label_number(_constant(path, rows, "design_floor"))
    design.floor = floor
    if (design.population is None or design.population_sha256 is None or design.n is None
            or design.seed is None):
        raise DesignError(f"{path}: the {kind} design needs the columns design_population, "
                          "design_n, design_seed and design_population_sha256 (as evaluator "
                          "review writes them)")
    if kind == "active" and (design.criterion is None or floor is None):
        raise DesignError(f"{path}: the active design needs the columns design_criterion and "
                          "design_floor (as evaluator review writes them)")
    for number, row in rows:
        case_id = _cell(row, id_column)
        if case_id is None:
            raise DesignError(f"{path} line {number}: no case id in {id_column!r}")
        pi = label_number(_cell(row, "inclusion_probability"))
        if pi is None or not MIN_PROBABILITY <= pi <= 1:
            raise DesignError(f"{path} line {number}: column 'inclusion_probability' must be "
                              f"a number from {MIN_PROBABILITY:g} to 1 for the {kind} design")
        if str(case_id) in design.probabilities:
            raise DesignError(f"{path} line {number}: a case id appears twice (in "
                              f"{id_column!r})")
        design.probabilities[str(case_id)] = pi
    if len(design.probabilities) > design.population:
        raise DesignError(f"{path}: {len(design.probabilities)} rows but a population of "
                          f"{design.population}: not one draw")
    return design


def redraw_mismatch(design: LabelDesign, population: Sequence[str],
                    uncertainty: Mapping[str, float | None] | None = None) -> str | None:
    """Why a sheet's rows are not the draw its design columns record, or None when they
    are: the draw done again from ``population`` (the ok case ids of the one results file it
    was drawn from) with the recorded n and seed (and, for ``active``, ``uncertainty`` and
    the recorded criterion and floor) must give exactly the sheet's case ids and
    probabilities. Rows deleted, added, or with an id or a probability changed all fail it:
    labels on a hand-edited selection would be estimated as if drawn."""
    if not design.known_probabilities or design.n is None or design.seed is None:
        return None
    if design.kind == "random":
        draw = random_draw(population, design.n, design.seed)
    else:
        if uncertainty is None or design.criterion is None or design.floor is None:
            return None
        draw = active_draw(uncertainty, design.n, design.seed, criterion=design.criterion,
                           floor=design.floor)
    rows = set(design.probabilities)
    if rows != set(draw.chosen):
        missing, extra = len(set(draw.chosen) - rows), len(rows - set(draw.chosen))
        return (f"its rows are not the draw it records ({len(rows)} rows; the draw of n = "
                f"{design.n} with seed {design.seed} has {len(draw.chosen)}: {missing} of "
                f"them missing, {extra} row(s) not in it)")
    changed = sum(1 for c in rows
                  if not math.isclose(float(design.probabilities[c] or 0),
                                      draw.probabilities[c], rel_tol=1e-9, abs_tol=1e-15))
    if changed:
        return f"{changed} row(s) have an inclusion probability that is not the draw's"
    return None
