"""The mask fill's thread count: the CPUs the model leaves free, or models.yaml's
``fill_threads``; and the transformers backend builds its fill pool with it."""

from __future__ import annotations

import pytest

from evaluator.judges.backends.fill_threads import (
    fill_during_forward,
    fill_thread_count,
    usable_cpus,
)
from evaluator.judges.models_file import JudgeSpec


@pytest.mark.parametrize(("device", "torch_threads", "cpus", "expected"), [
    ("cuda", 16, 16, 12),  # issue 35's H200 host: llguidance's 80%; one CPU launches kernels
    ("cuda", 16, 4, 3),    # every CPU but the launching one
    ("cpu", 16, 16, 1),    # torch on every core: one fill thread, never beside its pool
    ("cpu", 8, 16, 8),     # torch on half: the other half, within llguidance's 80%
    ("cpu", 2, 2, 1),      # this 2-core machine, as before (llguidance's 80% of 2)
    ("cpu", 1, 2, 1),
    ("cuda", 1, 1, 1),     # never none
    ("cuda", 1, 64, 32),   # llguidance's cap
])
def test_default_leaves_the_model_its_cpus(device, torch_threads, cpus, expected):
    assert fill_thread_count(device, torch_threads, cpus=cpus) == expected


@pytest.mark.parametrize(("device", "torch_threads", "cpus", "expected"), [
    ("cuda", 16, 16, True),  # an accelerator: always during the forward pass
    ("cpu", 16, 16, False),  # torch on every core: between forward passes
    ("cpu", 2, 2, False),    # this 2-core machine by default
    ("cpu", 1, 2, True),     # a CPU torch leaves free (step_profile.py's --threads 1)
    ("cpu", 8, 16, True),
    ("cpu", 1, 0, False),    # every CPU busy (0 free): not the affinity mask's count
])
def test_masks_are_filled_during_the_forward_pass_where_cpus_are_free(device, torch_threads,
                                                                      cpus, expected):
    assert fill_during_forward(device, torch_threads, cpus=cpus) is expected


def test_a_requested_count_is_taken_as_given():
    assert fill_thread_count("cpu", 16, requested=6, cpus=16) == 6
    assert fill_thread_count("cuda", 1, requested=1, cpus=16) == 1


def test_usable_cpus_is_the_affinity_mask():
    assert 1 <= usable_cpus()


def test_models_yaml_fill_threads_is_checked():
    assert JudgeSpec(backend="tiny-random", fill_threads=3).fill_threads == 3
    assert JudgeSpec(backend="tiny-random").fill_threads is None
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        JudgeSpec(backend="tiny-random", fill_threads=0)
    with pytest.raises(ValueError, match="vLLM fills its own"):
        JudgeSpec(backend="vllm", path="/models/x", fill_threads=2)


def test_the_backend_builds_its_fill_pool_with_the_setting(monkeypatch):
    """models.yaml's ``fill_threads`` reaches llguidance's executor; without it, the
    default rule for the backend's device, torch's threads and the CPUs free beside them."""
    torch = pytest.importorskip("torch", reason="needs the transformers extra")
    from evaluator.judges.backends import load_backend, transformers_backend

    made: list[int | None] = []
    real = transformers_backend.LLExecutor

    def recording(threads=None):
        made.append(threads)
        return real(threads)

    monkeypatch.setattr(transformers_backend, "LLExecutor", recording)
    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu",
                                                    fill_threads=3))
    assert backend.fill_threads == 3 and made == [3]
    backend.close()
    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu"))
    expected = fill_thread_count("cpu", torch.get_num_threads(),
                                 cpus=backend.threads.readings.free)
    assert backend.fill_threads == expected and made == [3, expected]
    backend.close()


def test_a_cpu_torch_leaves_beside_a_busy_process_is_not_the_fills(monkeypatch):
    """Issue 45: torch on the one CPU another process leaves free; no fill thread beside it
    during the forward pass (before, the other CPU counted as free: prefetched on it)."""
    pytest.importorskip("torch", reason="needs the transformers extra")
    from evaluator.judges.backends import load_backend, torch_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch_threads, "read_cpus",
                        lambda: torch_threads.CpuReadings(allowed=2, busy=1.0, cores=2))
    for threads in ("auto", 1):
        backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu",
                                                        threads=threads))
        assert backend.threads.threads == 1 and backend.threads.readings.free == 1
        assert backend.prefetch_masks is False and backend.fill_threads == 1
        backend.close()
