"""The judge's folder: where it is (without preparing or building anything), the run's own
model-folder check, and its files against their weight list (``evaluator models --verify``)."""

from __future__ import annotations

from pathlib import Path

from evaluator.doctor.cuda import JudgeUse
from evaluator.doctor.report import Check, failed, ok, warning
from evaluator.judges.embedded_judge import embedded_judge_dir, embedded_judge_ready
from evaluator.judges.model_folder import is_complete
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.tiny_random import tiny_random_dir
from evaluator.judges.weights import (
    WEIGHTS_FILE,
    Progress,
    WeightListError,
    folder_bytes,
    verify_weights,
    weight_list_summary,
)
from evaluator.run.preflight import ModelFolderError, check_model_folder


def judge_folder(spec: JudgeSpec) -> tuple[Path | None, str | None]:
    """The folder the judge loads, or None with why: the embedded judge when prepared, the
    tiny random model when built (both otherwise made on first use), ``path`` as given."""
    if spec.path is not None:
        return Path(spec.path), None
    if spec.embedded is not None:
        folder = embedded_judge_dir()
        return (folder, None) if embedded_judge_ready(folder) else (None, "not prepared")
    if spec.backend_info.weights == "built":
        folder = tiny_random_dir()
        return (folder, None) if is_complete(folder) else (None, "built on first use")
    return None, "no model"


def check_weights(use: JudgeUse, spec: JudgeSpec, folder: Path | None, why: str | None,
                  *, rehash: bool = True, progress: Progress | None = None) -> Check:
    """The folder loads (the run's preflight check) and matches its evaluator-weights.json:
    every byte re-hashed, or with ``rehash`` False names and sizes only. No list is a
    warning: nothing says these are the files that were shipped."""
    if folder is None:
        if why == "not prepared":
            return failed("weights", f"the default judge {use.name} is not prepared: run "
                          "evaluator prepare-judge (make judge)")
        if why == "built on first use":
            return ok("weights", f"{use.name} is built on first use (about 1 MB)")
        return ok("weights", f"no weights (the {use.backend} judge)")
    try:
        check_model_folder(use.name, folder)
    except ModelFolderError as exc:
        return failed("weights", str(exc), path=str(folder))
    embedded = spec.embedded is not None and spec.path is None
    if not (folder / WEIGHTS_FILE).is_file():
        where = ("the default judge gets one when prepared: evaluator prepare-judge --force"
                 if embedded else "a judge from a bundle has one (docs/airgapped.md)")
        return warning("weights", f"{folder}: no weight list ({WEIGHTS_FILE}), so nothing "
                       f"confirms these are the files shipped; {where}", path=str(folder))
    try:
        size = folder_bytes(folder)
        if rehash:
            problems = verify_weights(folder, progress=progress)
        else:
            summary = weight_list_summary(folder) or {}
            problems = ([] if summary.get("names_and_sizes_match")
                        else [summary.get("problem") or "file names or sizes differ"])
    except (WeightListError, OSError) as exc:
        return failed("weights", f"{exc}: copy the judge's folder again from its bundle",
                      path=str(folder))
    data = {"path": str(folder), "bytes": size, "rehashed": rehash}
    if problems:
        shown = "; ".join(problems[:3]) + (f" and {len(problems) - 3} more"
                                           if len(problems) > 3 else "")
        again = ("Prepare it again: evaluator prepare-judge --force" if embedded else
                 "Copy the judge's folder again from its bundle, then evaluator models "
                 f"--verify {use.name}")
        return failed("weights", f"{folder} does not match its {WEIGHTS_FILE}: {shown}. "
                      f"{again}", problems=problems, **data)
    how = "re-hashed" if rehash else "names and sizes only; drop --quick to re-hash"
    return ok("weights", f"all files in {folder} ({size / 1e6:.0f} MB) match its "
              f"{WEIGHTS_FILE} ({how})", **data)
