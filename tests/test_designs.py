"""Label designs (:mod:`evaluator.analysis.designs`) and ``evaluator review --design``: the
draws have the probabilities they claim (checked by simulation), every worksheet row carries
them, and they are read back - or refused in one line - exactly."""

from __future__ import annotations

import json
import re

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.designs import (
    DEFAULT_FLOOR,
    DESIGN_COLUMNS,
    DesignError,
    active_draw,
    distribution_sd,
    inclusion_probabilities,
    population_fingerprint,
    random_draw,
    read_design,
    uneven_weights_warning,
)
from evaluator.cli.main import cli
from tests.conftest import label_source
from tests.label_world import SECRET, fill_sheet, read_rows, world, write_results, write_rows

IDS = [f"c{i:03d}" for i in range(60)]


def test_random_draw_is_a_seeded_simple_random_sample_with_pi_n_over_n():
    draw = random_draw(IDS, 12, seed=3)
    assert len(draw.chosen) == 12 and len(set(draw.chosen)) == 12
    assert set(draw.probabilities.values()) == {12 / 60} and draw.population == 60
    assert draw.chosen == random_draw(list(reversed(IDS)), 12, seed=3).chosen  # order-free
    assert draw.chosen != random_draw(IDS, 12, seed=4).chosen
    assert draw.population_sha256 == population_fingerprint(IDS)


def test_random_draw_gives_every_case_the_same_chance():
    counts = dict.fromkeys(IDS, 0)
    for seed in range(3000):
        for case in random_draw(IDS, 6, seed).chosen:
            counts[case] += 1
    share = np.array(list(counts.values())) / 3000
    # Each share is Binomial(3000, 0.1) / 3000: sd 0.0055; 5 sd either side.
    assert np.all(np.abs(share - 0.1) < 0.0275)


def test_inclusion_probabilities_sum_to_n_keep_the_floor_and_cap_at_one():
    rng = np.random.default_rng(0)
    u = np.concatenate([rng.uniform(0, 2, 95), [50.0] * 5])  # five very uncertain cases
    for floor in (0.05, 0.2, 0.5):
        pi = np.array(inclusion_probabilities(u, 20, floor))
        assert pi.sum() == pytest.approx(20, abs=1e-9)
        assert pi.max() <= 1 and np.all(pi[-5:] == 1.0)  # capped, the rest rescaled
        assert pi.min() >= floor * 20 / 100 - 1e-12
        order = np.argsort(u)
        assert np.all(np.diff(pi[order]) >= -1e-12)  # more uncertain, never less likely
    assert inclusion_probabilities([0, 0, 0, 0], 2) == [0.5] * 4
    assert inclusion_probabilities([1, 2], 5) == [1.0, 1.0]
    with pytest.raises(DesignError, match="not finite"):
        inclusion_probabilities([1.0, float("nan")], 1)


def test_active_draws_take_each_case_with_its_claimed_probability():
    uncertainty = {c: (i % 7) * 0.3 for i, c in enumerate(IDS)}
    uncertainty["c000"] = None  # no distribution: the floor
    first = active_draw(uncertainty, 15, seed=0, criterion="accuracy")
    assert any("no score distribution" in note for note in first.notes)
    assert first.probabilities["c000"] == pytest.approx(min(first.probabilities.values()))
    counts = dict.fromkeys(IDS, 0)
    sizes = []
    for seed in range(4000):
        draw = active_draw(uncertainty, 15, seed=seed, criterion="accuracy")
        sizes.append(len(draw.chosen))
        for case in draw.chosen:
            counts[case] += 1
    pi = np.array([first.probabilities[c] for c in IDS])
    share = np.array([counts[c] for c in IDS]) / 4000
    assert np.all(np.abs(share - pi) <= 5 * np.sqrt(pi * (1 - pi) / 4000) + 1e-9)
    assert np.mean(sizes) == pytest.approx(15, abs=0.2)


def test_uneven_weights_are_said_below_half_of_the_labels_in_kish_terms():
    assert uneven_weights_warning([10.0] * 40) is None  # equal: n_eff = n
    # 30 labels of weight 2 and 10 of weight 20: n_eff (260^2 / 4120) = 16.4 of 40.
    warning = uneven_weights_warning([2.0] * 30 + [20.0] * 10)
    assert warning.startswith("the 40 labelled cases' weights 1/pi are uneven")
    assert "from 2 to 20" in warning and "Kish's effective n is 16.4" in warning
    assert uneven_weights_warning([2.0] * 30 + [5.0] * 10) is None  # n_eff 32.7 of 40
    assert uneven_weights_warning([1.0]) is None


