"""The evaluator's version, written into reports (``evaluator --version`` shows the installed
package's metadata, which ``pyproject.toml`` sets to the same number)."""

__version__ = "0.1.0"
