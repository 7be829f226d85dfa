"""How many threads torch computes a CPU judge's forward pass on.

torch's default is one thread per core the process may use, whatever else runs. Its OpenMP
workers meet at a barrier after every parallel region, and a worker that waits there spins
for its peers: when another process holds one of the cores, every step waits for the
worker that lost its core. On the 2-core development machine one trial-eligibility case
(340 generated tokens, the default judge) took 31 s alone and **249 s beside one CPU-bound
process** on torch's default two threads, and 31 s on one thread either way (issue 45).
A thread too few costs at most that thread's share; a thread too many, up to 8x.

So a CPU judge's count is chosen (:func:`choose_threads`, a pure function of
:class:`CpuReadings`) from:

- the CPUs the process may use: its affinity mask (``taskset``, a container's cpuset),
  within a cgroup CPU quota (``cpu.max``, or cgroup v1's ``cpu.cfs_quota_us``) rounded
  down (a quota of 1.5 CPUs gives 1);
- those of them that are free: a :data:`SAMPLE_SECONDS` sample of ``/proc/stat`` on those
  CPUs, less this process's own CPU time, gives the CPUs other processes keep busy; a CPU
  counts as busy from a quarter of it on (:data:`BUSY_FROM`: a worker that loses its core
  a quarter of the time already holds the others at every barrier);
- never more than torch's own default (one per physical core).

That is ``max(1, min(quota, allowed - busy, torch's default))``: with one busy process on 2
CPUs, 1; with every CPU busy, 1. What else decides, first match wins: ``--threads N|auto``
on ``evaluator run`` (the most specific: one command); then ``OMP_NUM_THREADS`` (or
``MKL_NUM_THREADS``) in the environment, or ``torch.set_num_threads`` called before the
judge loads (a count other than torch's default or the one the evaluator set last); then
the judge's ``threads`` in models.yaml; else the automatic choice. A GPU judge's threads are left alone (:mod:`evaluator.judges.backends.
transformers_backend` asks only for a CPU model). The CPUs left free beside torch are where
the constraint's masks are filled (:mod:`evaluator.judges.backends.fill_threads`).

This module imports no torch: the backend passes its torch module to
:func:`settle_torch_threads`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

# The largest count a setting takes: above any CPU count a judge host has, so a typo
# (10000) is refused rather than met as 10000 OpenMP threads.
MAX_THREADS = 1024
# How long /proc/stat is sampled: 30 clock ticks per CPU at Linux's 100 Hz, enough to tell
# a busy CPU (~1.0) from an idle one (~0.0); once per judge load.
SAMPLE_SECONDS = 0.3
# Other processes' work, in CPUs, from which a CPU counts as busy: 0.25 -> 1, 1.25 -> 2.
BUSY_FROM = 0.25
# The environment variables torch reads its thread count from at start-up.
# torch reads OMP_NUM_THREADS, then MKL_NUM_THREADS over it (at::intraop_default_num_threads):
# the first set here is the one torch took.
ENV_SETTINGS = ("MKL_NUM_THREADS", "OMP_NUM_THREADS")

Threads = int | Literal["auto"]


def parse_threads(value: Any) -> Threads:
    """A ``threads`` setting (models.yaml, ``--threads``): a whole number from 1 to
    :data:`MAX_THREADS`, or ``auto``; anything else raises :class:`ValueError` with one line
    (that does not echo the value: config text is not printed back)."""
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return "auto"
        if text.isascii() and text.isdigit():
            value = int(text)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THREADS:
        return value
    raise ValueError(f"expected a whole number from 1 to {MAX_THREADS}, or auto")


@dataclass(frozen=True)
class CpuReadings:
    """What the choice reads of the host: the CPUs this process may run on (``allowed``),
    its cgroup's CPU quota in CPUs (None: none), the CPUs' worth of other processes' work on
    them during the sample (None: not measured), and the machine's physical cores (None:
    not known)."""

    allowed: int
    quota: float | None = None
    busy: float | None = None
    cores: int | None = None

    @property
    def cpus(self) -> int:
        """The CPUs this process may use: the allowed ones, within the quota (at least 1)."""
        if self.quota is None:
            return self.allowed
        return max(1, min(self.allowed, math.floor(self.quota)))

    @property
    def busy_cpus(self) -> int:
        """Whole CPUs other processes keep busy (a CPU from :data:`BUSY_FROM` of one on);
        0 when not measured."""
        if self.busy is None:
            return 0
        return max(0, min(self.allowed, math.floor(self.busy + 1 - BUSY_FROM)))

    @property
    def free(self) -> int:
        """The CPUs this process may use that no other process keeps busy."""
        return max(0, min(self.cpus, self.allowed - self.busy_cpus))

    @property
    def torch_default(self) -> int:
        """torch's own count on this host: a thread per physical core it may run on."""
        return max(1, min(self.allowed, self.cores or self.allowed))


