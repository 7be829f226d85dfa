"""Python and the installed packages against the lock the install came from.

The lock is ``--lock FILE`` or, for an install from an air-gapped bundle (whose venv is
``PREFIX/venv``), the bundle's ``PREFIX/bundle/requirements.txt``, or for a checkout's
``make install`` the copy of ``locks/cpu.txt`` it left in the venv. Requirements are parsed,
and versions compared, by ``packaging``; installed versions come from
``importlib.metadata`` (through the probes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from evaluator.common.errors import UserError
from evaluator.doctor.report import Check, failed, ok, warning

#: A lock larger than this is not a lock (locks/gpu.txt is about 0.5 MB).
MAX_LOCK_BYTES = 16 << 20


class LockError(UserError, ValueError):
    """A lock file named with ``--lock`` cannot be read as a requirements file."""


def bundle_lock(prefix: Path) -> Path | None:
    """The bundle's requirements.txt when this Python is an installed bundle's venv
    (``PREFIX/venv``, see scripts/bundle-install.sh), else None."""
    candidate = Path(prefix).parent / "bundle" / "requirements.txt"
    return candidate if candidate.is_file() else None


#: The copy of the lock ``make install`` leaves in the venv it installed (Makefile).
INSTALLED_LOCK = "evaluator-lock.txt"


def install_lock(prefix: Path) -> Path | None:
    """The lock this Python's packages were installed from: an installed bundle's
    requirements.txt, else the copy ``make install`` left in the venv; None for neither."""
    candidate = Path(prefix) / INSTALLED_LOCK
    return bundle_lock(prefix) or (candidate if candidate.is_file() else None)


def read_lock(path: Path) -> list[Requirement]:
    """The requirements of a pip requirements file (a lock: ``name==version \\`` lines with
    ``--hash`` options and ``#`` comments); :class:`LockError` naming the line when one is
    not a requirement."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_LOCK_BYTES:
            raise LockError(f"{path}: larger than {MAX_LOCK_BYTES >> 20} MiB; not a lock")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{path}: cannot read it ({exc})") from None
    requirements, logical, first = [], "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not logical:
            first = number
        stripped = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical = (logical + stripped).strip()
        if logical and not logical.startswith("-"):
            # Options such as --hash follow the requirement; the marker may hold spaces.
            spec = re.split(r"\s+--?[a-z]", logical, maxsplit=1)[0]
            try:
                requirements.append(Requirement(spec))
            except InvalidRequirement:
                raise LockError(f"{path} line {first}: not a requirement") from None
        logical = ""
    if not requirements:
        raise LockError(f"{path}: no requirements in it; give a lock such as locks/cpu.txt")
    return requirements


def check_python(version: str, lock: Path | None) -> Check:
    """This Python's version; failed when an installed bundle was built for another one
    (its BUNDLE.json beside the lock says which)."""
    meta = lock.parent / "BUNDLE.json" if lock is not None else None
    wanted = None
    if meta is not None and meta.is_file():
        try:
            wanted = str(json.loads(meta.read_text(encoding="utf-8")).get("python") or "")
        except (OSError, ValueError, AttributeError):
            wanted = None
    if wanted:
        if ".".join(version.split(".")[:2]) != wanted:
            return failed("python", f"Python {version}, but the bundle's wheels are for "
                          f"Python {wanted}: install the bundle again with --python "
                          f"python{wanted}", version=version, bundle_python=wanted)
        return ok("python", f"Python {version} (the bundle's {wanted})", version=version,
                  bundle_python=wanted)
    return ok("python", f"Python {version}", version=version)


def check_packages(requirements: list[Requirement] | None, lock: Path | None,
                   installed: Callable[[str], str | None], note: str | None = None) -> Check:
    """Every requirement of the lock that applies here against the installed version:
    failed naming the first few that are missing or differ. ``requirements`` None: no lock
    (``note`` says why), a warning saying how to give one."""
    if requirements is None or lock is None:
        return warning("packages", note or "not checked: no lock (give --lock FILE)")
    missing, differ, checked = [], [], 0
    for requirement in requirements:
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        checked += 1
        have = installed(requirement.name)
        if have is None:
            missing.append(requirement.name)
            continue
        try:
            matches = requirement.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            matches = False
        if not matches:
            differ.append(f"{requirement.name} {have} (lock {requirement.specifier})")
    if not missing and not differ:
        return ok("packages", f"all {checked} packages match {lock}", lock=str(lock),
                  checked=checked)
    problems = differ + [f"{name} missing" for name in missing]
    shown = ", ".join(problems[:3]) + (f" and {len(problems) - 3} more" if len(problems) > 3
                                       else "")
    return failed("packages", f"{len(problems)} of {checked} packages differ from {lock}: "
                  f"{shown}. Something was installed over the lock: reinstall (a bundle: "
                  "install.sh into a new prefix; a checkout: make install)",
                  lock=str(lock), checked=checked, missing=missing, differ=differ)
