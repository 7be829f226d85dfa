"""Common ground: what every layer may use and that knows nothing of any of them — the base
of every error a user can act on (:mod:`.errors`), the one strict YAML loader for
configuration files (:mod:`.strict_yaml`), the bounds configuration may ask for
(:mod:`.limits`), the text of a validation error (:mod:`.strict`), text laid out for an
80-column terminal (:mod:`.columns`), the base of typed records (:mod:`.record`) and the
package's version.

Imports nothing of the evaluator; every other package may import it.
"""
