"""The labels readers' registry (evaluator.analysis.labels.readers): which reader reads a
``--labels`` path, the one ``--label-field`` rule, and that no command tests the labels'
format itself (issue 46: a new labels format touches its reader and a test)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from evaluator.analysis.labels import file_reader, readers, sheet_reader
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.data.sources import LabelSource

PACKAGE = Path(__file__).resolve().parent.parent / "evaluator"
# The modules that may ask what format labels are in: the readers, and the sheet's own
# data module (which defines the test).
READER_MODULES = {"analysis/labels/readers.py", "analysis/labels/sheet_reader.py",
                  "analysis/labels/file_reader.py", "analysis/labels/label_studio.py",
                  "data/sheet.py"}
FORMAT_TESTS = {"is_sheet", "is_sheet_dir", "claims", "reader_for"}


def _names(tree: ast.AST) -> set[str]:
    """Every name and attribute used in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def test_only_the_readers_test_the_labels_format():
    """No module but the readers asks whether labels are a sheet (or any other format):
    the commands take a LabelSet."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in READER_MODULES:
            continue
        used = _names(ast.parse(path.read_text(encoding="utf-8"))) & FORMAT_TESTS
        if used:
            offenders[relative] = sorted(used)
    assert offenders == {}


def test_the_check_above_finds_a_format_test(tmp_path):
    """The scan above sees a call of is_sheet_dir or a source's is_sheet."""
    tree = ast.parse("from evaluator.data.sheet import is_sheet_dir\n"
                     "def f(source):\n    return source.is_sheet(p)\n")
    assert _names(tree) & FORMAT_TESTS == {"is_sheet", "is_sheet_dir"}


def _sheet(folder: Path) -> Path:
    folder.mkdir()
    (folder / "sheet.json").write_text("{}", encoding="utf-8")
    return folder


def test_a_sheet_folder_goes_to_the_sheet_reader_and_a_file_to_the_file_reader(tmp_path):
    sheet = _sheet(tmp_path / "sheet")
    labels = tmp_path / "labels.csv"
    labels.write_text("case_id,accuracy.label\nc1,4\n", encoding="utf-8")
    assert readers.reader_for(sheet).noun == sheet_reader.NOUN
    assert readers.reader_for(labels).noun == file_reader.NOUN
    # A folder without sheet.json is no sheet: the file reader says what is wrong.
    plain = tmp_path / "plain"
    plain.mkdir()
    assert readers.reader_for(plain).noun == file_reader.NOUN


def test_one_rule_for_label_field(tmp_path):
    """--label-field is needed exactly when some --labels does not name its criteria."""
    sheet = _sheet(tmp_path / "sheet")
    labels = tmp_path / "labels.csv"
    labels.write_text("case_id,score\nc1,4\n", encoding="utf-8")
    assert readers.field_needed(None) is False
    assert readers.field_needed(LabelSource((), None)) is False
    assert readers.field_needed(LabelSource((sheet,), None)) is False
    assert readers.field_needed(LabelSource((labels,), None)) is True
    assert readers.field_needed(LabelSource((sheet, labels), None)) is True
    assert readers.field_needed(LabelSource((labels,), "score")) is False


def test_a_labels_file_is_one_column_of_rows(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"id": "c1", "score": 3}) + "\n", encoding="utf-8")
    read = readers.read_labels(LabelSource((path,), "score", "id"))
    assert isinstance(read, LabelSet)
    assert (read.named, read.id_column, read.design_path, read.ratings) == (
        False, "id", path, {})
    assert read.rows == [(1, {"id": "c1", "score": 3})]
    assert read.shown is None


def test_a_labels_file_with_the_judges_columns_says_so(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("case_id,accuracy.score,accuracy.label\nc1,4,4\n", encoding="utf-8")
    read = readers.read_labels(LabelSource((path,), "accuracy.label"))
    assert read.shown == f"{path} has the judge's columns (accuracy.score)"


@pytest.mark.parametrize("rule", ["draw", "mean", "majority"])
def test_one_labeller_per_case_is_that_label_whatever_the_rule(rule):
    labels = LabelSet(Path("x"), "sheet", Path("x/review.jsonl"), [], criteria=["a"],
                      ratings={"a": {"c1": {"ann": 3.0}}})
    assert labels.combined("a", rule) == {"c1": 3.0}


def test_a_parquet_labels_file_reads_as_its_csv_does(tmp_path):
    """A labels table saved as Parquet gives the same labels as the same table in CSV."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from evaluator.analysis.label_files import AgreementError, load_labels

    csv = tmp_path / "labels.csv"
    csv.write_text("case_id,accuracy.label\nc1,4\nc2,\nc3,2\n", encoding="utf-8")
    parquet = tmp_path / "labels.parquet"
    pq.write_table(pa.table({"case_id": ["c1", "c2", "c3"], "accuracy.label": [4, None, 2]}),
                   parquet)
    as_csv = load_labels(LabelSource((csv,), "accuracy.label"))
    as_parquet = load_labels(LabelSource((parquet,), "accuracy.label"))
    assert as_parquet == as_csv == {"c1": 4.0, "c3": 2.0}
    assert as_parquet.unlabelled == as_csv.unlabelled == 1
    # Off a given scale: refused naming the file, the row and the field.
    with pytest.raises(AgreementError, match=r"labels.parquet line 1: field 'accuracy.label' "
                                             r"is 4, not on --label-scale"):
        load_labels(LabelSource((parquet,), "accuracy.label", scale=(1.0, 2.0, 3.0)))
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1 not really")
    with pytest.raises(AgreementError, match="cannot be read as Parquet"):
        readers.read_labels(LabelSource((damaged,), "x"))
