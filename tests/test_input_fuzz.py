"""Over a thousand malformed rows through the real pipeline: each one becomes exactly one
``input_error`` record at its own line, the good rows beside them are judged, and no case text
(the ``PHI-MARKER-<n>`` strings) reaches a reason, the summary or the log."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

import pytest

from evaluator.data.results import read_results
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.fuzz_corpus import (
    CSV_KINDS,
    JSONL_KINDS,
    MARKER,
    RUBRIC,
    UNTERMINATED,
    Corpus,
    build_csv,
    build_jsonl,
)

EXPECTED_REASON = {kind: expected for kind, (_, expected) in {**JSONL_KINDS, **CSV_KINDS}.items()}
EXPECTED_REASON[UNTERMINATED[0]] = UNTERMINATED[1]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> list[Corpus]:
    folder = tmp_path_factory.mktemp("fuzz")
    return [build_jsonl(folder / "cases.jsonl"), build_csv(folder / "cases.csv")]


def test_corpus_is_big_and_covers_every_kind(corpora):
    bad = Counter(kind for corpus in corpora for kind in corpus.bad.values())
    assert sum(bad.values()) >= 1000
    assert sum(len(corpus.good) for corpus in corpora) >= 100
    assert set(bad) == set(EXPECTED_REASON)
    assert len(corpora[1].bad) + len(corpora[1].good) >= 200  # a few hundred CSV rows


@pytest.mark.parametrize("index", [0, 1], ids=["jsonl", "csv"])
def test_every_malformed_row_is_one_input_error_and_good_rows_run(corpora, index, tmp_path,
                                                                   caplog):
    corpus = corpora[index]
    output = tmp_path / "r.jsonl"
    with caplog.at_level(logging.WARNING):
        result = evaluate(Task(RUBRIC, corpus.path),
                          Judge("fake-judge", spec=JudgeSpec(backend="fake"),
                                backend=FakeBackend()),
                          RunOptions(output))
    records = read_results(output)
    assert len(records) == len(corpus.bad) + len(corpus.good)
    by_line = defaultdict(list)
    for record in records:
        by_line[record.input_line].append(record)
    for line, kind in corpus.bad.items():
        assert len(by_line[line]) == 1, (line, kind)
        [record] = by_line[line]
        assert record.status == "input_error", (line, kind)
        assert record.input_file == str(corpus.path)
        assert record.reason and f"{corpus.path}:{line} " in record.reason
        assert EXPECTED_REASON[kind] in record.reason, (line, kind, record.reason)
    for line, case_id in corpus.good.items():
        assert [(r.status, r.case_id) for r in by_line[line]] == [("ok", case_id)], line
    assert result.failed == len(corpus.bad)
    for text in (output.read_text(encoding="utf-8"),
                 result.summary_path.read_text(encoding="utf-8"), caplog.text):
        assert MARKER not in text
