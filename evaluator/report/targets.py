"""Where a file made from results files (the HTML report, a Parquet export) may be written:
never over one of its own inputs (the results files, the case files their records name or
their manifests' input hashes name), never through a symbolic link, only to a name with the
file's own suffix, and over an existing file only when this tool wrote it (or with
``--overwrite``). The write itself is :func:`evaluator.data.files.atomic_writer` (mode 0600,
a temporary file renamed into place)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator.data.files import OutputRefused, refuse_unsafe_target, same_file
from evaluator.run.manifest import recorded_input_hashes, sha256_file


@dataclass(frozen=True)
class Target:
    """What a command writes: ``kind`` names it in messages (``report``), ``option`` is the
    option that names the file (``--html``), ``suffixes`` are the endings it may have
    (lower case), and ``is_ours`` tells a file this tool wrote of that kind."""

    kind: str
    option: str
    suffixes: tuple[str, ...]
    is_ours: Callable[[Path], bool]


def refuse_inputs(output: Path, sources: Iterable[Path], target: Target) -> None:
    """Refuse ``output`` when it is one of ``sources`` (by path or inode)."""
    for source in sources:
        if same_file(output, source):
            raise OutputRefused(f"{output} is one of the {target.kind}'s own inputs ({source}); "
                                f"choose another {target.option} file")


def case_files(results_path: Path, input_files: Iterable[str]) -> set[Path]:
    """The case files named by the records of ``results_path`` (their ``input_file``) that
    exist; a relative name both as given (this process's current directory) and relative to
    the results file's folder (where the run may have been started). A name under which no
    file exists is left out: nothing there can be overwritten, and a new output may well
    take it (cases.parquet judged into out/cases.jsonl, exported to out/cases.parquet)."""
    folder = Path(results_path).parent
    found: set[Path] = set()
    for name in input_files:
        path = Path(name)
        found.update(p for p in ([path] if path.is_absolute() else [path, folder / path])
                     if p.exists())
    return found


def refuse_recorded_input(output: Path, results: Sequence[Path], target: Target) -> None:
    """Refuse an existing ``output`` whose content is a case file a run read (its SHA-256 is
    in a manifest), wherever it lies now."""
    if not output.is_file() or output.is_symlink():
        return
    recorded = set().union(*(recorded_input_hashes(path) for path in results))
    if recorded and sha256_file(output) in recorded:
        raise OutputRefused(f"{output} is a case file one of the runs read (its SHA-256 is in "
                            f"the manifest); choose another {target.option} file")


def check_name(output: Path, sources: Sequence[Path], target: Target) -> None:
    """Refuse to write ``output`` over one of ``sources``, under a name without the
    target's suffix, or through a symbolic link or over something not a regular file of
    this user."""
    refuse_inputs(output, sources, target)
    if output.suffix.lower() not in target.suffixes:
        # Results, companions, locks and configs all have other suffixes: a file that may
        # only have the target's own suffix can never replace one of them.
        raise OutputRefused(f"{output}: the {target.kind} is written to a file ending in "
                            f"{' or '.join(target.suffixes)}; choose another "
                            f"{target.option} name")
    refuse_unsafe_target(output)


def check_replace(output: Path, overwrite: bool, target: Target) -> None:
    """Refuse to replace an existing ``output`` this tool did not write (unless
    ``overwrite``)."""
    if output.exists() and not overwrite and not target.is_ours(output):
        raise OutputRefused(f"{output} exists and is not a {target.kind} written by "
                            "evaluator; refusing to replace it (pass --overwrite to replace "
                            "it anyway)")


def check_target(output: Path, sources: Sequence[Path], overwrite: bool,
                 target: Target) -> None:
    """:func:`check_name`, then :func:`check_replace`."""
    check_name(output, sources, target)
    check_replace(output, overwrite, target)
