"""``evaluator agree`` (and its ``--pass`` gates) reading the labels' design
(:mod:`evaluator.analysis.agreement.design`): a priority worksheet's warning comes before any
figure; random and no design leave the figures as they are; an active worksheet's labels
weight kappa, mean |judge - label|, exact/within-one agreement, the confusion matrix and the
gates by 1/pi - each checked here against a hand computation, scikit-learn or scipy, and the
weighted share by simulation against the population it estimates."""

from __future__ import annotations

import csv
import json

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

from click.testing import CliRunner
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from evaluator.analysis.agreement.agreement import agreement, agreement_share
from evaluator.analysis.agreement.design import DRAWN_ONLY_STATISTICS, WEIGHTED_STATISTICS
from evaluator.analysis.designs import PRIORITY_WARNING, active_draw, population_fingerprint
from evaluator.analysis.gates import gate_table, parse_gate
from evaluator.analysis.review.review import build_review, write_review
from evaluator.cli.main import cli
from tests.conftest import label_source
from tests.label_world import SECRET, fill_sheet, read_rows, world, write_results, write_rows
from tests.test_score_mode import write_records

# (judge, label, inclusion probability): a small active draw, by hand.
TABLE = [(5, 5, 0.2), (4, 5, 0.5), (4, 2, 0.25), (2, 4, 1.0), (3, 3, 0.4), (1, 1, 0.8),
         (5, 4, 0.2), (2, 2, 0.5), (3, 5, 0.25), (4, 4, 0.1), (1, 2, 1.0), (5, 3, 0.4)]
IDS = [f"SECRET-ID-{i:02d}" for i in range(len(TABLE))]
POPULATION = 40  # the draw was from 40 cases; 12 were drawn



def _run(tmp_path, table=TABLE, ids=IDS, population=POPULATION):
    """A results file of ``population`` cases (the judge's score on the first len(table)
    from ``table``) and its ok case ids."""
    rows = [(cid, judge, {judge: 0.7, 3: 0.3} if judge != 3 else {3: 1.0})
            for cid, (judge, _, _) in zip(ids, table)]
    rows += [(f"other-{i:03d}", 3, {3: 1.0}) for i in range(population - len(table))]
    return write_records(tmp_path / "results.jsonl", rows), [r[0] for r in rows]


def _sheet(path, ok_ids, design="active", table=TABLE, ids=IDS, **override):
    """A filled worksheet of the drawn cases with their design columns (pi from ``table``;
    ``random``: every pi len(table)/N)."""
    rows = []
    for cid, (_, label, pi) in zip(ids, table):
        row = {"case_id": cid, "design": design,
               "inclusion_probability": str(pi if design == "active"
                                            else len(table) / len(ok_ids)),
               "design_population": str(len(ok_ids)), "design_n": str(len(table)),
               "design_files": "1",
               "design_criterion": "accuracy" if design == "active" else "",
               "design_seed": "7", "design_floor": "0.2" if design == "active" else "",
               "design_population_sha256": population_fingerprint(ok_ids),
               "grade": str(label)}
        row.update(override.get(cid, {}))
        rows.append(row)
    return write_rows(path, rows)


def _plain(path, table=TABLE, ids=IDS):
    path.write_text("".join(json.dumps({"case_id": cid, "grade": label}) + "\n"
                            for cid, (_, label, _) in zip(ids, table)))
    return path


def _agree(results, labels, **kwargs):
    return agreement(results, label_source(labels, "grade"), criteria=["accuracy"], resamples=200,
                     **kwargs)


def _cli(results, labels, *extra):
    return CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--criterion", "accuracy",
                                    "--resamples", "200", *extra])


def _flat(text):
    return " ".join(text.split())


# --- priority: the warning before any figure -------------------------------------------

def _assert_warned_first(output):
    lines = output.splitlines()
    first = output.index("WARNING")
    assert output[first:].startswith("WARNING: these labels come from a 'priority' worksheet")
    # Right after the first paragraph (the files: long paths wrap onto indented lines).
    second = next(line for line in lines[1:] if not line.startswith(" "))
    assert second.startswith("WARNING: these labels come from a 'priority' worksheet")
    for figure in ("n = ", "Spearman rho", "exact agreement", "TP "):
        assert first < output.index(figure)
    assert _flat(PRIORITY_WARNING) in _flat(output)
    assert output.count("these labels come from a 'priority' worksheet") == 1


