"""How many threads fill the schema constraint's masks in the transformers backend.

llguidance fills a batch's allowed-token masks on a thread pool of its own (``LLExecutor``),
by default 80% of the CPUs (at most 32) whatever else runs. Beside a model that computes on
the same CPUs, that pool can oversubscribe them. What runs while the fill does:

- model on a GPU: the masks are filled during the forward pass (prefetched, see
  :mod:`evaluator.judges.backends.constraint`), while one thread, the main one, launches
  the model's kernels; torch's CPU threads are idle. So the fill may use every CPU but
  that one.
- model on the CPU, torch on every CPU (its default): the fill runs between forward
  passes, but torch's OpenMP threads keep spinning for a while after each one (and the
  pool's threads after each fill). So the fill gets one thread. A fill costs milliseconds
  against a CPU forward pass of tens to thousands of milliseconds, so more threads would
  gain little there (``benchmarks/README.md``, section 7) and risk slowing every forward
  pass.
- model on the CPU, torch on fewer threads than there are free CPUs (``OMP_NUM_THREADS``,
  ``--threads``): the CPUs torch leaves free would sit idle during the forward
  pass, so the masks are filled there, during it, as on a GPU
  (:func:`fill_during_forward`), on as many threads as there are such CPUs. At batch 64 with Qwen3's vocabulary the fill
  is about 8 ms of every decode step (``benchmarks/README.md``, section 12), all of it off
  the step's critical path that way.

On the CPU, "free" leaves out the CPUs other processes keep busy and those a cgroup quota
withholds (:class:`~evaluator.judges.backends.torch_threads.CpuReadings`, read when torch's
count is chosen): when torch took one of two CPUs because another process holds the other,
no CPU is left for a fill thread, and the fill runs between forward passes.

Both never exceed llguidance's own default. A judge's ``fill_threads`` in models.yaml sets
the count instead (docs/running.md, "Threads").
"""

from __future__ import annotations

import os

LLGUIDANCE_MAX = 32


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or ``taskset``'s
    limit), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def fill_thread_count(device_type: str, torch_threads: int, requested: int | None = None,
                      cpus: int | None = None) -> int:
    """Threads for the mask fill: ``requested`` when given, else the CPUs left beside the
    model (``device_type`` ``"cpu"``: ``torch_threads`` of them busy; otherwise one, the
    thread that launches the kernels), at least 1 and at most llguidance's default (80% of
    the CPUs, at most 32). ``cpus``: the CPUs free for this process (default: its affinity
    mask)."""
    if requested is not None:
        return requested
    cpus = usable_cpus() if cpus is None else cpus
    busy = torch_threads if device_type == "cpu" else 1
    llguidance_default = max(1, min(LLGUIDANCE_MAX, cpus * 80 // 100))
    return max(1, min(llguidance_default, cpus - busy))


def fill_during_forward(device_type: str, torch_threads: int, cpus: int | None = None) -> bool:
    """Whether to fill the next step's masks during the forward pass: with the model on an
    accelerator, always; on the CPU, only when torch's ``torch_threads`` leave at least one
    of the ``cpus`` unused (the CPUs free for this process; default: its affinity mask):
    otherwise the fill's thread would compete with torch's, or with another process."""
    if device_type != "cpu":
        return True
    return torch_threads < (usable_cpus() if cpus is None else cpus)
