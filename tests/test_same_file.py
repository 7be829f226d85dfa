"""``data.files.same_file``: one file under two names, and never an error for a path that
cannot be resolved (the pairwise run and compare ask it of user-given paths)."""

from __future__ import annotations

import os
from pathlib import Path

from evaluator.data.files import same_file


def test_a_file_under_two_names_is_one_file(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text("{}\n")
    (tmp_path / "link.jsonl").symlink_to(a)
    os.link(a, tmp_path / "hard.jsonl")
    (tmp_path / "b.jsonl").write_text("{}\n")
    assert same_file(a, tmp_path / "link.jsonl")
    assert same_file(a, tmp_path / "hard.jsonl")
    assert same_file(a, tmp_path / "sub" / ".." / "a.jsonl")
    assert not same_file(a, tmp_path / "b.jsonl")
    assert not same_file(a, tmp_path / "missing.jsonl")


def test_relative_paths_under_a_deleted_working_folder_are_not_one_file(
        tmp_path: Path, monkeypatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert not same_file(Path("a.jsonl"), Path("b.jsonl"))