@pytest.fixture
def priority_sheet(tmp_path):
    records, truth = world(60, seed=3)
    results = write_results(tmp_path / "results.jsonl", records)
    sheet = build_review([results], n=15, criteria=["accuracy"])
    csv_path, _ = write_review(sheet, tmp_path / "sheet")
    filled = fill_sheet(csv_path, tmp_path / "filled.csv", truth)
    return results, filled, truth


def test_a_priority_sheet_from_review_warns_before_any_figure(priority_sheet, tmp_path):
    results, filled, truth = priority_sheet
    args = ["agree", str(results), "--labels", str(filled), "--label-field", "accuracy.label",
            "--criterion", "accuracy", "--resamples", "200", "--pass", "accuracy>=4"]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    _assert_warned_first(text.output)
    assert "design: priority (cases chosen for being hard)" in text.output
    assert "(w)" not in text.output and SECRET not in text.output
    done = CliRunner().invoke(cli, [*args, "--json"])
    report = json.loads(done.output)
    assert report["warnings"][0] == PRIORITY_WARNING
    assert report["design"]["kind"] == "priority" and not report["design"]["weighted"]
    # The figures stay as they are: the same labels in a plain file give the same ones.
    with filled.open(newline="") as handle:
        drawn = {row["case_id"] for row in csv.DictReader(handle)}
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"case_id": c, "accuracy.label": truth[c]}) + "\n"
                             for c in sorted(drawn)))
    kwargs = {"criteria": ["accuracy"], "resamples": 200, "gates": [parse_gate("accuracy>=4")]}
    from_sheet = agreement(results, label_source(filled, "accuracy.label"), **kwargs)
    from_plain = agreement(results, label_source(plain, "accuracy.label"), **kwargs)
    assert from_sheet.criteria == from_plain.criteria
    assert from_sheet.gates == from_plain.gates
    assert from_plain.design["kind"] is None and from_plain.warnings == []


def test_a_sheet_from_before_designs_is_priority_and_warned(tmp_path):
    results, _ = _run(tmp_path)
    legacy = write_rows(tmp_path / "old.csv", [
        {"case_id": cid, "rubric": "trial_eligibility", "judge": "hand", "rank": str(i + 1),
         "reason": "lowest confidence", "min_confidence": "0.3", "max_spread": "",
         "gate_margin": "", "grade": str(label)}
        for i, (cid, (_, label, _)) in enumerate(zip(IDS, TABLE))])
    text = _cli(results, legacy, "--pass", "accuracy>=4")
    assert text.exit_code == 0, text.output
    _assert_warned_first(text.output)
    assert "a worksheet from before designs" in text.output
    report = json.loads(_cli(results, legacy, "--json").output)
    assert report["warnings"][0] == PRIORITY_WARNING and report["design"]["legacy"]


# --- random and no design: figures unchanged --------------------------------------------

def test_a_random_design_gives_the_figures_of_no_design(tmp_path):
    results, ok_ids = _run(tmp_path)
    gate = [parse_gate("accuracy>=4")]
    random = _agree(results, _sheet(tmp_path / "random.csv", ok_ids, design="random"),
                    gates=gate)
    plain = _agree(results, _plain(tmp_path / "plain.jsonl"), gates=gate)
    assert random.criteria == plain.criteria and random.gates == plain.gates
    assert random.design["kind"] == "random" and not random.design["weighted"]
    assert plain.design["kind"] is None
    assert random.warnings == plain.warnings == []
    text = _cli(results, tmp_path / "random.csv").output
    assert "design: random, 12 of N = 40 cases drawn, seed 7, pi = 12/40" in text
    assert "(w)" not in text and "design-weighted" not in text
    assert "design: none recorded (a plain labels file)" in _cli(results,
                                                                 tmp_path / "plain.jsonl").output


def test_an_active_sheet_whose_probabilities_are_equal_is_not_reweighted(tmp_path):
    table = [(j, lab, 0.5) for j, lab, _ in TABLE]
    results, ok_ids = _run(tmp_path, table)
    report = _agree(results, _sheet(tmp_path / "s.csv", ok_ids, table=table))
    assert not report.design["weighted"]
    assert any("all equal" in note for note in report.design["notes"])
    plain = _agree(results, _plain(tmp_path / "p.jsonl", table))
    assert report.criteria == plain.criteria