Source = Literal["auto", "models.yaml", "--threads", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                 "torch.set_num_threads"]


@dataclass(frozen=True)
class ThreadChoice:
    """torch's thread count for a CPU judge, what set it (``source``), the readings it was
    chosen from, and (``setting``) the environment variable as it was set."""

    threads: int
    source: Source
    readings: CpuReadings
    setting: str | None = None

    @property
    def spare(self) -> int:
        """The CPUs left free beside torch's threads (where the masks can be filled)."""
        return max(0, self.readings.free - self.threads)

    def describe(self) -> str:
        """One line for the run's header, e.g. ``torch threads: 1 of 2 CPUs (1 busy;
        --threads to override)``."""
        r = self.readings
        head = f"torch threads: {self.threads} of {r.cpus} CPU{'s' if r.cpus != 1 else ''}"
        busy = (f"{r.busy_cpus} busy" if r.busy is not None else "busy CPUs not measured")
        if r.quota is not None and r.cpus < r.allowed:
            busy = f"cgroup quota {r.quota:g} CPUs; {busy}"
        auto = auto_threads(r)
        if self.source == "auto":
            return f"{head} ({busy}; --threads to override)"
        unlike = f", auto would use {auto}" if auto != self.threads else ""
        if self.source == "models.yaml":
            return f"{head} (threads: {self.threads} in models.yaml; {busy}{unlike})"
        if self.source == "--threads" and self.setting == "auto":
            return f"{head} (--threads auto; {busy})"
        if self.source == "--threads":
            return f"{head} (--threads {self.threads}; {busy}{unlike})"
        if self.source == "torch.set_num_threads":
            return (f"{head} (torch.set_num_threads before the run, which wins; "
                    f"{busy}{unlike})")
        return (f"{head} ({self.setting or self.source} in the environment, which wins "
                f"over models.yaml; --threads overrides it; {busy}{unlike})")


def auto_threads(readings: CpuReadings) -> int:
    """The automatic count: the free CPUs the process may use, at most torch's default, at
    least 1 (see the module docstring)."""
    return max(1, min(readings.free, readings.torch_default))


def choose_threads(readings: CpuReadings, requested: Threads | None = None,
                   preset: tuple[int, Source, str | None] | None = None,
                   from_run: bool = False) -> ThreadChoice:
    """torch's count for a CPU judge, first match wins: the run's ``--threads``
    (``requested`` with ``from_run``; ``auto``: choose); ``preset`` (``(count, source,
    setting)``: a count the environment or the program set before the judge loaded);
    models.yaml's ``threads`` (``requested``; ``auto`` or None: choose); else
    :func:`auto_threads`."""
    if from_run and requested is not None:
        count = requested if isinstance(requested, int) else auto_threads(readings)
        return ThreadChoice(count, "--threads", readings,
                            None if isinstance(requested, int) else "auto")
    if preset is not None and not from_run:
        count, source, setting = preset
        return ThreadChoice(count, source, readings, setting)
    if isinstance(requested, int):
        return ThreadChoice(requested, "models.yaml", readings)
    return ThreadChoice(auto_threads(readings), "auto", readings)


def preset_threads(environ: Mapping[str, str], current: int, default: int,
                   applied: int | None) -> tuple[Source, str | None] | None:
    """What set torch's count before the judge loaded, if anything did: an environment
    variable torch reads (``(name, "NAME=value")``), or a ``torch.set_num_threads`` call,
    seen as a ``current`` count other than the one the evaluator ``applied`` last (or, before
    it set any, torch's ``default``). A call that set the default count is not told apart
    from the default."""
    for name in ENV_SETTINGS:
        value = environ.get(name, "").strip()
        first = value.split(",")[0].strip()
        if first.isascii() and first.isdigit() and int(first) > 0:  # as torch reads it
            shown = value if all(ch.isdigit() or ch in ", " for ch in value) else first
            return name, f"{name}={shown}"  # type: ignore[return-value]
    if current != (default if applied is None else applied):
        return "torch.set_num_threads", None
    return None


# The count the evaluator last set in this process (None: none yet): a later judge in the
# same process (a jury, a test suite) chooses again rather than take it for the program's.
_applied: int | None = None


def settle_torch_threads(torch: Any, requested: Threads | None = None, *,
                         readings: CpuReadings | None = None,
                         environ: Mapping[str, str] | None = None,
                         default: int | None = None, from_run: bool = False) -> ThreadChoice:
    """Choose torch's thread count for a CPU judge (:func:`choose_threads`) and set it
    (``torch.set_num_threads``); a count the environment or the program set before is kept
    unless the run's ``--threads`` (``from_run``) says otherwise. ``torch``: the torch
    module; ``default``: torch's own count, when known (else
    :attr:`CpuReadings.torch_default`)."""
    global _applied
    readings = readings or read_cpus()
    environ = os.environ if environ is None else environ
    if default is not None and not any(environ.get(n, "").strip() for n in ENV_SETTINGS):
        # torch's own count at start-up (not set by the environment), where the backend
        # knows it, caps the automatic one: on a host whose topology /sys does not give,
        # the readings fall back to the logical CPUs.
        readings = replace(readings, cores=default)
    current = torch.get_num_threads()
    preset = preset_threads(environ, current, default or readings.torch_default, _applied)
    choice = choose_threads(readings, requested,
                            None if preset is None else (current, *preset), from_run)
    if choice.source not in ENV_SETTINGS and choice.source != "torch.set_num_threads":
        if choice.threads != current:
            torch.set_num_threads(choice.threads)
        _applied = choice.threads
    return choice


