"""How long does the decoding constraint take to build, per built-in rubric and per tokenizer?

The constraint is llguidance's grammar for the rubric's JSON schema (with the compile options
of ``evaluator/judges/backends/grammar.py``); the transformers backend builds it through
outlines' llguidance backend (``llguidance.grammar_from("json_schema", ...)``), vLLM's
``guidance`` backend from the same schema text. llguidance builds the grammar lazily, so the
cost does not grow with the vocabulary the way the outlines-core index it replaced did.

Per tokenizer (each ``--tokenizer`` folder; default: the embedded judge, SmolLM2, 49k tokens):

- ``llguidance.hf.from_tokenizer`` (what outlines' llguidance backend does on every start):
  the token bytes re-parsed from the Hugging Face tokenizer in Rust;
- our ``from_hf()`` cold (same, plus writing the disk cache) and then from the disk cache
  (``$EVALUATOR_CACHE/llguidance/<sha256>.json``; a temporary ``EVALUATOR_CACHE`` here, so
  the first call is cold whatever is cached already).

Per rubric, after the tokenizer is loaded (the tokenizer from the disk cache, with our
slices, as the backend uses it):

- cold: the rubric's first build in the process: grammar from the schema, the first
  ``LLMatcher`` and its first mask (what the first step of the first batch waits for);
- again: the same a second time (llguidance keeps no grammar cache; the backend keeps one
  ``BatchConstraint`` per schema for a run, so a run pays cold once per rubric);
- before (``--before``, opt-in: it takes seconds to minutes per rubric and GBs of memory):
  what the backend did before this change, outlines-core's regex from the schema
  (``build_regex_from_schema(schema, whitespace_pattern="")``) and its ``Index`` over
  outlines' vocabulary. By default only on the first tokenizer and only for the two
  rubrics that built fastest (``--before-rubrics``, ``--before-all-tokenizers``).

Re-run:  PYTHONPATH=. .venv/bin/python \\
             benchmarks/schema_compile.py [--tokenizer DIR ...] [--rubrics a,b] [--repeats N]
             [--before [--before-rubrics a,b] [--before-all-tokenizers]] [--quick]
         (default: the embedded judge's tokenizer; under a minute without --before)

Prints, per tokenizer and rubric, the figures, then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import median, print_figures, print_machine, rerun_command, tokenizer_folders

from evaluator.judges.offline import force_offline
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.schema import output_json_schema

RUBRICS = ("drug_monograph_similarity", "pathology_report", "trial_eligibility",
           "ecg_interpretation")
# The two rubrics whose outlines-core index built fastest on the 49k vocabulary (4.8 and
# 7.0 s in benchmarks/results/schema_compile.txt; ecg_interpretation took 76 s).
BEFORE_RUBRICS = ("trial_eligibility", "drug_monograph_similarity")
TARGET_MS = 50.0


def _schema_text(name: str) -> str:
    return json.dumps(output_json_schema(load_rubric(name)), separators=(",", ":"))


def _timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - started, value


def build_constraint(llg_tokenizer, schema: str):
    """What the backend's first batch with this schema waits for: outlines' llguidance
    grammar spec from our constraint schema, one matcher, its first mask. Returns the
    matcher (checked: not in error)."""
    import llguidance
    from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

    from evaluator.judges.backends.grammar import constraint_schema

    grammar = llguidance.grammar_from("json_schema", constraint_schema(schema))
    matcher = llguidance.LLMatcher(llg_tokenizer, grammar, log_level=0)
    mask = allocate_token_bitmask(1, llg_tokenizer.vocab_size)
    fill_next_token_bitmask(matcher, mask)
    if matcher.is_error():
        raise SystemExit(f"llguidance refused the schema: {matcher.get_error()[:300]}")
    return matcher


def tokenizer_setup(hf_tokenizer, folder: Path) -> tuple[dict, object]:
    """Seconds of llguidance.hf.from_tokenizer and of from_hf() cold and from the disk
    cache (in a temporary EVALUATOR_CACHE); returns them and the cached LLTokenizer."""
    import llguidance.hf

    from evaluator.judges.backends.llg_tokenizer import from_hf

    hf_s, _ = _timed(lambda: llguidance.hf.from_tokenizer(hf_tokenizer))
    saved = os.environ.get("EVALUATOR_CACHE")
    with tempfile.TemporaryDirectory(prefix="schema-compile-") as cache:
        os.environ["EVALUATOR_CACHE"] = cache
        try:
            cold_s, _ = _timed(lambda: from_hf(hf_tokenizer, folder))
            files = list((Path(cache) / "llguidance").glob("*.json"))
            cached_s, llg_tokenizer = _timed(lambda: from_hf(hf_tokenizer, folder))
            cache_mb = files[0].stat().st_size / 2**20 if files else 0.0
        finally:
            if saved is None:
                os.environ.pop("EVALUATOR_CACHE", None)
            else:
                os.environ["EVALUATOR_CACHE"] = saved
    return {"llguidance_hf_s": round(hf_s, 3), "from_hf_cold_s": round(cold_s, 3),
            "from_hf_cached_s": round(cached_s, 3), "cache_file_mb": round(cache_mb, 2)}, \
        llg_tokenizer


def before_vocabulary(hf_tokenizer):
    """outlines' outlines-core vocabulary, as its OutlinesCoreBackend builds it."""
    from outlines.backends.outlines_core import OutlinesCoreBackend
    from outlines.models.transformers import TransformerTokenizer

    wrapped = TransformerTokenizer(hf_tokenizer)
    return OutlinesCoreBackend.create_outlines_core_vocabulary(
        hf_tokenizer.get_vocab(), hf_tokenizer.eos_token_id, hf_tokenizer.eos_token,
        wrapped.convert_token_to_string)