# --- active: design-weighted figures against hand computations -------------------------

def _weights(table=TABLE):
    return np.array([1 / pi for _, _, pi in table])


def test_weighted_gates_equal_a_hand_computation(tmp_path):
    # accuracy >= 4: TP both pass, FP judge passes/label fails, FN the reverse, TN neither.
    tp = 1 / 0.2 + 1 / 0.5 + 1 / 0.2 + 1 / 0.1     # rows 0, 1, 6, 9
    fp = 1 / 0.25 + 1 / 0.4                         # rows 2, 11
    fn = 1 / 1.0 + 1 / 0.25                         # rows 3, 8
    tn = 1 / 0.4 + 1 / 0.8 + 1 / 0.5 + 1 / 1.0     # rows 4, 5, 7, 10
    judge, labels, _ = zip(*TABLE)
    table = gate_table(parse_gate("accuracy>=4"), judge, labels, _weights())
    assert (table["tp"], table["fp"], table["fn"], table["tn"]) == pytest.approx(
        (tp, fp, fn, tn))
    assert table["drawn"] == {"tp": 4, "fp": 2, "fn": 2, "tn": 4} and table["n"] == 12
    in_denominator = {"sensitivity": [0, 1, 6, 9, 3, 8], "specificity": [4, 5, 7, 10, 2, 11],
                      "ppv": [0, 1, 6, 9, 2, 11], "npv": [4, 5, 7, 10, 3, 8]}
    for name, k, n in (("sensitivity", tp, tp + fn), ("specificity", tn, tn + fp),
                       ("ppv", tp, tp + fp), ("npv", tn, tn + fn)):
        entry = table[name]
        assert entry["value"] == pytest.approx(k / n)
        assert (entry["k"], entry["n"]) == pytest.approx((k, n))
        w = [1 / TABLE[i][2] for i in in_denominator[name]]
        n_eff = sum(w) ** 2 / sum(v * v for v in w)
        assert entry["n_eff"] == pytest.approx(n_eff) and entry["n_drawn"] == len(w)
        trials = round(n_eff)
        ci = binomtest(round(k / n * trials), trials).proportion_ci(method="wilson")
        assert entry["ci95"] == pytest.approx([ci.low, ci.high])
        assert entry["ci_method"].startswith("Wilson, Kish n_eff")
    # Through agree, on a worksheet with the design: the same table.
    results, ok_ids = _run(tmp_path)
    report = _agree(results, _sheet(tmp_path / "s.csv", ok_ids),
                    gates=[parse_gate("accuracy>=4")])
    assert report.gates[0] == table