def test_the_default_floor_keeps_every_weight_within_1_over_floor_of_a_random_sheets():
    """The defensive mixture: whatever the uncertainties, pi >= floor * n / N, so no weight
    exceeds N / (floor n); the default floor is the one that kept coverage (0.6)."""
    assert DEFAULT_FLOOR == 0.6
    rng = np.random.default_rng(1)
    u = np.concatenate([np.full(80, 0.01), rng.uniform(0.5, 3, 20)])
    pi = np.array(inclusion_probabilities(u, 10))
    assert (1 / pi).max() <= 100 / (DEFAULT_FLOOR * 10) + 1e-9
    assert (1 / pi).max() > 100 / (0.65 * 10)  # the sure cases are at the floor


def test_distribution_sd():
    assert distribution_sd({1: 0.5, 5: 0.5}) == pytest.approx(2.0)
    assert distribution_sd({3: 1.0}) == 0.0
    assert distribution_sd({1: 0.25, 2: 0.5, 3: 0.25}) == pytest.approx(np.sqrt(0.5))


@pytest.fixture
def results(tmp_path):
    records, truth = world(120, seed=1)
    return write_results(tmp_path / "results.jsonl", records), truth



@pytest.mark.parametrize("design", ["random", "active"])
def test_review_writes_the_design_on_every_row_and_reads_it_back(tmp_path, results, design):
    path, truth = results
    out = tmp_path / "sheet"
    run = CliRunner().invoke(cli, ["review", str(path), "--out", str(out), "--design", design,
                                   "--criterion", "accuracy", "--n", "20", "--seed", "9"])
    assert run.exit_code == 0, run.output
    assert f"({design} design)" in run.output and "evaluator estimate" in run.output
    assert SECRET not in run.output
    rows = read_rows(out / "review.csv")
    assert rows and all(c in rows[0] for c in DESIGN_COLUMNS)
    assert {r["design"] for r in rows} == {design}
    assert {r["design_population"] for r in rows} == {"120"}
    assert {r["design_seed"] for r in rows} == {"9"}
    records = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert [r["inclusion_probability"] for r in records] == [
        float(r["inclusion_probability"]) for r in rows]
    read = read_design(out / "review.csv")
    assert read.kind == design and read.population == 120 and read.seed == 9
    assert set(read.probabilities) == {r["case_id"] for r in rows}
    if design == "random":
        assert len(rows) == 20 and set(read.probabilities.values()) == {20 / 120}
        assert {r["design_criterion"] for r in rows} == {""}
    else:
        assert read.criterion == "accuracy"
        # The design only (issue 37: a blind sheet shows no SD of the judge's).
        assert all(re.fullmatch(r"active draw \(probability [0-9.e-]+\)", r["reason"])
                   for r in rows)
        assert len(set(read.probabilities.values())) > 1
    assert all(r["accuracy.label"] == "" for r in rows)
    fill_sheet(out / "review.csv", tmp_path / "filled.csv", truth)
    assert read_design(tmp_path / "filled.csv").probabilities == read.probabilities


def test_two_systems_on_the_same_cases_get_the_same_random_draw(tmp_path):
    a, _ = world(80, seed=1, prefix="q")
    b, _ = world(80, seed=2, prefix="q")
    for name, records in (("a", a), ("b", b)):
        path = write_results(tmp_path / f"{name}.jsonl", records)
        run = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / name),
                                       "--design", "random", "--n", "15", "--seed", "4"])
        assert run.exit_code == 0, run.output
    ids = [[r["case_id"] for r in read_rows(tmp_path / name / "review.csv")] for name in "ab"]
    assert ids[0] == ids[1] and len(ids[0]) == 15


def test_priority_is_still_the_default_and_says_what_its_labels_describe(tmp_path, results):
    path, _ = results
    run = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / "s"),
                                   "--n", "5"])
    assert run.exit_code == 0, run.output
    assert "(priority design)" in run.output and "chosen for being hard" in run.output
    rows = read_rows(tmp_path / "s" / "review.csv")
    assert {r["design"] for r in rows} == {"priority"}
    assert {r["inclusion_probability"] for r in rows} == {""}
    assert read_design(tmp_path / "s" / "review.csv").kind == "priority"


@pytest.mark.parametrize("args, message", [
    (["--design", "active"], "--design active needs --criterion"),
    (["--design", "random", "--labels", "LABELS", "--label-field", "grade"],
     "--labels goes with --design priority only"),
    (["--design", "random", "--floor", "0"], "--floor"),
    (["--design", "systematic"], "--design"),
])
def test_review_design_errors_are_one_line_exit_2(tmp_path, results, args, message):
    path, _ = results
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"case_id": "case-0000", "grade": 3}\n')
    args = [str(labels) if a == "LABELS" else a for a in args]
    run = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / "s"), *args])
    assert run.exit_code == 2 and message in run.output
    assert "Traceback" not in run.output and SECRET not in run.output


