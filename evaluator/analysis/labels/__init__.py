"""The labels a command is given: one typed record (:mod:`.labelset`), read once by the reader of its format (:mod:`.readers`)."""
