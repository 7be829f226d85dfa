"""Headless Chromium for the HTML report's tests: a screenshot and the page's console.

Chromium started with ``--enable-logging=stderr --v=0`` writes every console message of the
page to stderr as ``...:INFO:CONSOLE:<line>] "<message>", source: <url> (<line>)``: uncaught
exceptions, ``console.*`` calls and Content-Security-Policy refusals alike (all at level
INFO, so the level cannot tell an error from a log). The report has no JavaScript, so any
console line at all counts as a problem. tests/test_report.py proves the check catches a
broken script and a refused network load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
                  "chrome")
# Phrases Chromium uses for page problems; matched as well as the CONSOLE tag in case a
# build logs them differently.
PROBLEM_PHRASES = ("Uncaught", "Refused to", "violates the following Content Security Policy",
                   "Failed to load resource", "net::ERR_")


def find_chromium() -> str | None:
    """``$EVALUATOR_CHROMIUM`` or the first Chromium/Chrome on PATH."""
    explicit = os.environ.get("EVALUATOR_CHROMIUM")
    if explicit:
        return explicit
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@dataclass
class Rendered:
    """One headless page load: the screenshot and what the page said on its console."""

    png: Path
    returncode: int
    console: list[str]
    stderr: str


def render(html: Path, png: Path, *, width: int = 1280, height: int = 4000,
           timeout: float = 120) -> Rendered:
    """Load ``html`` from disk in headless Chromium and screenshot it to ``png``."""
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium binary")
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        command = [exe, "--headless", "--disable-gpu", "--no-first-run",
                   "--no-default-browser-check", "--disable-extensions",
                   "--disable-background-networking", "--disable-component-update",
                   "--hide-scrollbars", f"--user-data-dir={profile}",
                   "--enable-logging=stderr", "--v=0", f"--window-size={width},{height}",
                   f"--screenshot={png}", Path(html).resolve().as_uri()]
        if os.geteuid() == 0:  # Chromium refuses to run its sandbox as root
            command.insert(1, "--no-sandbox")
        done = subprocess.run(command, check=False, capture_output=True, text=True,
                              timeout=timeout, errors="replace")
    console = [line for line in done.stderr.splitlines()
               if ":CONSOLE" in line or any(p in line for p in PROBLEM_PHRASES)]
    return Rendered(Path(png), done.returncode, console, done.stderr)
