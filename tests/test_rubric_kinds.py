"""Rubric kinds have one home: the kind is chosen once, by name, from the run-side and the
analysis-side registries (evaluator/run/kinds, evaluator/analysis/kinds), which know every
kind a rubric file may declare, and no other module tests a rubric's kind. Read from the
source with ``ast``, as tests/test_layers.py is."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

from evaluator.analysis.kinds import KINDS as ANALYSIS_KINDS
from evaluator.analysis.kinds import AnalysisKind, analysis_kind
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric
from evaluator.run.judging import RunKind
from evaluator.run.kinds import KINDS as RUN_KINDS
from evaluator.run.kinds import run_kind

PACKAGE = Path(__file__).resolve().parent.parent / "evaluator"
# Where a rubric's kind may be tested: its definition, the kinds themselves, and these,
# each with the reason.
ALLOWED = {
    "rubrics/rubric.py": "defines the kind and validates each kind's fields",
    "data/pairs.py": "the pair reader (--versus) refuses a rubric without two candidates",
    "report/export_columns.py": "the export's columns follow each kind's record shape",
}


def protocol_members(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items()
            if callable(value) and not name.startswith("_")}


def test_both_registries_know_every_kind_a_rubric_may_declare():
    declared = set(typing.get_args(Rubric.model_fields["kind"].annotation))
    assert declared == {"absolute", "pairwise"}
    assert set(RUN_KINDS) == declared
    assert set(ANALYSIS_KINDS) == declared


@pytest.mark.parametrize(("registry", "protocol"),
                         [(RUN_KINDS, RunKind), (ANALYSIS_KINDS, AnalysisKind)])
def test_every_kind_has_its_protocols_functions_with_their_parameters(registry, protocol):
    for name, kind in registry.items():
        for member in protocol_members(protocol):
            wanted = list(inspect.signature(getattr(protocol, member)).parameters)[1:]
            got = getattr(kind, member, None)
            assert callable(got), f"kind {name!r} has no {member}()"
            assert list(inspect.signature(got).parameters) == wanted, (name, member)


def test_the_lookup_follows_the_rubric_file():
    pairwise = load_rubric("pathology_report_pairwise")
    absolute = load_rubric("pathology_report")
    assert run_kind(pairwise) is RUN_KINDS["pairwise"]
    assert analysis_kind(absolute) is ANALYSIS_KINDS["absolute"]
    assert analysis_kind(absolute).elsewhere("r.jsonl", absolute.name, "report") is None
    assert "evaluator compare" in analysis_kind(pairwise).elsewhere(
        "r.jsonl", pairwise.name, "report")


def kind_tests(tree: ast.AST) -> list[int]:
    """Lines that test a rubric's kind: ``<...rubric...>.pairwise`` or ``<...>.kind ==``."""
    def rubric_like(node: ast.expr) -> bool:
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
        return "rubric" in name
    lines = []
    for node in ast.walk(tree):
        flag = (isinstance(node, ast.Attribute) and node.attr == "pairwise"
                and rubric_like(node.value))
        compared = (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)
                    and node.left.attr == "kind" and rubric_like(node.left.value))
        if flag or compared:
            lines.append(node.lineno)
    return lines


def test_no_module_outside_the_kinds_tests_a_rubrics_kind():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ALLOWED or "/kinds/" in f"/{relative}":
            continue
        wrong += [f"{relative}:{line}" for line in
                  kind_tests(ast.parse(path.read_text(encoding="utf-8")))]
    assert not wrong, ("these test a rubric's kind: call run_kind(rubric) or "
                       "analysis_kind(rubric) instead:\n" + "\n".join(wrong))


def test_review_and_the_labelling_page_ask_the_kind_and_never_name_a_sheet_kind():
    """``review`` and the labelling page take what differs by kind from the kind's module
    (its refusal, criteria, columns) or the rubric's fields: none compares a kind to the
    name of a sheet kind, nor reads a ``pairwise`` flag."""
    names = {kind.SHEET for kind in ANALYSIS_KINDS.values()}
    wrong = []
    for path in sorted([*(PACKAGE / "analysis" / "review").glob("*.py"),
                        *(PACKAGE / "label").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Constant) and side.value in names
                for side in [node.left, *node.comparators])
            if named or isinstance(node, ast.Attribute) and node.attr == "pairwise":
                wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not wrong, "these branch on a kind: ask analysis_kind(rubric) instead:\n" + \
        "\n".join(wrong)
