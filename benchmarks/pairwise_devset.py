"""Pairwise judging on the shared dev set (issue 26): gpt-4o against Llama-3.3-70B-Instruct on
the 53 patient-trial pairs both answered, beside the clinician-grounded truth.

Two steps:

    # 1. the two case files and the truth (no model): DIR/cases_gpt4o.jsonl,
    #    DIR/cases_llama.jsonl (case id: the pair's "sigir-...-NCT..." suffix) and
    #    DIR/truth.csv (case_id, preferred: A, B or tie)
    PYTHONPATH=. .venv/bin/python benchmarks/pairwise_devset.py build DIR
    # then judge the pairs (each pair in both orders), e.g. with the default judge:
    .venv/bin/evaluator run -r trial_eligibility_pairwise -i DIR/cases_gpt4o.jsonl \\
        --versus DIR/cases_llama.jsonl --answer-column workflow_answer \\
        --systems gpt-4o,llama-3.3-70b -o DIR/default.jsonl [-m tiny-random]
    # 2. the figures: per results file and criterion, the judge's win rate of gpt-4o,
    #    position consistency and bias, Cohen's kappa with the truth, its mean probability
    #    of the choice it wrote; and the truth's own win rate (evaluator.analysis.pairwise.compare,
    #    the code behind `evaluator compare`)
    PYTHONPATH=. .venv/bin/python benchmarks/pairwise_devset.py analyse DIR RESULTS...

The truth: a generator's answer is correct when its eligibility score's sign agrees with the
expert label (score > 0 and expert_qrel 2, or score <= 0 and qrel 1; ../shared/data/README.md).
Per pair the preferred answer is the correct one when exactly one is correct, else a tie.
Prints counts and rates only, never case text.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import print_figures, rerun_command
from evaluator.analysis.intervals import format_ci, format_number
from evaluator.analysis.pairwise.compare import compare
from evaluator.analysis.pairwise.pairwise import win_rate
from evaluator.data.results import read_results
from evaluator.data.sources import LabelSource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "trial_eligibility_sigir2014.jsonl"
MODELS = {"gpt4o": "gpt-4o", "llama": "Llama-3.3-70B-Instruct"}


def _correct(row: dict) -> int:
    return int((row["generator_eligibility_score"] > 0) == (row["expert_qrel"] == 2))


def build(folder: Path, source: Path = SHARED) -> dict[str, int]:
    """Write the two case files (the pairs both generators answered) and the truth."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]
    by_model: dict[str, dict[str, dict]] = {short: {} for short in MODELS}
    for row in rows:
        short = next(s for s, name in MODELS.items() if row["generator_model"] == name)
        pair_id = row["case_id"][row["case_id"].index("sigir-"):]
        by_model[short][pair_id] = dict(row, case_id=pair_id, generator_correct=_correct(row))
    common = sorted(set(by_model["gpt4o"]) & set(by_model["llama"]))
    folder.mkdir(parents=True, exist_ok=True)
    for short, cases in by_model.items():
        with (folder / f"cases_{short}.jsonl").open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(cases[i]) + "\n" for i in common)
    truth = {}
    for pair_id in common:
        a, b = by_model["gpt4o"][pair_id]["generator_correct"], by_model["llama"][pair_id][
            "generator_correct"]
        truth[pair_id] = "A" if a > b else "B" if b > a else "tie"
    with (folder / "truth.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case_id", "preferred"])
        writer.writerows(sorted(truth.items()))
    counts = {"pairs": len(common), "gpt4o_correct": sum(
        by_model["gpt4o"][i]["generator_correct"] for i in common), "llama_correct": sum(
        by_model["llama"][i]["generator_correct"] for i in common)}
    counts.update({f"truth_{k}": list(truth.values()).count(k) for k in ("A", "B", "tie")})
    return counts


def _confidence(path: Path, criterion: str) -> float | None:
    """The judge's mean probability of the choice it wrote, over both orders of every ok
    pair (how sure it was, whatever the position made it choose)."""
    chosen = [order.probabilities[criterion][order.choices[criterion]]
              for record in read_results(path) if record.status == "ok" and record.pairwise
              for order in record.pairwise.orders
              if order.probabilities and order.choices and criterion in order.probabilities]
    return sum(chosen) / len(chosen) if chosen else None


def analyse(folder: Path, results: list[Path]) -> dict:
    """Per results file and criterion: the judge's figures and kappa with the truth."""
    truth_path = folder / "truth.csv"
    with truth_path.open(encoding="utf-8", newline="") as handle:
        truth = [row["preferred"] for row in csv.DictReader(handle)]
    truth_rate = win_rate(truth)
    print(f"truth (clinician-grounded): gpt-4o preferred {truth.count('A')}, Llama "
          f"{truth.count('B')}, tie {truth.count('tie')} of {len(truth)} pairs; gpt-4o's "
          f"win rate {format_number(truth_rate['value'])} {format_ci(truth_rate['ci95'])}")
    figures = {"truth_win_rate": truth_rate["value"], "files": {}}
    for path in results:
        report = compare([path], labels=LabelSource((truth_path,), "preferred"))
        judges = ", ".join(report.files[0]["judges"])
        print(f"\n{path.name} (judge {judges}; {report.files[0]['ok']} ok of "
              f"{report.files[0]['records']} pairs)")
        print(f"  {'criterion':<14}{'win rate gpt-4o':<24}{'consistent':>10}"
              f"{'pos. bias':>10}{'kappa':>8}{'P(chosen)':>11}")
        per_file = {}
        for entry in report.comparisons:
            rate, consistent = entry["win_rate"], entry["position_consistency"]
            bias, labels = entry["position_bias"], entry.get("labels") or {}
            kappa = (labels.get("kappa") or {}).get("value")
            confidence = _confidence(path, entry["criterion"])
            print(f"  {entry['criterion']:<14}"
                  f"{format_number(rate['value']) + ' ' + format_ci(rate['ci95']):<24}"
                  f"{format_number(consistent['value']):>10}{format_number(bias['value']):>10}"
                  f"{format_number(kappa):>8}{format_number(confidence):>11}")
            per_file[entry["criterion"]] = {
                "win_rate": rate["value"], "win_rate_ci": rate["ci95"],
                "consistency": consistent["value"], "position_bias": bias["value"],
                "position_bias_ci": bias["ci95"], "kappa_truth": kappa,
                "mean_p_chosen": confidence,
                "outcomes": {k: rate[k] for k in ("a_wins", "b_wins", "ties", "inconsistent")}}
        figures["files"][path.name] = per_file
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    make = sub.add_parser("build")
    make.add_argument("folder", type=Path)
    make.add_argument("--source", type=Path, default=SHARED)
    look = sub.add_parser("analyse")
    look.add_argument("folder", type=Path)
    look.add_argument("results", type=Path, nargs="+")
    args = parser.parse_args()
    print(f"re-run: {rerun_command()}")
    if args.step == "build":
        figures = build(args.folder, args.source)
        print(json.dumps(figures))
    else:
        figures = analyse(args.folder, args.results)
    print_figures(figures)


if __name__ == "__main__":
    main()
