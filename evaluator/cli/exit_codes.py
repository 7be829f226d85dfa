"""The ``evaluator`` command's exit codes (documented in docs/running.md)."""

EXIT_OK = 0
EXIT_SOME_FAILED = 1      # some cases have no verdict (or a Ray run stopped); re-run to resume
EXIT_USAGE = 2            # fix the input or the configuration
EXIT_INPUT_REJECTED = 3   # --strict and a case could not be judged
EXIT_INTERRUPTED = 130    # Ctrl-C; re-run the same command to resume
