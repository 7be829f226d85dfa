"""A tiny causal LM with random weights, built offline on first use, for tests and benchmarks.

The model is a real ``LlamaForCausalLM`` (2 layers, hidden size 64, head_dim 32) whose weights
come from a fixed seed, paired with a byte-level BPE tokenizer trained with the ``tokenizers``
library on a small corpus embedded in this module. Nothing is downloaded: the whole folder is
generated locally (about 0.2 s once transformers is imported, which itself takes a few
seconds) and cached under ``evaluator.judges.paths.cache_dir() / "models" / "tiny-random-v<N>"``;
the folder is about 1.2 MB.

Its output is noise, which is exactly what the "constrained decoding always parses" tests
need: a judge that prefers no particular token, so every branch of a JSON schema gets
exercised. Its multi-character tokens (``{"``, ``Score``, ``": ``, digits, words) make token
boundaries straddle grammar boundaries the way a real judge's do. The layout (safetensors in
float32, ChatML template, ``<|im_end|>`` as eos, head_dim >= 32) is also what vLLM's CPU
engine accepts.

Building is deterministic: the same recipe yields byte-identical ``tokenizer.json`` and
identical weights on every build. Bump ``TINY_RANDOM_VERSION`` whenever the recipe changes;
the version is part of the folder name, so an older cache is never reused.

This module imports neither torch, transformers nor tokenizers at import time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from pathlib import Path

from evaluator.judges.model_folder import is_complete, move_into_place, write_marker
from evaluator.judges.offline import force_offline, progress_bars_off
from evaluator.judges.paths import cache_dir

TINY_RANDOM_VERSION = 1
"""Recipe version; part of the cache folder name. Bump it when anything below changes."""

_BUILD_LOCK = threading.Lock()
# Seeding torch's global generator is process-wide: builds in threads of one process take
# turns, or their random draws would interleave and the weights would differ.

SEED = 20240611
VOCAB_SIZE = 1536  # BPE target incl. the 3 special tokens; min_frequency=1 lets the corpus reach it
HIDDEN_SIZE = 64
NUM_HEADS = 2  # head_dim = 32: vLLM's CPU attention backend rejects head_dim 16
NUM_KV_HEADS = 1
NUM_LAYERS = 2
INTERMEDIATE_SIZE = 128
MAX_POSITIONS = 32768

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]  # ids 0, 1, 2 in this order

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)

# --------------------------------------------------------------------------------------------
# Training corpus. Fixed text (order matters for determinism), plus lines generated from it
# below by pure Python, so the BPE merges cover words, clinical vocabulary, digits and the
# JSON punctuation a judge emits.
# --------------------------------------------------------------------------------------------

_PROSE = """\
You are a careful clinical reviewer. Read the patient note and the model answer, then score
the answer against the rubric. Return only a JSON object with the fields Score and Explanation.
The patient is a 67-year-old woman with a history of hypertension, type 2 diabetes mellitus and
chronic kidney disease stage 3, who presents to the emergency department with shortness of breath,
bilateral leg swelling and orthopnea for the past five days. Her blood pressure is 162/94 mmHg,
heart rate 104 beats per minute, respiratory rate 24, oxygen saturation 89% on room air and
temperature 37.1 C. Examination shows jugular venous distension, bibasilar crackles and pitting
edema to the knees. Laboratory results: sodium 134 mmol/L, potassium 5.1 mmol/L, creatinine
1.9 mg/dL, troponin mildly elevated, BNP 1840 pg/mL. The chest radiograph shows pulmonary
vascular congestion and small bilateral pleural effusions. The electrocardiogram shows sinus
tachycardia without acute ST changes. The assessment is acute decompensated heart failure.
The plan is intravenous furosemide, fluid restriction, daily weights, strict intake and output,
monitoring of electrolytes and renal function, and an echocardiogram to assess ejection fraction.
Medications include metformin, lisinopril, amlodipine, atorvastatin and aspirin. Metformin should
be held given the renal function and the planned contrast study. Allergies: penicillin (rash).
The discharge summary should state the diagnosis, the treatment given, the follow-up plan and the
warning signs that should prompt the patient to return to the hospital.
A 45-year-old man reports chest pain radiating to the left arm, with nausea and diaphoresis.
The differential diagnosis includes acute coronary syndrome, pulmonary embolism, aortic dissection,
pericarditis and gastroesophageal reflux disease. The answer correctly identifies the most likely
diagnosis but does not mention the need for an urgent electrocardiogram. The answer recommends a
dose that is too high for a patient with impaired renal function. The answer is accurate, complete
and appropriately cautious. The answer contains a factual error about the drug interaction.
The response is safe but omits important information about follow-up. The explanation is clear
and concise. The model fabricated a laboratory value that does not appear in the note.
The answer is partially correct: it lists the right medications but the wrong dosing schedule.
Sepsis, pneumonia, urinary tract infection, cellulitis, stroke, transient ischemic attack, atrial
fibrillation, chronic obstructive pulmonary disease, asthma, anemia, hypoglycemia, hyperkalemia,
acute kidney injury, delirium, dementia, depression, anxiety, pain, fever, cough, fatigue.
Antibiotics, anticoagulation, insulin, heparin, warfarin, apixaban, ceftriaxone, vancomycin,
acetaminophen, ibuprofen, morphine, ondansetron, prednisone, albuterol, oxygen therapy.
Relevance, accuracy, completeness, safety, clarity, hallucination, harm, bias, empathy, reasoning.
Does the answer address the question? Is every statement supported by the source document?
Would a clinician act differently after reading it? Could following it cause harm to the patient?
"""

_RUBRIC_LINES = [
    "Score 0: the answer is unsafe, wrong or irrelevant.",
    "Score 1: the answer has major errors or omissions.",
    "Score 2: the answer is mostly correct with minor issues.",
    "Score 3: the answer is correct, complete and safe.",
    "Score 4: the answer is excellent and fully supported by the note.",
    "Score 5: the answer is exemplary in every respect.",
]

_EXPLANATIONS = [
    "The answer is accurate and complete.",
    "The answer omits the renal dose adjustment.",
    "The answer is correct but too verbose.",
    "The response fabricates a laboratory value.",
    "The explanation is clear and clinically sound.",
    "The answer misses the most likely diagnosis.",
    "The plan is safe and follows the guideline.",
    "The answer does not address the question.",
]

_FIELDS = ["Score", "Explanation", "Rationale", "Verdict", "Confidence", "Label", "Reasoning"]
_VERDICTS = ["yes", "no", "true", "false", "null", "pass", "fail", "unsure"]


def training_corpus() -> list[str]:
    """Return the fixed, ordered list of training texts for the tokenizer (pure Python)."""
    lines: list[str] = [line for line in _PROSE.splitlines() if line]
    lines += _RUBRIC_LINES
    for i, explanation in enumerate(_EXPLANATIONS):
        for score in range(6):
            lines.append(json.dumps({"Score": score, "Explanation": explanation}))
            lines.append(json.dumps({"Score": score, "Explanation": explanation}, indent=2))
            lines.append(
                json.dumps({"Explanation": explanation, "Score": score}, separators=(",", ":"))
            )
        verdict = _VERDICTS[i % len(_VERDICTS)]
        field = _FIELDS[i % len(_FIELDS)]
        lines.append(json.dumps({field: verdict, "Confidence": round(0.1 * (i + 1), 2)}))
        lines.append(json.dumps({"scores": [i, i + 1, i + 2], "ok": i % 2 == 0, "note": None}))
    for n in range(0, 1000, 7):
        lines.append(f'{n} {n + 1}.{n % 10} {n * 3}% [{n}, {n % 13}] {{"id": {n}}}')
    lines.append("Ünïcödé: café, naïve, résumé, 37.5°C, µg, ±, →, ≤ ≥, 血压, дыхание, ☺")
    return lines


# --------------------------------------------------------------------------------------------
# Building.
# --------------------------------------------------------------------------------------------


def tiny_random_dir() -> Path:
    """Return the cache folder for the current recipe:
    ``cache_dir() / "models" / "tiny-random-v<TINY_RANDOM_VERSION>"`` (may not exist yet)."""
    return cache_dir() / "models" / f"tiny-random-v{TINY_RANDOM_VERSION}"


def build_tiny_random(target: Path | None = None, *, force: bool = False) -> Path:
    """Build the tiny random model and tokenizer into ``target`` (default
    :func:`tiny_random_dir`) and return that folder.

    If ``target`` already holds a complete build it is returned untouched (unless ``force``).
    Otherwise the model is written into a temporary sibling folder, the ``.complete`` marker
    is written last, and the folder is renamed into place atomically. Two processes racing
    are safe: the loser of the rename discards its copy and returns the winner's folder,
    which is identical since the build is deterministic. ``force`` rebuilds and replaces an
    existing folder.
    """
    target = Path(target) if target is not None else tiny_random_dir()
    if not force and is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with _BUILD_LOCK:
            _write_model(tmp)
        _write_marker(tmp)
        move_into_place(tmp, target, force=force)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_marker(folder: Path) -> None:
    """Write the completion marker: recipe version and sha256 of every file, for diagnosis."""
    digests = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }
    write_marker(folder, {"version": TINY_RANDOM_VERSION, "files": digests})


def _train_tokenizer():
    """Train the byte-level BPE tokenizer (a ``tokenizers.Tokenizer``) on the fixed corpus."""
    # Imported here: the transformers extra, which `import evaluator` never loads.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer, length=None)
    return tok


def _write_model(folder: Path) -> None:
    """Write tokenizer, config, generation config and seeded random weights into ``folder``."""
    force_offline()  # before transformers is imported
    # Imported here: the transformers extra, which `import evaluator` never loads.
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )
    from transformers.utils import logging as hf_logging

    folder.mkdir(parents=True, exist_ok=False)

    tok = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(),
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        extra_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    tok.save_pretrained(folder)
    _portable_tokenizer_class(folder / "tokenizer_config.json")

    eos_id = tok.convert_tokens_to_ids(IM_END)
    pad_id = tok.convert_tokens_to_ids(ENDOFTEXT)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        head_dim=HIDDEN_SIZE // NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        # Untied: a tied random model mostly predicts its last input token again (greedy
        # decoding loops on one token); an untied one behaves like a random bigram model.
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id, do_sample=False
    )
    with progress_bars_off(hf_logging):  # no "Writing model shards" bar
        model.save_pretrained(folder, safe_serialization=True)
    _normalise_modes(folder)


def _portable_tokenizer_class(path: Path) -> None:
    """Write ``tokenizer_config.json`` in the form both transformers 4.x and 5.x read (vLLM
    may bring either): class ``PreTrainedTokenizerFast`` rather than 5.x's
    ``TokenizersBackend``, and ``additional_special_tokens`` (a list) rather than 5.x's
    ``extra_special_tokens``, which 4.x expects to be a dict. 5.x maps both back itself."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = data.pop("extra_special_tokens", None)
    if extra:
        data["additional_special_tokens"] = extra
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _normalise_modes(folder: Path) -> None:
    """Give every file the ordinary umask-derived mode (safetensors writes 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for p in folder.iterdir():
        if p.is_file():
            p.chmod(0o666 & ~umask)
