"""The package's layering, read from the source with ``ast`` (nothing is imported).

Each package of ``evaluator/`` is a layer that may import only the layers its docstring
names (``ALLOWED``); modules import no other module's ``_private`` names; the import graph
(every import of an evaluator module, at the top, under ``TYPE_CHECKING``, in a function
or by name with ``importlib.import_module``) has no cycle, inside a package or across; and
an import inside a function is there only to keep a heavy library lazy (of an evaluator
module, only one that imports such a library at its top), with a comment saying so. ``python tests/test_layers.py`` prints the layers and their imports.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "evaluator"

# Layer -> the layers it may import (itself included). The root package and api re-export
# the public API; cli sits on top of everything.
ALLOWED: dict[str, set[str]] = {
    "common": {"common"},
    "rubrics": {"common", "rubrics"},
    "judges": {"common", "judges"},
    "data": {"common", "rubrics", "data"},
    "analysis": {"common", "rubrics", "data", "analysis"},
    "run": {"common", "rubrics", "judges", "data", "analysis", "run"},
    "report": {"common", "rubrics", "data", "analysis", "run", "study", "report"},
    "tracking": {"common", "rubrics", "judges", "data", "analysis", "run", "study", "report",
                 "tracking"},
    "doctor": {"common", "judges", "run", "doctor"},
    "label": {"common", "rubrics", "data", "analysis", "label"},
    "study": {"common", "rubrics", "data", "analysis", "study"},
    "api": {"common", "rubrics", "judges", "data", "analysis", "run", "api"},
    "(root)": {"common", "api"},
    "cli": {"common", "rubrics", "judges", "data", "analysis", "run", "report", "tracking",
            "doctor", "label", "study", "api", "cli"},
    "__main__": {"cli"},
}
ORDER = list(ALLOWED)
# analysis/'s concept sub-packages -> the other concepts each may import. Every other module
# of analysis/ (the shared statistics: intervals, stats, designs, ...) imports none of them.
ANALYSIS_CONCEPTS: dict[str, set[str]] = {
    "labels": set(),  # the labels a command is given (LabelSet, its readers)
    "pairwise": {"labels"},
    "summary": {"pairwise"},  # a pairwise rubric's summary holds its win rates
    "kinds": {"summary"},  # each rubric kind's summary
    "agreement": {"kinds", "labels"},  # the refusal of a pairwise rubric's results
    "estimate": {"kinds", "labels"},
    "review": {"agreement", "kinds", "labels"},  # sample_size: the CI agreement computes
}
SHARED = "(shared)"
# Third-party libraries that are imported only inside the functions that need them.
HEAVY = {"torch", "transformers", "vllm", "ray", "pyarrow", "numpy", "pandas", "scipy",
         "sklearn", "krippendorff", "pingouin", "statsmodels", "matplotlib", "outlines",
         "outlines_core", "llguidance", "tokenizers", "gguf", "mlflow", "requests",
         "starlette", "uvicorn"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return "(root)" if len(parts) == 1 else parts[1]


class Imports:
    """Every import in one module: ``(target module, names, line, at the top?)``."""

    def __init__(self, path: Path):
        self.path, self.name = path, module_name(path)
        self.source = path.read_text(encoding="utf-8")
        self.lines = self.source.splitlines()
        tree = ast.parse(self.source)
        top: set[int] = set()

        def module_level(nodes: list[ast.stmt]) -> None:
            # Statements at module level, including those under ``if TYPE_CHECKING:`` and
            # ``try:`` (not inside a function or class).
            for node in nodes:
                top.add(id(node))
                if isinstance(node, (ast.If, ast.Try)):
                    module_level(node.body + node.orelse + getattr(node, "finalbody", []))
                    for handler in getattr(node, "handlers", []):
                        module_level(handler.body)

        module_level(tree.body)
        self.docstring = ast.get_docstring(tree)
        self.found: list[tuple[str, list[str], int, bool]] = []
        self.starts: dict[int, int] = {}  # an import's last line -> its first line
        self.by_name: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.starts[node.end_lineno or node.lineno] = node.lineno
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.found.append((alias.name, [], node.lineno, id(node) in top))
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{self.name}: relative import at line {node.lineno}"
                names = [alias.name for alias in node.names]
                self.found.append((node.module or "", names, node.lineno, id(node) in top))
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)
                  and str(node.args[0].value).startswith("evaluator.")):
                # importlib.import_module("evaluator.x"): lazy, but an edge of the cycle check
                self.by_name.append(str(node.args[0].value))

    def internal(self, modules: set[str]) -> list[tuple[str, int, bool]]:
        """``(evaluator module, line, at the top?)``: ``from evaluator.x import y`` counts as
        an import of ``evaluator.x.y`` when that is a module."""
        out = []
        for target, names, line, at_top in self.found:
            if target != "evaluator" and not target.startswith("evaluator."):
                continue
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            out += [(m, line, at_top) for m in submodules or [target]]
        return out

    def commented(self, line: int) -> bool:
        """Whether the import at ``line``, or the run of imports it ends, has a comment on
        it or just above it."""
        while True:
            if "#" in self.lines[line - 1]:
                return True
            if line - 1 not in self.starts:  # no import ends on the line above
                return line >= 2 and self.lines[line - 2].strip().startswith("#")
            line = self.starts[line - 1]


def scan() -> dict[str, Imports]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        imports = Imports(path)
        found[imports.name] = imports
    return found


MODULES = scan()


def graph(by_name: bool = False) -> dict[str, set[str]]:
    names = set(MODULES)
    return {name: {target for target, _, _ in imports.internal(names) if target != name}
            | (set(imports.by_name) if by_name else set())
            for name, imports in MODULES.items()}


def analysis_part(module: str) -> str | None:
    """The concept sub-package of analysis/ a module is in, ``SHARED`` for a module directly
    in analysis/, None outside analysis/ (and for analysis/__init__.py)."""
    path = MODULES[module].path.relative_to(PACKAGE)
    if path.parts[0] != "analysis" or len(path.parts) == 2 and path.name == "__init__.py":
        return None
    return path.parts[1] if len(path.parts) > 2 else SHARED


def heavy_at_top(module: str) -> bool:
    return any(target.partition(".")[0] in HEAVY
               for target, _, _, at_top in MODULES[module].found if at_top)


def test_every_layer_is_known_and_every_package_says_what_it_may_import():
    for name, imports in MODULES.items():
        assert layer_of(name) in ALLOWED, f"{name}: a package no layer rule covers"
        assert imports.docstring, f"{name} has no module docstring"
    for package in (p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        doc = MODULES[f"evaluator.{package.name}"].docstring or ""
        assert "import" in doc, f"evaluator/{package.name}/__init__.py must say what it may import"


def test_layers_import_only_the_layers_below():
    names = set(MODULES)
    wrong = [f"{name}:{line} imports {target} ({layer_of(name)} may import "
             f"{', '.join(sorted(ALLOWED[layer_of(name)]))})"
             for name, imports in MODULES.items()
             for target, line, _ in imports.internal(names)
             if layer_of(target) not in ALLOWED[layer_of(name)]]
    assert not wrong, "\n".join(wrong)


def test_analysis_concepts_import_only_the_shared_statistics_and_the_concepts_named():
    analysis = PACKAGE / "analysis"
    unknown = sorted(p.name for p in analysis.iterdir()
                     if (p / "__init__.py").is_file() and p.name not in ANALYSIS_CONCEPTS)
    assert not unknown, f"analysis/ sub-packages no ANALYSIS_CONCEPTS entry names: {unknown}"
    TopologicalSorter(ANALYSIS_CONCEPTS).prepare()  # the concepts themselves have no cycle
    names, wrong = set(MODULES), []
    for name, imports in MODULES.items():
        part = analysis_part(name)
        if part is None:
            continue
        targets = [(t, line) for t, line, _ in imports.internal(names)]
        targets += [(t, 0) for t in imports.by_name if t in names]
        for target, line in targets:
            to = analysis_part(target)
            if to not in (None, SHARED, part) and to not in ANALYSIS_CONCEPTS.get(part, set()):
                may = ", ".join(sorted(ANALYSIS_CONCEPTS.get(part, set()))) or "none"
                wrong.append(f"{name}:{line} imports {target} (analysis/{to}): {part} may "
                             f"import the shared statistics and, of the concepts, {may}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    try:
        order = list(TopologicalSorter(graph(by_name=True)).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert set(order) == set(MODULES)


def test_no_module_imports_another_modules_private_names():
    wrong = [f"{name}:{line} imports {target}.{n}"
             for name, imports in MODULES.items()
             for target, names, line, _ in imports.found
             if target.startswith("evaluator") and target != name
             for n in names if n.startswith("_") and not n.startswith("__")]
    assert not wrong, "\n".join(wrong)


def test_function_level_imports_only_keep_heavy_libraries_lazy():
    names = set(MODULES)
    wrong = []
    for name, imports in MODULES.items():
        for target, _, line, at_top in imports.found:
            if at_top:
                continue
            if target.startswith("evaluator"):
                modules = [t for t, ln, top in imports.internal(names) if ln == line and not top]
                if not all(heavy_at_top(m) for m in modules) or not imports.commented(line):
                    wrong.append(f"{name}:{line} imports {target} inside a function: import "
                                 "it at the top (or, for a module that loads a heavy "
                                 "library, say so in a comment)")
            elif target.partition(".")[0] not in HEAVY:
                wrong.append(f"{name}:{line} imports {target} inside a function, but it is "
                             "not a heavy optional library: import it at the top")
            elif not imports.commented(line):
                wrong.append(f"{name}:{line} imports {target} inside a function without a "
                             "comment saying why (e.g. which extra it keeps lazy)")
    assert not wrong, "\n".join(wrong)


def test_import_evaluator_stays_light():
    # The modules `import evaluator` and the CLI load import no heavy library at their top.
    edges = graph()
    seen, todo = set(), ["evaluator", "evaluator.cli.main"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += edges[module]
    heavy = sorted(m for m in seen if heavy_at_top(m))
    assert not heavy, f"imported by `import evaluator` or the CLI, with a heavy import: {heavy}"


def describe() -> str:
    """The layers, bottom up: each package's modules and the layers it imports."""
    edges = graph()
    by_layer: dict[str, set[str]] = defaultdict(set)
    uses: dict[str, set[str]] = defaultdict(set)
    for name, targets in edges.items():
        by_layer[layer_of(name)].add(name)
        uses[layer_of(name)] |= {layer_of(t) for t in targets} - {layer_of(name)}
    parts: dict[str, set[str]] = defaultdict(set)  # analysis/'s sub-packages, shared first
    for name in edges:
        if analysis_part(name) is not None:
            parts[analysis_part(name)].add(name)
    lines = []
    for layer in ORDER:
        used = ", ".join(sorted(uses[layer], key=ORDER.index)) or "-"
        lines.append(f"{layer:9} {len(by_layer[layer]):2} modules, imports: {used}")
        for part in sorted(parts, key=lambda p: (p != SHARED, p)) if layer == "analysis" else []:
            used = ", ".join(sorted({analysis_part(t) or "-" for n in parts[part]
                                     for t in edges[n]} - {"-", part})) or "-"
            where = part if part == SHARED else part + "/"
            lines.append(f"  {where:10} {len(parts[part]):2} modules, imports: {used}")
    order = list(TopologicalSorter(edges).static_order())
    lines.append(f"{len(edges)} modules, {sum(map(len, edges.values()))} internal imports, "
                 f"no cycles (topological order found: {len(order)} modules)")
    return "\n".join(lines)


def test_the_architecture_page_prints_the_layers_as_they_are():
    """docs/architecture.md shows this module's printout; a new module updates it."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "```\n" + describe() + "\n```" in page, (
        "docs/architecture.md's layer printout is out of date: paste `python "
        "tests/test_layers.py`'s output there")


if __name__ == "__main__":
    print(describe())
    sys.exit(0)
