"""``python -m evaluator``: the same CLI as the ``evaluator`` command."""

from evaluator.cli.main import cli

cli()
