"""The engines a run can judge with, and the Ray engine's options. Imports no Ray.

``local`` judges in this process (one backend). ``ray`` spreads the batches over judge
replicas on a Ray cluster (:mod:`evaluator.run.ray_engine`, which imports this module; the
runner loads it only when chosen: Ray is the optional extra ``ray``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evaluator.common.errors import UserError

if TYPE_CHECKING:
    from evaluator.judges.backends.base import Backend
    from evaluator.judges.models_file import JudgeSpec

ENGINES = ("local", "ray")


class RayClusterError(UserError, ValueError):
    """The Ray cluster cannot hold the replicas asked for (a usage error: exit code 2)."""


class RayRunFailed(UserError, RuntimeError):
    """The cluster stopped a Ray run (e.g. a batch killed its replica more often than
    ``max_task_retries``); finished records are kept and a re-run resumes (exit code 1)."""

    exit_code = 1


@dataclass(frozen=True)
class RayOptions:
    """How ``--engine ray`` runs.

    ``address``: None starts a private single-node cluster for the run (no dashboard) and
    stops it afterwards; ``auto`` (or the head's ``HOST:PORT``) joins the cluster this
    machine is a node of (``ray start``). Ray Client (``ray://``) is refused: Ray Data's
    executor does not run through it. When this process is already connected (``ray.init``
    called by the caller), that cluster is used as it is.
    ``replicas``: judge replicas (each loads the judge once). ``gpus_per_replica`` (may be a
    fraction) and ``cpus_per_replica``: what Ray reserves for each. ``max_restarts``: how
    often a replica whose process died is started again; ``max_task_retries``: how often the
    batch it was judging is sent again — finite, so a batch that kills every replica it
    reaches fails the run instead of looping (finished records stay; re-run to resume).
    ``backend_factory`` replaces :func:`evaluator.judges.backends.load_backend` in each replica
    (tests: a scripted judge); it must be importable on every node.
    """

    address: str | None = None
    replicas: int = 1
    gpus_per_replica: float = 0.0
    cpus_per_replica: float = 1.0
    max_restarts: int = 8
    max_task_retries: int = 3
    backend_factory: Callable[[str, JudgeSpec], Backend] | None = None

    def __post_init__(self) -> None:
        if (self.address or "").startswith("ray://"):
            raise RayClusterError(
                f"--address {self.address}: Ray Client (ray://) cannot run Ray Data's streaming "
                "executor (Ray 2.60-2.63), which this engine needs on the driver. Run the "
                "command on a node of the cluster with --address auto (or --address "
                "HEAD_IP:6379).")
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {self.replicas}")
        if self.gpus_per_replica < 0 or self.cpus_per_replica < 0:
            raise ValueError("gpus_per_replica and cpus_per_replica cannot be negative")
        if self.max_restarts < 0 or self.max_task_retries < 0:
            raise ValueError("max_restarts and max_task_retries cannot be negative")