def test_weighted_kappa_mean_difference_and_agreement_equal_hand_computations(tmp_path):
    results, ok_ids = _run(tmp_path)
    report = _agree(results, _sheet(tmp_path / "s.csv", ok_ids))
    design, stats = report.design, report.criteria["accuracy"]
    assert design["kind"] == "active" and design["weighted"]
    assert (design["population"], design["drawn"], design["joined"]) == (40, 12, 12)
    assert design["weighted_statistics"] == list(WEIGHTED_STATISTICS)
    assert design["drawn_only_statistics"] == list(DRAWN_ONLY_STATISTICS)
    judge = np.array([j for j, _, _ in TABLE])
    labels = np.array([lab for _, lab, _ in TABLE])
    w = _weights()
    assert design["weights"]["n_eff"] == pytest.approx(w.sum() ** 2 / (w ** 2).sum())
    kappa = cohen_kappa_score(judge, labels, weights="quadratic", sample_weight=w)
    assert stats["kappa_quadratic"]["value"] == pytest.approx(kappa)
    assert stats["kappa_quadratic"]["ci_method"].startswith("weighted bootstrap")
    assert stats["kappa_quadratic"]["ci95"][0] <= kappa <= stats["kappa_quadratic"]["ci95"][1]
    total = sum(1 / pi for _, _, pi in TABLE)
    mean_abs = sum(abs(j - lab) / pi for j, lab, pi in TABLE) / total
    exact = sum(1 / pi for j, lab, pi in TABLE if j == lab) / total
    within = sum(1 / pi for j, lab, pi in TABLE if abs(j - lab) <= 1) / total
    assert stats["mean_abs_difference"]["value"] == pytest.approx(mean_abs)
    assert stats["exact"]["value"] == pytest.approx(exact)
    assert stats["within_one"]["value"] == pytest.approx(within)
    n_eff = total ** 2 / sum(1 / pi ** 2 for _, _, pi in TABLE)
    ci = binomtest(round(exact * round(n_eff)), round(n_eff)).proportion_ci(method="wilson")
    assert stats["exact"]["ci95"] == pytest.approx([ci.low, ci.high])
    for key in ("kappa_quadratic", "mean_abs_difference", "exact", "within_one"):
        assert stats[key]["weighted"]
    for key in ("spearman", "kendall_tau_b", "icc_a1", "krippendorff_alpha_ordinal"):
        assert "weighted" not in stats[key]
    # The drawn-only figures are the unweighted ones.
    plain = _agree(results, _plain(tmp_path / "p.jsonl")).criteria["accuracy"]
    for key in ("spearman", "kendall_tau_b", "icc_a1", "krippendorff_alpha_ordinal"):
        assert stats[key] == plain[key]
    assert stats["exact"]["value"] != pytest.approx(plain["exact"]["value"])
    # Confusion matrix: estimated counts (sums of 1/pi), rows label 1-5, columns judge 1-5.
    confusion = stats["confusion"]
    assert confusion["weighted"] and "sums of 1/pi" in confusion["counts"]
    expected = np.zeros((5, 5))
    for j, lab, pi in TABLE:
        expected[lab - 1][j - 1] += 1 / pi
    assert np.allclose(confusion["matrix"], expected)
    assert np.sum(confusion["drawn"]) == 12


def test_the_weighted_share_estimates_the_run_by_simulation():
    """A run of 2,000 cases where the judge agrees with the clinicians on 90% of the cases
    it is sure of and 30% of those it is not: an active draw takes mostly the unsure ones,
    so their plain share is biased down; weighted by 1/pi it is not. Drawn with floor 0.2
    (the default before issue 34), whose weights differ more than the default's: the
    weighting is what is tested."""
    rng = np.random.default_rng(25)
    ids = [f"p{i:04d}" for i in range(2000)]
    unsure = rng.random(2000) < 0.3
    uncertainty = dict(zip(ids, np.where(unsure, 1.5, 0.3).tolist()))
    agrees = np.where(unsure, rng.random(2000) < 0.3, rng.random(2000) < 0.9)
    truth = float(agrees.mean())
    position = {c: i for i, c in enumerate(ids)}
    weighted, plain, covered = [], [], []
    for seed in range(200):
        draw = active_draw(uncertainty, 100, seed, criterion="accuracy", floor=0.2)
        hits = agrees[[position[c] for c in draw.chosen]]
        share = agreement_share(hits, [1 / draw.probabilities[c] for c in draw.chosen])
        weighted.append(share["value"])
        plain.append(agreement_share(hits)["value"])
        covered.append(share["ci95"][0] <= truth <= share["ci95"][1])
    assert abs(np.mean(weighted) - truth) < 0.02
    assert np.mean(plain) < truth - 0.1  # the drawn cases over-represent the unsure ones
    assert np.mean(covered) >= 0.9  # Wilson on Kish's n_eff: about 95% (here conservative)


