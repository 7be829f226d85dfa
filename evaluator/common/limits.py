"""Bounds on what configuration may ask for, in one place.

Rubric files and ``models.yaml`` are treated as possibly hostile (or simply mistaken): each
bound below is far above what the built-in rubrics and judges need, and low enough that a
file at the bound still loads, validates and renders in bounded memory and time.
"""

from __future__ import annotations

# --- YAML files (rubrics, models.yaml) ---------------------------------------------------
# The largest built-in rubric is ~8 KB; a rubric with a long template and many criteria
# stays far below 1 MiB. Read no more than this, so a huge file is refused unread.
MAX_CONFIG_BYTES = 1024 * 1024
# YAML nodes (scalars, lists, mappings) after expanding aliases. The built-ins have at most
# ~250; 10,000 leaves room for big rubrics while a 470-byte "billion laughs" anchor bomb
# (which expands to billions of nodes) is refused before anything is built from it.
MAX_YAML_NODES = 10_000
# Characters of scalar text after expanding aliases: no more than the file itself may hold.
MAX_YAML_CHARS = MAX_CONFIG_BYTES
# Nesting depth. The built-ins nest 5 deep; the YAML parser recurses once per level.
MAX_YAML_DEPTH = 32

# --- Rubric output schema ----------------------------------------------------------------
# Allowed values of one score. Each becomes an alternative of the decoding constraint;
# 101 admits a 0-100 scale (the largest built-in scale is 0-10, plus the 0/50/80/100 anchors).
MAX_SCALE_VALUES = 101
# Magnitude of a score value: scores are small numbers, and a 4000-digit one would make the
# token budget absurd.
MAX_SCORE_MAGNITUDE = 1_000_000
# Items in one list criterion (the ECG rubric asks for at most 12: one per lead).
MAX_ITEMS = 100
# Keys in a rubric's inputs, output, aggregates and aliases (the built-ins have at most 8).
MAX_RUBRIC_KEYS = 100
# The longest valid verdict, in tokens (one per byte): a verdict longer than this is not a
# verdict, and the judge's context must hold the prompt plus this budget. The built-ins
# need at most 7,655 (ecg_interpretation).
MAX_VERDICT_TOKENS = 32_768

# --- Rendering a rubric template ----------------------------------------------------------
# Characters a template may produce or compute (strings built, list items, output) beyond
# the case text it fences. The built-ins compute nothing and print ~8,000 characters.
MAX_TEMPLATE_CHARS = 2_000_000
# Case text is fenced (at most ~3x its length, for text made of backticks) and printed: a
# template may handle its case fields' text this many times over.
CASE_TEXT_FACTOR = 16
# Loop iterations in one rendering, all loops together (nested loops multiply).
MAX_LOOP_ITERATIONS = 100_000
# Bits in an integer a template computes (a 2**2**30 would take gigabytes).
MAX_INT_BITS = 1024

# --- Labels files ---------------------------------------------------------------------------
# A Label Studio JSON export is read whole (it is one JSON list): its tasks carry the cases'
# text, ~10 KB a case on the built-in rubrics, so 256 MiB holds some 20,000 labelled cases
# while a hostile or mistaken file is refused before it is parsed.
MAX_LABEL_STUDIO_BYTES = 256 * 1024 * 1024