def test_a_design_error_reads_as_english(tmp_path, results):
    """--labels with an active (or random) design: the message names the option, never
    "a active design"."""
    path, _ = results
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"case_id": "case-0000", "grade": 3}\n')
    run = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / "s"),
                                   "--design", "active", "--criterion", "accuracy",
                                   "--labels", str(labels), "--label-field", "grade"])
    assert run.exit_code == 2
    assert "--design active draws from every judged case" in run.output
    assert "a active" not in run.output



def _row(case_id, design="random", pi="0.5", **extra):
    return {"case_id": case_id, "design": design, "inclusion_probability": pi,
            "design_population": "4", "design_n": "2", "design_criterion": "",
            "design_seed": "1", "design_files": "1",
            "design_floor": "", "design_population_sha256": "ab" * 32, "grade": "3", **extra}


@pytest.mark.parametrize("rows, message", [
    ([_row("x1"), _row("x2", design="active")], "lines 2 and 3: designs 'random' and 'active' mixed"),
    ([_row("x1"), _row("x2", pi="1.5")], "line 3: column 'inclusion_probability'"),
    ([_row("x1"), _row("x2", pi="")], "line 3: column 'inclusion_probability'"),
    ([_row("x1"), _row("x2", design="stratified")], "line 3: column 'design' is not one of"),
    ([_row("x1"), _row("x2", design_seed="2")], "lines 2 and 3: column 'design_seed' differs"),
    ([_row("x1"), _row("x1")], "line 3: a case id appears twice"),
    ([_row(f"x{i}") for i in range(5)], "5 rows but a population of 4"),
])
def test_read_design_refuses_what_is_not_one_draw_naming_lines_never_ids(tmp_path, rows, message):
    path = write_rows(tmp_path / "labels.csv", rows)
    with pytest.raises(DesignError) as info:
        read_design(path)
    assert message in str(info.value)
    assert "x1" not in str(info.value)


def test_a_plain_labels_file_has_no_design_and_an_old_review_sheet_is_priority(tmp_path):
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"case_id": "a", "grade": 1}\n')
    assert read_design(plain).kind is None
    legacy = write_rows(tmp_path / "old.csv", [
        {"case_id": "a", "rubric": "r", "judge": "j", "rank": "1", "reason": "lowest confidence",
         "min_confidence": "0.3", "max_spread": "", "gate_margin": "", "accuracy.label": "2"}])
    design = read_design(legacy)
    assert design.kind == "priority" and design.legacy


def test_a_quoted_cell_with_line_breaks_and_an_excel_bom_read_back(tmp_path):
    """A --show-text sheet holds case text whose cells span lines; Excel's "CSV UTF-8"
    starts with a byte-order mark. Both read back, line numbers counting physical lines."""
    from evaluator.analysis.label_files import load_labels

    path = tmp_path / "sheet.csv"
    path.write_text('\ufeffcase_id,input.note,grade\na,"two\nlines",3\nb,x,\nc,y,oops\n',
                    encoding="utf-8")
    with pytest.raises(Exception, match="line 5: field 'grade' is not a number"):
        load_labels(label_source(path, "grade"))
    path.write_text('\ufeffcase_id,input.note,grade\na,"two\nlines",3\nb,x,\n',
                    encoding="utf-8")
    labels = load_labels(label_source(path, "grade"))
    assert dict(labels) == {"a": 3.0} and labels.unlabelled == 1


def test_an_active_draw_of_no_case_is_refused_and_the_floor_has_a_minimum(tmp_path, results):
    path, _ = results
    for seed in range(50):  # an expected 1 case of 120: some seed draws none
        run = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / f"s{seed}"),
                                       "--design", "active", "--criterion", "accuracy",
                                       "--n", "1", "--seed", str(seed)])
        if run.exit_code == 2:
            assert "the active draw took no case" in run.output
            assert not (tmp_path / f"s{seed}" / "review.csv").exists()
            break
        assert run.exit_code == 0, run.output
    else:
        pytest.fail("no seed of 50 drew no case at an expected 1 of 120")
    low = CliRunner().invoke(cli, ["review", str(path), "--out", str(tmp_path / "f"),
                                   "--design", "active", "--criterion", "accuracy",
                                   "--floor", "0.001"])
    assert low.exit_code == 2 and "--floor" in low.output
