"""The character sets a verdict's strings may use, as regex classes (Rust and Python syntax
alike). Shared by the rubric schemas (rubrics) and the grammar engine's slices (judges)."""

# Printable ASCII except '"' and '\': a JSON string body needing no escapes.
ASCII_BODY = r'[ !#-\[\]-~]'
# Any character but the C0 and C1 controls (and DEL): printable text in any language.
PRINTABLE_BODY = r'[^\x00-\x1F\x7F-\x9F]'
# PRINTABLE_BODY as it is *written* inside a JSON string: '"' and '\' appear only escaped,
# so the characters that stand for themselves are these.
WRITTEN_PRINTABLE_BODY = r'[^"\\\x00-\x1F\x7F-\x9F]'
