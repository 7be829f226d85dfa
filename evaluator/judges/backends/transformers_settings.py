"""The settings of a transformers judge in models.yaml (also the tiny random model's and the
fake's, which stands in for one): the common ones of :class:`JudgeSpec` and the CPU threads
this process gives torch and the constraint's mask fill. Imports no torch."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, field_validator

from evaluator.judges.backends.torch_threads import Threads, parse_threads
from evaluator.judges.models_file import JudgeSpec


class TransformersSettings(JudgeSpec):
    """A judge whose model runs on torch in this process (evaluator.judges.backends
    .transformers_backend)."""

    NOT_TAKEN: ClassVar[dict[str, str]] = {
        "engine": "engine holds vLLM's engine settings; this backend runs no vLLM engine"}
    RUNS_ON: ClassVar[str] = "torch"

    # Threads that fill the schema constraint's masks (default: the CPUs the model leaves
    # free; evaluator.judges.backends.fill_threads). Not a setting of the verdicts (the
    # masks are the same on any count), so not in the settings hash.
    fill_threads: int | None = Field(default=None, ge=1, le=256)
    # On the CPU: torch's threads, a count or auto (the default: the free CPUs the process
    # may use; evaluator.judges.backends.torch_threads). OMP_NUM_THREADS and --threads win
    # over it. Not in the settings hash, as fill_threads.
    threads: Threads | None = None
    # Where ``threads`` came from: this file, or the run's --threads (:meth:`with_run_threads`),
    # which also wins over OMP_NUM_THREADS. Not a field: models.yaml cannot set it.
    _threads_from_run: bool = PrivateAttr(False)

    @property
    def threads_from_run(self) -> bool:
        """``threads`` is the run's ``--threads`` (not models.yaml's)."""
        return self._threads_from_run

    def with_run_threads(self, threads: Threads) -> TransformersSettings:
        """A copy with the run's ``--threads`` (parsed) in place of models.yaml's
        (``evaluator.judges.models_file.with_threads``)."""
        copy = self.model_copy(update={"threads": threads})
        copy._threads_from_run = True
        return copy

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: Any) -> Any:
        # one line for any wrong value (pydantic would list each member of the union)
        return None if value is None else parse_threads(value)
