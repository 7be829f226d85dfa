"""Keep a CPU ``generate``'s large buffers in the heap instead of fresh pages every step.

glibc's ``malloc`` serves every block above its ``mmap`` threshold, which never exceeds 32
MiB (``mallopt`` refuses more), with an ``mmap`` of its own and hands it back with
``munmap`` when freed. A CPU decode step allocates and frees several such blocks:
the logits transformers copies before the logits processors (batch x 151,936 float32 for
Qwen3: 39 MB at batch 64), the key/value cache that grows by one token per step, and the
copies attention makes of it. Each fresh block's pages are faulted in and zeroed by the
kernel one by one, and that cost grows with the batch faster than the work itself:
``benchmarks/step_profile.py`` measured the time outside the forward pass at batch 64 at 5
times that of batch 16 for 4 times the rows (transformers' loop alone: 6.7 times), and the
forward pass at 2.6 times what it costs with the pages reused (``benchmarks/README.md``,
section 12).

:func:`reused_heap` turns ``mmap`` off for the duration of one ``generate`` (freed blocks
stay in the heap and the next step reuses their pages) and afterwards turns it back on and
returns the free memory to the system (``malloc_trim``). The price: blocks freed during the
call are held until it ends. :func:`decode_heap` applies it to the decode steps only, not
the prefill, whose large temporaries are freed before the first step and would otherwise
stay in the heap until the call ends (on the dev set at batch 128: peak memory +31% over
no policy with the whole call covered, +8% with the decode steps only, at the same step
time within the machine's noise; ``benchmarks/README.md``, section 12). Only with glibc
(Linux); elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
# Any mallopt call freezes glibc's dynamic thresholds, so afterwards they are set to the
# highest values they reach on their own in a process that frees large blocks (the mmap
# threshold rises to the size of each freed mmap'd block up to 32 MiB, the trim threshold
# to twice that): what they are after the first free of a block of 32 MiB or more.
STEADY_MMAP_THRESHOLD = 32 * 1024 * 1024
STEADY_TRIM_THRESHOLD = 2 * STEADY_MMAP_THRESHOLD
DEFAULT_MMAP_MAX = 65536  # glibc's default count of mmap'd blocks
NEVER_TRIM = 2**31 - 1  # mallopt takes an int: trim only past 2 GiB of free top

_LOCK = threading.Lock()
_depth = 0


def _glibc() -> Any | None:
    """The C library if it is glibc, else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (absent outside glibc)
        libc.mallopt, libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


@contextmanager
def reused_heap() -> Iterator[None]:
    """Within: freed memory stays in the heap for the next allocation (no ``mmap``d
    blocks, no trimming). After the outermost exit: glibc's steady-state thresholds and
    the free memory given back. Nested and concurrent uses share one such period."""
    global _depth
    if _LIBC is None:
        yield
        return
    with _LOCK:
        _depth += 1
        if _depth == 1:
            _LIBC.mallopt(M_MMAP_MAX, 0)
            _LIBC.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                _LIBC.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD)
                _LIBC.mallopt(M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD)
                _LIBC.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
                _LIBC.malloc_trim(0)


def generate_heap(device: str) -> AbstractContextManager[None]:
    """The heap policy for a ``generate`` on ``device`` ("cpu", "cuda:0", ...):
    :func:`reused_heap` on the CPU; elsewhere nothing (the large buffers live on the
    accelerator, in torch's own caching allocator)."""
    return reused_heap() if device.split(":")[0] == "cpu" else nullcontext()


@contextmanager
def decode_heap(device: str) -> Iterator[Callable[[Any, Any], Any]]:
    """:func:`generate_heap` for a ``generate``'s decode steps, not its prefill: yields a
    logits processor (scores pass through unchanged) to give ``generate`` first, which
    enters the policy at its first call, after the prefill's forward pass has freed its
    temporaries; leaving the ``with`` block leaves it."""
    with ExitStack() as stack:
        begun = False

        def begin(input_ids: Any, scores: Any) -> Any:
            nonlocal begun
            if not begun:
                begun = True
                stack.enter_context(generate_heap(device))
            return scores

        yield begin
