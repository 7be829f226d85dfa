"""Which llguidance slices should the judge's tokenizer carry: set-up time against fill time.

llguidance precomputes "slices" (token subsets matching a regex) when it builds its
tokenizer, once per run; a mask step inside a string whose state allows a whole slice adds it
at once instead of walking the token trie. Slices cost set-up time, so only those that apply
to our grammars are worth building. This script compares, per tokenizer and per string
charset of a rubric (``ascii``, the built-ins' default, and ``unicode``):

- ``ours``: :data:`evaluator.judges.backends.grammar.EXTRA_SLICES`, what the backend uses;
- ``ours{1,10}`` and ``ours{1,30}``: half of ours, one length bound per charset (fewer
  slices: less set-up; tokens outside the slice, or a slice that no longer fits the string's
  remaining length, are walked);
- ``ours+general``: those plus llguidance's general slices (the backend before this script);
- ``previous``: the slices before this script (general, and a Unicode body that allowed the
  quote and backslash, which cannot be written unescaped, so it never applied);
- ``none``: no slices.

For each: the seconds to build the ``LLTokenizer`` from the cached token bytes (what a run
pays once), and the mean fill per decode step of ``BatchConstraint`` at batch 16 (the masks
only, no model; ``mask_cost.py``'s rows: valid verdicts from the rubric's schema with
generic filler prose, German for ``unicode``; never case text). The set-up is timed once
per configuration, in the order above; the fills take turns within each repeat, so load
changes hit all alike. Ratios are to ``ours`` in the same run.

Re-run:  PYTHONPATH=. .venv/bin/python \\
             benchmarks/slices.py [--tokenizer DIR ...] [--repeats N] [--quick]
         (default: the embedded judge's tokenizer; about a minute per tokenizer)

Prints one line per tokenizer, charset and configuration, then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mask_cost
from bench_common import print_figures, print_machine, rerun_command, set_threads, tokenizer_folders

from evaluator.judges.offline import force_offline
from evaluator.rubrics.rubric import Rubric
from evaluator.rubrics.schema import output_json_schema

# Generic German clinical prose with symbols (no case text): what a unicode judge writes.
UNICODE_FILLER = ("Befund: Sinusrhythmus, normale Frequenz; Achse, PR-, QRS- und QT-Zeit im "
                  "Normbereich. Keine ST-Hebung – T-Wellen überwiegend positiv; Kalium 4,1 "
                  "mmol/l, Dosis 5 µg. Vergleich mit Vorbefund fehlt. ")
BATCH = 16


def rubric_for(charset: str) -> Rubric:
    """A rubric shaped like the built-ins (a score, a long explanation, scored items with
    explanations) whose strings use ``charset``."""
    return Rubric.model_validate({
        "format_version": 1, "name": f"slices_{charset}", "title": "slices",
        "inputs": {"a": {"description": "x"}}, "template": "{{ a | fence }}",
        "output": [{"key": "score", "type": "integer", "values": [1, 5]},
                   {"key": "explanation", "type": "string", "max_length": 300,
                    "charset": charset},
                   {"key": "items", "type": "items", "values": [0, 10], "max_items": 4,
                    "explanation_max_length": 200, "explanation_charset": charset}]})


def configurations() -> dict[str, list[str]]:
    from llguidance import LLTokenizer

    from evaluator.common.charsets import ASCII_BODY, PRINTABLE_BODY
    from evaluator.judges.backends.grammar import EXTRA_SLICES

    general = list(LLTokenizer.general_slices())
    previous = general + [f"{ASCII_BODY}{{1,10}}", f"{ASCII_BODY}{{1,30}}",
                          f"{PRINTABLE_BODY}{{1,10}}", f"{PRINTABLE_BODY}{{1,30}}"]
    return {"ours": list(EXTRA_SLICES),
            "ours{1,10}": [x for x in EXTRA_SLICES if x.endswith("{1,10}")],
            "ours{1,30}": [x for x in EXTRA_SLICES if x.endswith("{1,30}")],
            "ours+general": list(EXTRA_SLICES) + general, "previous": previous, "none": []}


def build_seconds(hf_tokenizer, folder: Path, slices: list[str]):
    """(seconds, LLTokenizer) built from the disk cache's token bytes with ``slices``."""
    import llguidance

    from evaluator.judges.backends import llg_tokenizer
    from evaluator.judges.paths import cache_dir

    llg_tokenizer.from_hf(hf_tokenizer, folder)  # makes sure the cache holds this tokenizer
    key = llg_tokenizer.cache_key(hf_tokenizer, folder)
    cached = llg_tokenizer._read_cache(cache_dir() / "llguidance" / f"{key}.json", key,
                                       hf_tokenizer)
    if cached is None:
        raise SystemExit(f"the llguidance tokenizer cache for {folder} cannot be read")
    tokens, special, eos = cached
    started = time.perf_counter()
    wrapper = llguidance.TokenizerWrapper(
        llg_tokenizer._Encoder(hf_tokenizer, tokens, special, eos))
    built = llguidance.LLTokenizer(wrapper, n_vocab=len(tokens), eos_token=eos, slices=slices)
    return time.perf_counter() - started, built


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, action="append", default=None,
                        metavar="DIR", help="a folder with a Hugging Face tokenizer; "
                        "repeatable (default: the embedded judge's)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: the tiny-random model's tokenizer, one repeat")
    args = parser.parse_args(argv)
    force_offline()
    if args.quick:
        args.repeats = 1
    threads = set_threads(1)
    folders = tokenizer_folders(args.tokenizer, args.quick)

    from transformers import AutoTokenizer

    from evaluator.judges.backends.constraint import BatchConstraint
    from evaluator.judges.backends.grammar import build_grammar

    print_machine(threads)
    configs = configurations()
    figures: dict = {"repeats": args.repeats, "batch": BATCH, "tokenizers": {}}
    print(f"{'tokenizer':28} {'vocab':>7} {'charset':8} {'slices':13} {'set-up s':>8} "
          f"{'fill ms/step':>12} {'fill vs ours':>12}", flush=True)
    ascii_filler = mask_cost.FILLER
    for folder in folders:
        hf_tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True,
                                                     trust_remote_code=False)
        label = folder.name if folder.name != "models" else folder.parent.parent.name
        built = {name: build_seconds(hf_tokenizer, folder, slices)
                 for name, slices in configs.items()}
        vocabulary = next(iter(built.values()))[1].vocab_size
        result: dict = {"vocabulary": vocabulary,
                        "setup_s": {name: round(s, 3) for name, (s, _) in built.items()},
                        "fill_ms_per_step": {}}
        for charset in ("ascii", "unicode"):
            schema = output_json_schema(rubric_for(charset))
            grammar = build_grammar(schema)
            mask_cost.FILLER = ascii_filler if charset == "ascii" else UNICODE_FILLER
            try:
                rows = [mask_cost.row_tokens(hf_tokenizer, schema, seed,
                                             built["ours"][1].eos_token)
                        for seed in range(BATCH)]
            finally:
                mask_cost.FILLER = ascii_filler
            fills: dict[str, list[float]] = {name: [] for name in configs}
            for _ in range(args.repeats):
                for name, (_, tokenizer) in built.items():
                    steps = mask_cost.run_batch(BatchConstraint(grammar, tokenizer), rows,
                                                vocabulary)
                    fills[name].append(1000 * statistics.fmean(s[0] for s in steps))
            means = {name: statistics.fmean(v) for name, v in fills.items()}
            result["fill_ms_per_step"][charset] = {n: round(m, 4) for n, m in means.items()}
            for name in configs:
                print(f"{label:28} {vocabulary:>7} {charset:8} {name:13} "
                      f"{built[name][0]:8.3f} {means[name]:12.4f} "
                      f"{means[name] / means['ours']:11.2f}x", flush=True)
        figures["tokenizers"][label] = result
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
