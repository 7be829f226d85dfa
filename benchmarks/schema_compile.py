"""How long does building the decoding constraint take, per built-in rubric?

The constraint is the regex outlines-core compiles from a rubric's JSON schema into an index
over the judge's vocabulary (the CPU path builds it through ``outlines.Generator``; vLLM's
outlines backend builds the same index from the same regex). It is built once per rubric per
run, so it is start-up cost, and it grows with the vocabulary.

Re-run:  EVALUATOR_CACHE=.cache/evaluator .venv/bin/python benchmarks/schema_compile.py \\
             [--model-path DIR]      (default: the embedded judge, SmolLM2, 49k vocabulary)

Prints, per rubric, the seconds to build the constraint (the first build in the process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.offline import force_offline  # noqa: E402
from evaluator.rubric import load_rubric  # noqa: E402
from evaluator.schema import output_json_schema  # noqa: E402

RUBRICS = ("drug_monograph_similarity", "pathology_report", "trial_eligibility",
           "ecg_interpretation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", type=Path, default=None,
                        help="local Hugging Face model folder (default: the embedded judge)")
    args = parser.parse_args()
    force_offline()
    import outlines
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evaluator.embedded_judge import prepare_embedded_judge

    path = args.model_path or prepare_embedded_judge()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = outlines.from_transformers(
        AutoModelForCausalLM.from_pretrained(path, local_files_only=True), tokenizer)
    print(f"judge {path.name}: {len(tokenizer)} tokens in the vocabulary")
    print(f"{'rubric':28} {'index s':>8}")
    for name in RUBRICS:
        schema = json.dumps(output_json_schema(load_rubric(name)), separators=(",", ":"))
        started = time.perf_counter()
        # What TransformersBackend._processor does once per rubric per run.
        outlines.Generator(model, outlines.types.JsonSchema(schema, whitespace_pattern=""))
        print(f"{name:28} {time.perf_counter() - started:>8.1f}", flush=True)

if __name__ == "__main__":
    main()
