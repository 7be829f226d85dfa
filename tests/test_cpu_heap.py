"""The heap policy of a CPU ``generate`` (glibc's malloc, so Linux only)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from evaluator.judges.backends import cpu_heap

pytestmark = pytest.mark.skipif(cpu_heap._LIBC is None, reason="needs glibc (Linux)")

MIB = 1024 * 1024
# Larger than any free block a test run leaves in the heap, so outside ``reused_heap`` it
# is always an mmap'd block of its own
PROBE = 1024 * MIB


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def mmapped_blocks() -> int:
    """How many of malloc's blocks are mmap'd ones right now."""
    mallinfo2 = cpu_heap._LIBC.mallinfo2
    mallinfo2.restype = _MallInfo2
    return mallinfo2().hblks


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / MIB


def test_within_reused_heap_large_blocks_come_from_the_heap_and_are_given_back_after():
    """A block far above glibc's mmap threshold is an mmap'd block of its own, allocated
    and faulted in afresh every time, except within ``reused_heap``, where it comes from
    the heap and stays there when freed; on leaving, the free memory goes back to the
    system and large blocks are mmap'd again."""
    before = mmapped_blocks()
    outside = np.empty(PROBE, dtype=np.uint8)  # never touched: no memory used
    assert mmapped_blocks() == before + 1
    del outside
    with cpu_heap.reused_heap():
        with cpu_heap.reused_heap():  # nested: one period
            blocks = [np.ones(40 * MIB, dtype=np.uint8) for _ in range(5)]
        assert mmapped_blocks() == before
        held = resident_mib()
        del blocks
        assert resident_mib() > held - 40  # freed, but kept in the heap for reuse
        again = np.ones(40 * MIB, dtype=np.uint8)
        assert mmapped_blocks() == before
        del again
    assert resident_mib() < held - 150  # given back on leaving
    later = np.empty(PROBE, dtype=np.uint8)
    assert mmapped_blocks() == before + 1
    del later


def test_only_a_cpu_generate_reuses_the_heap():
    blocks = mmapped_blocks()
    for device, mmapped in (("cpu", 0), ("cuda:0", 1)):
        with cpu_heap.generate_heap(device):
            big = np.empty(PROBE, dtype=np.uint8)
            assert mmapped_blocks() == blocks + mmapped, device
            del big
