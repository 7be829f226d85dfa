"""The one base of the errors a user can act on: the CLI's entry point prints each as one
line (``error: <message>``) and exits with its :attr:`UserError.exit_code`; anything else
that reaches it is a bug (exit code 70). Standard library only."""

from __future__ import annotations


class UserError(Exception):
    """Fix the input or the configuration and re-run (exit code 2). The message is one
    line naming the file, line or case id and field, and says what to do; it never quotes
    case text. A subclass that means something else sets its own ``exit_code``."""

    exit_code = 2
