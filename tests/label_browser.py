"""The labelling server as a subprocess (``python -m evaluator label``) for the tests that
need a real one (TLS, the browser tests, the bundle), and Playwright's Chromium when both
are there (the system Chromium of tests/browser.py; no browser download)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from typing_extensions import Self

from tests.browser import find_chromium

ROOT = Path(__file__).resolve().parent.parent
# The docs' screenshots: written by the browser tests with EVALUATOR_DOC_SCREENSHOTS=1.
IMAGES = ROOT / "docs" / "images"
URL = re.compile(r"^\s+(https?://\S+/l/[A-Za-z0-9_-]+/)$")
# "  ana (13 cases):"; a study's "  ana (26 items):"
NAME = re.compile(r"^  (\S.*) \((\d+) (?:cases?|items?)\):$")


class Server:
    """``evaluator label SHEET --labeller ...`` started in a subprocess; :attr:`urls`:
    labeller -> her URL, read from what it printed."""

    def __init__(self, sheet: Path, labellers: list[str], *extra: str,
                 command: list[str] | None = None, env: dict[str, str] | None = None,
                 timeout: float = 60):
        args = [*(command or [sys.executable, "-m", "evaluator"]), "label", str(sheet)]
        for name in labellers:
            args += ["--labeller", name]
        self.process = subprocess.Popen(
            [*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=ROOT, env=env or {**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True)
        self.urls: dict[str, str] = {}
        self.printed: list[str] = []
        self.stderr: str | None = None
        deadline = time.monotonic() + timeout
        name = None
        while len(self.urls) < len(labellers):
            line = self.process.stdout.readline() if self.process.stdout else ""
            if not line:
                err = self.process.stderr.read() if self.process.stderr else ""
                raise RuntimeError(f"the label server stopped: {err.strip()}")
            self.printed.append(line.rstrip("\n"))
            found = URL.match(line.rstrip("\n"))
            if found and name is not None:
                self.urls[name] = found.group(1)
            elif NAME.match(line.rstrip("\n")):
                name = NAME.match(line.rstrip("\n")).group(1)  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise TimeoutError("the label server printed no URLs")

    @property
    def url(self) -> str:
        return next(iter(self.urls.values()))

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut would."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> str:
        """Ctrl-C (SIGINT); returns what it wrote to stderr."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.stderr is None:
            self.stderr = self.process.stderr.read() if self.process.stderr else ""
            for stream in (self.process.stdout, self.process.stderr):
                if stream:
                    stream.close()
        return self.stderr

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def playwright_or_reason() -> tuple[object | None, str | None]:
    """(sync_playwright, None), or (None, why the browser tests are skipped)."""
    if find_chromium() is None:
        return None, "no Chromium (make chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, "playwright is not installed (pip install 'evaluator[test]')"
    return sync_playwright, None


def launch(playwright):
    """Headless system Chromium through Playwright (no Playwright browser download)."""
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    return playwright.chromium.launch(executable_path=find_chromium(), headless=True,
                                      args=args)


@contextmanager
def chromium() -> Iterator:
    """A headless system Chromium (:func:`launch`) for one module's browser tests."""
    sync_playwright, reason = playwright_or_reason()
    if sync_playwright is None:
        raise RuntimeError(reason)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


def doc_screenshot(page, name: str, *, full_page: bool = False) -> None:
    """With EVALUATOR_DOC_SCREENSHOTS=1, ``page``'s screenshot as docs/images/NAME.png."""
    if os.environ.get("EVALUATOR_DOC_SCREENSHOTS") == "1":
        IMAGES.mkdir(exist_ok=True)
        page.screenshot(path=str(IMAGES / f"{name}.png"), full_page=full_page)
