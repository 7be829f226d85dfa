"""The host beyond the GPU: free disk where outputs go, and the offline switches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from evaluator.doctor.report import Check, failed, gib, ok, warning
from evaluator.judges.offline import OFFLINE_ENV

#: Below this much free space where outputs go, the disk check warns (a results file takes
#: a few KB per case; the llguidance cache a few MB per judge).
MIN_FREE_DISK = 1 << 30


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (an output folder not made yet)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(output_dir: Path, disk_free: Callable[[Path], int],
               writable: Callable[[Path], bool], threshold: int = MIN_FREE_DISK) -> Check:
    """Free space on the file system of ``output_dir`` (or of the folder it would be made
    in); failed when nothing can be written there, a warning under ``threshold``."""
    where = _existing(output_dir)
    if not where.is_dir():
        return failed("disk", f"{where} is not a folder: give --output-dir a folder")
    if not writable(where):
        return failed("disk", f"cannot write in {where}: run where you may write, or give "
                      "--output-dir (and the run's --output) a folder you own", path=str(where))
    free = disk_free(where)
    data = {"path": str(where), "free": free, "threshold": threshold}
    if free < threshold:
        return warning("disk", f"only {gib(free)} free in {where}: free some space or write "
                       "outputs elsewhere (--output-dir here, --output for the run)", **data)
    # `where` is absolute: compare it with the folder given made absolute too, or `.` (the
    # default) would read as a folder that does not exist yet.
    made = ("" if where == Path(output_dir).absolute()
            else f" ({output_dir} does not exist yet: it would be made there)")
    return ok("disk", f"{gib(free)} free in {where}{made}", **data)


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def same_switch(value: str, forced: str) -> bool:
    """Whether an inherited ``value`` means what the forced one does (``true`` and ``1``
    alike, as the libraries read them)."""
    a, b = value.strip().lower(), forced.lower()
    return a == b or (a in _TRUE and b in _TRUE) or (a in _FALSE and b in _FALSE)


def check_offline(environ: Mapping[str, str], inherited: Mapping[str, str | None],
                  hub_offline: bool | None) -> Check:
    """The offline and no-telemetry switches (evaluator/judges/offline.py): failed unless
    every one is in force in this process (huggingface_hub included, which reads
    HF_HUB_OFFLINE when it is imported); a warning when the user's environment set one
    otherwise (every evaluator command overrides it, but other tools on the host do not)."""
    wrong = [f"{key}={environ[key]}" if key in environ else f"{key} unset"
             for key, value in OFFLINE_ENV.items() if environ.get(key) != value]
    if wrong:
        return failed("offline", f"{len(wrong)} offline switches are not in force here "
                      f"({', '.join(wrong[:3])}): call evaluator.judges.offline.force_offline() "
                      "before importing any model library", unset=wrong)
    if hub_offline is False:
        return failed("offline", "huggingface_hub was imported before HF_HUB_OFFLINE=1 was "
                      "set, so it may reach the hub: call "
                      "evaluator.judges.offline.force_offline() before importing it")
    overridden = {key: value for key, value in inherited.items()
                  if value is not None and key in OFFLINE_ENV
                  and not same_switch(value, OFFLINE_ENV[key])}
    if overridden:
        shown = ", ".join(f"{key}={value}" for key, value in list(overridden.items())[:3])
        more = f" and {len(overridden) - 3} more" if len(overridden) > 3 else ""
        return warning("offline", f"your environment sets {shown}{more}; evaluator forces "
                       f"{', '.join(f'{k}={OFFLINE_ENV[k]}' for k in list(overridden)[:3])}, "
                       "but other tools on this host inherit yours: unset them (e.g. in "
                       "~/.bashrc)", overridden=overridden)
    return ok("offline", f"all {len(OFFLINE_ENV)} offline and no-telemetry switches in force "
              "(HF_HUB_OFFLINE=1, VLLM_NO_USAGE_STATS=1, ...)")