# --- Readings of the host (Linux; elsewhere the allowed CPUs only) ---

def parse_proc_stat(text: str) -> dict[int, tuple[int, int]]:
    """``/proc/stat``'s per-CPU lines as ``{cpu: (busy ticks, all ticks)}``: idle and
    iowait are not busy; steal is (the hypervisor gave the CPU to someone else); guest time
    is already counted in user time."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        ticks = [int(x) for x in rest.split()[:8]]
        ticks += [0] * (8 - len(ticks))
        idle = ticks[3] + ticks[4]
        out[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    return out


def busy_between(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]],
                 cpus: set[int] | None = None) -> float:
    """The CPUs' worth of work done on ``cpus`` (all: None) between two readings of
    :func:`parse_proc_stat`: each CPU's busy share of its ticks, added up."""
    total = 0.0
    for cpu, (busy, ticks) in after.items():
        if (cpus is not None and cpu not in cpus) or cpu not in before:
            continue
        elapsed = ticks - before[cpu][1]
        if elapsed > 0:
            total += min(1.0, max(0.0, (busy - before[cpu][0]) / elapsed))
    return total


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2's ``cpu.max`` (``"150000 100000"``: 1.5 CPUs; ``"max 100000"``: none)."""
    parts = text.split()
    if len(parts) < 1 or parts[0] == "max":
        return None
    period = int(parts[1]) if len(parts) > 1 else 100000
    return int(parts[0]) / period if period > 0 and int(parts[0]) > 0 else None


def parse_cfs_quota(quota: str, period: str) -> float | None:
    """cgroup v1's ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` (quota -1: none)."""
    q, p = int(quota.strip()), int(period.strip())
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None


def cgroup_quota(root: Path = Path("/sys/fs/cgroup"),
                 membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """The tightest CPU quota on this process's cgroup and the ones above it, in CPUs
    (None: no quota, or no cgroup file system)."""
    quotas = []
    for line in (_read(membership) or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: one unified hierarchy
            mounts = [root]
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own mount
            mounts = [m for m in (root.iterdir() if root.is_dir() else ())
                      if "cpu" in m.name.split(",")]
        else:
            continue
        for mount in mounts:
            folder = mount / path.strip("/")
            # A container sees its own cgroup at the mount's root, named as on the host.
            for where in [folder, *folder.parents]:
                text = _read(where / "cpu.max")
                if text is not None:
                    quotas.append(_parse_or_none(parse_cpu_max, text))
                quota, period = _read(where / "cpu.cfs_quota_us"), _read(where / "cpu.cfs_period_us")
                if quota is not None and period is not None:
                    quotas.append(_parse_or_none(parse_cfs_quota, quota, period))
                if where == mount:
                    break
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _parse_or_none(parse: Any, *texts: str) -> float | None:
    try:
        return parse(*texts)
    except ValueError:
        return None


def physical_cores(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """The machine's physical cores (distinct package and core ids), None if unknown."""
    cores = set()
    for topology in sys_cpu.glob("cpu[0-9]*/topology"):
        package, core = _read(topology / "physical_package_id"), _read(topology / "core_id")
        if package is None or core is None:
            return None
        cores.add((package.strip(), core.strip()))
    return len(cores) or None


def read_cpus(sample_seconds: float = SAMPLE_SECONDS) -> CpuReadings:
    """This host's :class:`CpuReadings`: the affinity mask, the cgroup quota, physical cores,
    and other processes' work on the allowed CPUs over a ``sample_seconds`` sample of
    ``/proc/stat`` (this process sleeps meanwhile; its own CPU time is taken off)."""
    try:
        allowed: set[int] | None = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        allowed = None
    count = len(allowed) if allowed else os.cpu_count() or 1
    busy = None
    before = parse_proc_stat(_read(Path("/proc/stat")) or "")
    if before:
        started, own = time.monotonic(), time.process_time()
        time.sleep(sample_seconds)
        after = parse_proc_stat(_read(Path("/proc/stat")) or "")
        wall, own = time.monotonic() - started, time.process_time() - own
        if after and wall > 0:
            busy = max(0.0, busy_between(before, after, allowed) - own / wall)
    return CpuReadings(count, cgroup_quota(), busy, physical_cores())