def test_active_text_says_what_is_weighted_in_readable_lines(tmp_path):
    results, ok_ids = _run(tmp_path)
    sheet = _sheet(tmp_path / "s.csv", ok_ids)
    done = _cli(results, sheet, "--pass", "accuracy>=4")
    assert done.exit_code == 0, done.output
    text = done.output
    assert "design: active, 12 of N = 40 cases drawn" in text
    assert "Kish effective n" in _flat(text)
    flat = _flat(text)
    assert "design-weighted by 1/pi (Hajek" in flat
    assert "on the drawn cases only (they over-represent the judge's uncertain cases)" in flat
    for title in ("Cohen kappa (quadratic) (w)", "mean |judge - label| (w)",
                  "exact agreement (w)", "within-one agreement (w)"):
        assert title in text
    assert "Spearman rho (w)" not in text and "ICC(A,1) / ICC2 (w)" not in text
    assert "design-weighted: estimated counts in the run: sums of 1/pi" in text
    assert "design-weighted, estimated counts in the run, sums of 1/pi" in flat
    assert "TP 22.0  FP 6.5  FN 5.0  TN 6.8" in text
    # 12 labels: the one warning is that they are too few for a p-value (issue 47).
    warned = [x for x in text.splitlines() if "WARNING" in x]
    assert len(warned) == 1 and "too few labels to decide" in _flat(text)
    assert "SECRET-ID" not in text
    lines = text.splitlines()
    design = lines[lines.index(next(x for x in lines if x.startswith("design: active"))):
                   lines.index(next(x for x in lines if x.startswith("n = ")))]
    gates = lines[lines.index(next(x for x in lines if x.startswith("  accuracy >= 4"))):]
    assert len(design) >= 3 and len(gates) == 6 + 1  # the rule's line wraps once
    assert all(len(line) <= 80 for line in design + gates), design + gates
    assert "Wilson on Kish's effective n" in flat and "n_eff 4.6, 6 drawn" in text
    report = json.loads(_cli(results, sheet, "--json", "--pass", "accuracy>=4").output)
    assert report["gates"][0]["weighted"] and report["design"]["split"]


def test_subgroups_and_verbosity_are_said_to_describe_the_drawn_cases(tmp_path):
    results, ok_ids = _run(tmp_path)
    groups = {cid: {"site": "a" if i % 2 else "b"} for i, cid in enumerate(IDS)}
    sheet = _sheet(tmp_path / "s.csv", ok_ids, **groups)
    done = _cli(results, sheet, "--by", "site")
    assert done.exit_code == 0, done.output
    assert "each group vs the rest (differences of means, Welch t 95% CI) (drawn cases, not " \
           "design-weighted)" in _flat(done.output)


def test_expected_scores_are_weighted_with_an_active_design(tmp_path):
    results, ok_ids = _run(tmp_path)
    sheet = _sheet(tmp_path / "s.csv", ok_ids)
    report = _agree(results, sheet, score_mode="expected", gates=[parse_gate("accuracy>=4")])
    stats = report.criteria["accuracy"]
    # Expected score: judge j with {j: 0.7, 3: 0.3} -> 0.7 j + 0.9 (3 stays 3).
    expected = [0.7 * j + 0.9 if j != 3 else 3.0 for j, _, _ in TABLE]
    total = sum(1 / pi for _, _, pi in TABLE)
    mean_abs = sum(abs(e - lab) / pi for e, (_, lab, pi) in zip(expected, TABLE)) / total
    assert stats["mean_abs_difference"]["value"] == pytest.approx(mean_abs)
    assert stats["mean_abs_difference"]["weighted"]
    assert stats["kappa_quadratic"].get("not_applicable")
    gate = report.gates[0]
    tp = sum(1 / pi for e, (_, lab, pi) in zip(expected, TABLE) if e >= 4 and lab >= 4)
    assert gate["weighted"] and gate["tp"] == pytest.approx(tp)
    assert _cli(results, sheet, "--score", "expected").exit_code == 0


def test_what_makes_the_sample_less_than_the_draw_is_said(tmp_path):
    results, ok_ids = _run(tmp_path)
    # Two rows not labelled yet, and a sheet drawn from other cases (another fingerprint).
    empty = {IDS[0]: {"grade": ""}, IDS[5]: {"grade": ""}}
    report = _agree(results, _sheet(tmp_path / "s.csv", ok_ids, **empty))
    notes = report.design["notes"]
    assert any("2 of the 12 drawn case(s) are not joined" in note for note in notes)
    assert report.design["joined"] == 10 and report.design["weighted"]
    other = {cid: {"design_population_sha256": "ab" * 32} for cid in IDS}
    report = _agree(results, _sheet(tmp_path / "o.csv", ok_ids, **other))
    assert any("not the 40 ok cases" in note for note in report.design["notes"])


# --- errors: one line, exit 2, naming lines, never a case id ----------------------------

