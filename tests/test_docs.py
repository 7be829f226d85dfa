"""The README and docs/: every relative link resolves (file and, for ``#anchor``, heading),
the README stays a front door (at most 150 lines), and every ``evaluator`` command shown in
the README exists in the CLI with the options it is shown with."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from evaluator.cli.main import cli
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "benchmarks" / "README.md", ROOT / "examples" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.MULTILINE)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text)
            if not re.match(r"^[a-z]+:", target)]  # http(s):, mailto: ...


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_linked_from_the_index():
    index = set(links(ROOT / "docs" / "README.md"))
    missing = [p.name for p in (ROOT / "docs").glob("*.md")
               if p.name != "README.md" and p.name not in index]
    assert not missing, f"docs/README.md does not link {missing}"


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move the details to docs/"


def readme_commands() -> list[list[str]]:
    """Every ``evaluator ...`` command in the README's shell blocks, continuation lines
    joined, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            if words and words[0] == "evaluator":
                commands.append(words[1:])
    return commands


def test_readme_commands_exist_in_the_cli():
    commands = readme_commands()
    assert {c[0] for c in commands} >= {"run", "rubrics", "report", "validate", "models"}
    for words in commands:
        command = cli.commands.get(words[0])
        assert command is not None, f"README shows `evaluator {words[0]}`, which does not exist"
        known = {opt for param in command.params for opt in param.opts + param.secondary_opts}
        shown = {w.partition("=")[0] for w in words[1:] if w.startswith("-")}
        assert shown <= known, f"`evaluator {words[0]}` has no {sorted(shown - known)}"
