"""Data in and out: cases read from a user's JSONL, CSV or Parquet file (validated row by
row, streamed; Parquet through pyarrow, imported only for a Parquet file), the one CSV
reader (cases and labels) and the cell escape every CSV written goes through, result
records written one JSONL line per case (typed, versioned), and the private, crash-safe
file writes and locks every output goes through.

May import :mod:`evaluator.common` and :mod:`evaluator.rubrics` (a case is read against the
rubric's declared inputs); never the judges, a run, analysis or reports.
"""