@pytest.mark.parametrize("override, message", [
    ({IDS[1]: {"design": "random"}}, "lines 2 and 3: designs 'active' and 'random' mixed"),
    ({IDS[3]: {"inclusion_probability": "0"}}, "line 5: column 'inclusion_probability'"),
    ({IDS[3]: {"inclusion_probability": "often"}}, "line 5: column 'inclusion_probability'"),
])
def test_design_errors_are_one_line_exit_2_naming_lines_never_ids(tmp_path, override,
                                                                   message):
    results, ok_ids = _run(tmp_path)
    sheet = _sheet(tmp_path / "s.csv", ok_ids, **override)
    for extra in ((), ("--json",)):
        done = _cli(results, sheet, *extra)
        assert done.exit_code == 2, done.output
        assert message in done.output
        assert len(done.output.strip().splitlines()) == 1
        assert "Traceback" not in done.output and "SECRET" not in done.output


def test_the_report_page_shows_the_design_and_weighted_counts(tmp_path):
    from evaluator.report.build import build_report
    from evaluator.report.html import render_html

    results, ok_ids = _run(tmp_path)
    active = _sheet(tmp_path / "s.csv", ok_ids)
    report = build_report([results], worst_n=0, agreement_resamples=100,
                          labels=label_source([active], "grade"))
    html = render_html(report, plots=False)
    assert "design: active, 12 of N = 40 cases drawn" in html
    assert "design-weighted, estimated counts in the run: sums of 1/pi" in html
    assert "<td>10.0</td>" in html  # label 4, judge 4: one case with pi 0.1
    assert "weighted bootstrap BCa" in html  # (the page lists case ids by design)
    legacy = write_rows(tmp_path / "old.csv", [
        {"case_id": cid, "rubric": "trial_eligibility", "judge": "hand", "rank": "1",
         "reason": "lowest confidence", "min_confidence": "0.3", "max_spread": "",
         "gate_margin": "", "grade": str(label)} for cid, (_, label, _) in zip(IDS, TABLE)])
    report = build_report([results], worst_n=0, agreement_resamples=100,
                          labels=label_source([legacy], "grade"))
    html = render_html(report, plots=False)
    assert "these labels come from a &#39;priority&#39; worksheet" in html
    assert "WARNING: these labels" not in html


def test_unlabelled_rows_scale_the_weights_so_estimated_counts_stand_for_the_draw(tmp_path):
    """Two of the 12 drawn rows left unlabelled: the 10 joined stand for the 12 (missing at
    random), so each weight is 1/(pi x 10/12); the gate's rates (ratios) are unchanged."""
    results, ok_ids = _run(tmp_path)
    empty = {IDS[0]: {"grade": ""}, IDS[5]: {"grade": ""}}
    report = _agree(results, _sheet(tmp_path / "s.csv", ok_ids, **empty),
                    gates=[parse_gate("accuracy>=4")])
    kept = [row for i, row in enumerate(TABLE) if i not in (0, 5)]
    scaled = [12 / 10 / pi for _, _, pi in kept]
    table = report.gates[0]
    assert table["tp"] + table["fp"] + table["fn"] + table["tn"] == pytest.approx(sum(scaled))
    judge, labels, _ = zip(*kept)
    unscaled = gate_table(parse_gate("accuracy>=4"), judge, labels, [1 / pi for *_, pi in kept])
    for name in ("sensitivity", "specificity", "ppv", "npv"):
        assert table[name]["value"] == pytest.approx(unscaled[name]["value"])
    assert report.design["weights"]["sum"] == pytest.approx(sum(scaled))


def test_a_random_sheet_with_rows_deleted_is_said_to_be_no_longer_the_draw(tmp_path):
    records, truth = world(100, seed=3)
    results = write_results(tmp_path / "r.jsonl", records)
    run = CliRunner().invoke(cli, ["review", str(results), "--out", str(tmp_path / "s"),
                                   "--design", "random", "--n", "20", "--seed", "2"])
    assert run.exit_code == 0, run.output
    filled = fill_sheet(tmp_path / "s" / "review.csv", tmp_path / "f.csv", truth)
    report = agreement(results, label_source(filled, "accuracy.label"), criteria=["accuracy"],
                       resamples=200)
    assert not any("not the draw" in note for note in report.design["notes"])
    rows = read_rows(filled)
    edited = write_rows(tmp_path / "e.csv", [r for r in rows if r["accuracy.label"] != "5"])
    report = agreement(results, label_source(edited, "accuracy.label"), criteria=["accuracy"],
                       resamples=200)
    assert any("rows were deleted, added or edited" in n for n in report.design["notes"])
