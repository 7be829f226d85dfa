"""``--no-progress`` for the libraries' own bars too (transformers' "Loading weights", the
hub's), not only the run's."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from evaluator.judges.offline import progress_bars_off

_HUB_SWITCH = "HF_HUB_DISABLE_PROGRESS_BARS"


@contextmanager
def library_progress_hidden(hidden: bool) -> Iterator[None]:
    """While the block runs (when ``hidden``), transformers and huggingface_hub show no
    progress bars: in this process (now, or when transformers is imported later) and in the
    processes it starts meanwhile. Restored after."""
    if not hidden:
        yield
        return
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None:  # already imported: switch its bars off, then back
        with progress_bars_off(hf_logging):
            yield
        return
    # Not imported yet (the usual case: the backend imports it when the judge loads): the
    # switch both libraries read at import, so no import is paid for a judge that needs
    # none. It stays in force for whatever imported them meanwhile.
    saved = os.environ.get(_HUB_SWITCH)
    os.environ[_HUB_SWITCH] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(_HUB_SWITCH, None)
        else:
            os.environ[_HUB_SWITCH] = saved
