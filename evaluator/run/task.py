"""What a run is asked to do, in three objects that name the concepts: a :class:`Task` (what
to judge: the cases and the rubric), a :class:`Judge` (which judge, and how it samples) and
:class:`RunOptions` (how to run: where the results go, resume or start afresh, which engine,
progress callbacks). :func:`evaluator.run.runner.evaluate` takes one of each; the CLI builds
them from its options. :class:`RunStart` is what ``RunOptions.on_start`` is told.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.judges.backends import Backend
from evaluator.judges.backends.torch_threads import ThreadChoice, Threads
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.rubric import Rubric
from evaluator.run.engines import RayOptions


@dataclass(frozen=True)
class Task:
    """What to judge: every case of ``input_path`` (``.jsonl`` or ``.csv``) against a rubric.

    ``rubric``: a name (searched in ``rubrics_dirs``, then the built-ins in ``prompts/``), a
    ``.yaml`` path, or a loaded :class:`Rubric`. ``mapping`` reads rubric input FIELD from
    another column (``{"generated_report": "model_output"}``); ``id_column`` holds the case
    id (rows without one get ``line-N``); ``limit`` judges only the first N cases.
    """

    rubric: str | Path | Rubric
    input_path: Path
    rubrics_dirs: Sequence[Path] = ()
    mapping: Mapping[str, str] | None = None
    id_column: str = "case_id"
    limit: int | None = None
    # Pairwise rubrics: ``versus`` is a second case file with the same case ids, whose
    # ``answer_column`` is candidate B (``input_path``'s is candidate A); ``systems`` names
    # the two candidates (default: the two files' names, or the two candidate columns').
    versus: Path | None = None
    answer_column: str | None = None
    systems: tuple[str, str] | None = None


@dataclass(frozen=True)
class Judge:
    """Which judge, and how it samples.

    ``name``: a judge of ``models_path`` (default: the project's ``models.yaml``), or None
    for that file's default. ``spec`` (a :class:`JudgeSpec`) replaces the models.yaml entry
    (its name then defaults to ``custom``), and ``backend`` a ready backend (e.g. the fake
    one in tests; the local engine only). ``samples`` > 1 judges each case that many times
    (self-consistency, needs a temperature above 0: ``temperature`` or the judge's own) and
    ``reduce`` (``median``, ``mean`` or ``majority``; None: median, or a jury's own) makes
    the samples' (or a jury's) verdicts one. ``threads`` (``--threads``: a count or
    ``"auto"``) replaces the judge's ``threads`` in models.yaml: torch's thread count for a
    CPU judge (docs/running.md, "Threads"; an ``OMP_NUM_THREADS`` in the environment wins).
    """

    name: str | None = None
    models_path: Path | None = None
    spec: JudgeSpec | None = None
    backend: Backend | None = None
    samples: int = 1
    temperature: float | None = None
    reduce: str | None = None
    threads: Threads | None = None


@dataclass(frozen=True)
class RunStart:
    """What the run found before judging: shown by the CLI, sizes its progress bar."""

    valid: int
    input_errors: int
    already_done: int
    retried: int
    to_judge: int
    moved_aside: list[Path]
    null_ids: int = 0  # rows whose case id was null, named line-N after their line


@dataclass(frozen=True)
class RunOptions:
    """How to run.

    ``output_path``: the results ``.jsonl`` (an existing one is resumed; ``force_new`` moves
    it aside and starts again); ``summary.json`` and ``manifest.json`` are written beside it.
    ``batch_size``: cases per generate call (default: the judge's). ``strict``: the first
    case that cannot be judged stops the run (:class:`evaluator.run.judging.InputRejected`).
    ``engine``: ``local`` (this process) or ``ray`` (judge replicas on a Ray cluster, set up
    by ``ray``). ``on_start`` is called once the input is validated (sizes a progress bar);
    ``on_threads``, with the local engine, once a judge that computes on the CPU has loaded,
    with torch's thread count and why (:class:`ThreadChoice`: the run's header says it);
    ``progress`` with the number of cases each time some are recorded. The run holds the
    output's lock (``<stem>.evaluator-lock``) from plan to summary: another run on the same
    output raises :class:`evaluator.data.files.OutputBusy`, or with ``wait`` waits for it.
    """

    output_path: Path
    batch_size: int | None = None
    force_new: bool = False
    strict: bool = False
    engine: str = "local"
    ray: RayOptions | None = None
    wait: bool = False
    on_start: Callable[[RunStart], None] | None = field(default=None, compare=False)
    on_threads: Callable[[ThreadChoice], None] | None = field(default=None, compare=False)
    progress: Callable[[int], None] | None = field(default=None, compare=False)
