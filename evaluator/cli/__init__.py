"""The ``evaluator`` command line: one click group (:mod:`.main`) and one module per command,
each parsing its options, calling the library and turning its errors into one line and an
exit code (:mod:`.exit_codes`). Progress bars and terminal output live here, never below.

The top layer: may import every package of the evaluator; nothing imports it.
"""
