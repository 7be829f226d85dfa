""":func:`diagnose`: run the probes once, then every check, for one judge."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluator.doctor.cuda import (
    JudgeUse,
    check_gpu,
    check_torch,
    check_vllm,
    runs_on,
    visible_gpus,
)
from evaluator.doctor.host import MIN_FREE_DISK, check_disk, check_offline
from evaluator.doctor.install import (
    LockError,
    check_packages,
    check_python,
    install_lock,
    read_lock,
)
from evaluator.doctor.judge_files import check_weights, judge_folder
from evaluator.doctor.memory import check_memory
from evaluator.doctor.probes import Probes
from evaluator.doctor.report import DoctorReport, failed
from evaluator.doctor.server import check_server
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.weights import Progress


@dataclass(frozen=True)
class DoctorOptions:
    """What to check against: ``lock`` (None: the bundle's requirements.txt when this is a
    bundle install; a lock given here that cannot be read raises :class:`LockError`), where
    outputs go, whether to re-hash the weights, the free-disk threshold."""

    lock: Path | None = None
    output_dir: Path = Path(".")
    rehash_weights: bool = True
    min_free_disk: int = MIN_FREE_DISK


def _packages(options: DoctorOptions, probes: Probes):
    """(the lock's path, its requirements or None, a note when there is none)."""
    if options.lock is not None:
        try:
            return options.lock, read_lock(options.lock), None
        except LockError as exc:  # the lock the user named: say which option
            raise LockError(f"--lock {exc}") from None
    lock = install_lock(probes.prefix())
    if lock is None:
        return None, None, ("not checked: installed neither from a bundle nor by make "
                            "install; give the lock it was installed from with --lock FILE")
    try:
        return lock, read_lock(lock), None
    except LockError as exc:
        return lock, None, f"cannot read the install's lock: {exc}"


def diagnose(name: str, spec: JudgeSpec, options: DoctorOptions = DoctorOptions(),
             probes: Probes = Probes(), progress: Progress | None = None) -> DoctorReport:
    """Check this host for judge ``name`` (its models.yaml entry ``spec``): each check ok,
    warning or failed with what to do. ``progress`` gets the bytes hashed (a progress bar's
    update). Raises :class:`LockError` only for an unreadable ``options.lock``."""
    use = JudgeUse(name=name, backend=spec.backend, device=spec.device)
    lock, requirements, note = _packages(options, probes)
    packages = check_packages(requirements, lock, probes.installed_version, note)
    if lock is not None and requirements is None:  # the bundle's own lock is unreadable
        packages = failed("packages", note or f"cannot read {lock}")
    if spec.backend_info.server:  # its model runs on its server: no torch, GPU or weights here
        return DoctorReport.of(name, spec.backend, [
            check_python(probes.python_version(), lock), packages,
            *check_server(spec, probes.server(name, spec)),
            check_disk(options.output_dir, probes.disk_free, probes.writable,
                       options.min_free_disk)])
    smi, torch, vllm = probes.nvidia_smi(), probes.torch(), probes.vllm()
    driver_cuda = probes.driver_cuda()
    on = runs_on(use, torch, vllm)
    gpus = visible_gpus(smi, torch)
    folder, why = judge_folder(spec)
    checks = [
        check_python(probes.python_version(), lock),
        packages,
        check_torch(torch, driver_cuda, smi, use, on),
        check_gpu(smi, torch, use, on, dict(probes.environ())),
        check_vllm(vllm, use, on, probes.evaluator_requires()),
        check_weights(use, spec, folder, why, rehash=options.rehash_weights, progress=progress),
        check_memory(use, spec, folder, on, gpus, probes.memory_available(),
                     vllm.info.get("gpu_memory_utilization")),
        check_disk(options.output_dir, probes.disk_free, probes.writable,
                   options.min_free_disk),
        check_offline(probes.environ(), probes.inherited_env(), probes.hub_offline()),
    ]
    return DoctorReport.of(name, spec.backend, checks)