def before_index(vocabulary, schema: str):
    """outlines-core's index for the schema (the backend's constraint before llguidance)."""
    from outlines_core import Index
    from outlines_core.json_schema import build_regex_from_schema

    return Index(build_regex_from_schema(schema, whitespace_pattern=""), vocabulary)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, action="append", default=None,
                        metavar="DIR", help="a folder with a Hugging Face tokenizer "
                        "(tokenizer.json, tokenizer_config.json); repeatable (default: the "
                        "embedded judge's)")
    parser.add_argument("--rubrics", default=",".join(RUBRICS))
    parser.add_argument("--repeats", type=int, default=5,
                        help="builds after the cold one, per rubric (median reported)")
    parser.add_argument("--before", action="store_true",
                        help="also time outlines-core's index (slow: seconds to minutes each)")
    parser.add_argument("--before-rubrics", default=",".join(BEFORE_RUBRICS),
                        help="the rubrics --before builds an index for")
    parser.add_argument("--before-all-tokenizers", action="store_true",
                        help="--before on every tokenizer, not only the first")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: the tiny-random model's tokenizer, one rubric")
    args = parser.parse_args(argv)
    force_offline()
    if args.quick:
        args.rubrics, args.repeats = "drug_monograph_similarity", 2
    rubrics = args.rubrics.split(",")
    before_rubrics = args.before_rubrics.split(",") if args.before else []
    unknown = sorted(set(rubrics + before_rubrics) - set(RUBRICS))
    if unknown:
        parser.error(f"unknown rubric(s) {unknown}; built-in: {', '.join(RUBRICS)}")
    folders = tokenizer_folders(args.tokenizer, args.quick)

    from transformers import AutoTokenizer

    print_machine()
    figures: dict = {"tokenizers": {}, "target_ms": TARGET_MS, "repeats": args.repeats}
    for number, folder in enumerate(folders):
        load_s, hf_tokenizer = _timed(lambda folder=folder: AutoTokenizer.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False))
        setup, llg_tokenizer = tokenizer_setup(hf_tokenizer, folder)
        label = folder.name if folder.name != "models" else folder.parent.parent.name
        row = {"folder": str(folder), "vocabulary": len(hf_tokenizer),
               "hf_tokenizer_load_s": round(load_s, 3), **setup, "rubrics": {}}
        print(f"tokenizer {label}: {row['vocabulary']} tokens; transformers load "
              f"{load_s:.2f} s; llguidance.hf.from_tokenizer {setup['llguidance_hf_s']:.2f} s; "
              f"from_hf() cold {setup['from_hf_cold_s']:.2f} s, from the disk cache "
              f"{setup['from_hf_cached_s']:.2f} s ({setup['cache_file_mb']:.1f} MB file)",
              flush=True)
        print(f"  {'rubric':28} {'cold ms':>8} {'again ms':>9}", flush=True)
        for name in rubrics:
            schema = _schema_text(name)
            cold, _ = _timed(build_constraint, llg_tokenizer, schema)
            again = [_timed(build_constraint, llg_tokenizer, schema)[0]
                     for _ in range(args.repeats)]
            row["rubrics"][name] = {"cold_ms": round(1000 * cold, 2),
                                    "again_ms": round(1000 * median(again), 2)}
            print(f"  {name:28} {1000 * cold:8.2f} {1000 * median(again):9.2f}", flush=True)
        if before_rubrics and (number == 0 or args.before_all_tokenizers):
            vocab_s, vocabulary = _timed(before_vocabulary, hf_tokenizer)
            row["before_vocabulary_s"] = round(vocab_s, 3)
            print(f"  before (outlines-core): outlines' vocabulary {vocab_s:.2f} s", flush=True)
            for name in before_rubrics:
                schema = _schema_text(name)
                seconds, index = _timed(before_index, vocabulary, schema)
                del index
                row["rubrics"].setdefault(name, {})["before_s"] = round(seconds, 2)
                print(f"  {name:28} index {seconds:8.2f} s", flush=True)
        figures["tokenizers"][label] = row
    colds = [r["cold_ms"] for t in figures["tokenizers"].values()
             for r in t["rubrics"].values() if "cold_ms" in r]
    figures["worst_cold_ms"] = max(colds)
    print(f"worst cold build: {figures['worst_cold_ms']:.1f} ms (target <= {TARGET_MS:.0f} ms: "
          f"{'met' if figures['worst_cold_ms'] <= TARGET_MS else 'NOT met'})")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
