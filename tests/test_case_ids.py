"""CaseIds (evaluator/data/case_ids.py): a set of case ids held as digests behaves as a set
of the ids would, keeps the line each was added with, and is several times smaller."""

from __future__ import annotations

import pickle
import random
import tracemalloc

from evaluator.data.case_ids import BUCKETS, CaseIds


def test_it_behaves_as_a_set_of_the_ids():
    rng = random.Random(7)
    ids = CaseIds()
    reference: set[str] = set()
    words = [f"case-{rng.randrange(5000)}" for _ in range(20_000)] + ["", "ü", "\udc80"]
    for word in words:
        assert (ids.add(word) is None) == (word not in reference)
        reference.add(word)
        if rng.random() < 0.3:
            gone = rng.choice(words)
            ids.discard(gone)
            reference.discard(gone)
        assert len(ids) == len(reference)
    probes = words + [f"other-{i}" for i in range(2000)]
    assert [w in ids for w in probes] == [w in reference for w in probes]
    assert 3 not in ids and None not in ids  # not a string: never an id


def test_it_keeps_the_first_line_of_each_id():
    ids = CaseIds(lines=True)
    assert ids.add("a", 10) is None and ids.add("b", 11) is None
    assert ids.add("a", 12) == 10 and ids.add("b", 99) == 11
    ids.discard("a")
    assert ids.add("a", 13) is None and ids.add("a", 14) == 13
    assert CaseIds().add("x", 5) is None and CaseIds().add("x") is None


def test_copies_and_pickles_are_independent():
    ids = CaseIds(lines=True)
    for i in range(100):
        ids.add(f"c{i}", i + 1)
    for other in (ids.copy(), pickle.loads(pickle.dumps(ids))):
        other.discard("c1")
        assert "c1" in ids and "c1" not in other and len(other) == 99
        assert other.add("c2", 0) == 3


def test_a_hundred_thousand_ids_take_a_fraction_of_a_set_of_strings():
    n = 100_000
    names = [f"case-{i:07d}" for i in range(n)]  # made before measuring: the input's

    def measured(build) -> int:
        tracemalloc.start()
        try:
            held = build()
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert len(held) == n
        return size

    def digests() -> CaseIds:
        ids = CaseIds()
        for name in names:
            ids.add(name)
        return ids

    compact, strings = measured(digests), measured(lambda: set(names))
    assert compact < 20 * n + 200 * BUCKETS, compact  # 16 bytes per id, bucket overheads
    # A set holds only pointers here (the strings already exist); a run's set also holds the
    # strings, 60 bytes each and more.
    assert compact < strings + 60 * n
