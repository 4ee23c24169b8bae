"""Process memory for the metrics rows and the benchmark: current and peak RSS, and a peak that restarts.

A high-water mark never falls, so several runs in one process (compare.py runs every method in turn) would all
report the largest peak so far. `reset_peak` restarts it (Linux >= 4.0: /proc/self/clear_refs; CUDA: torch's
peak statistics), so each run's `peak_rss_mb` is its own. Elsewhere the peak stays process-wide.

Freed memory is not always returned: glibc keeps freed heap pages (its mmap threshold grows after large frees, so
later large tensors land on the heap), and a process that ran a PPO cell on SmolLM2 held 6.6 GB at the next run's
start although every model was collected. A run's growth measured from there reuses that heap and reads too small.
`reset_peak` therefore hands free heap pages back first (`malloc_trim(0)`, glibc only; elsewhere nothing).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import resource

import torch


def _proc_status(key: str) -> float | None:
    """A VmXXX line of /proc/self/status in MiB (Linux), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def release_free_heap() -> bool:
    """Collect garbage and return the C heap's free pages to the OS (glibc's malloc_trim) -> whether it could."""
    gc.collect()
    try:
        return bool(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # not glibc (macOS, musl): freed memory stays where the allocator keeps it
        return False


def reset_peak() -> bool:
    """Restart the peak RSS (and CUDA's peak) from the current usage, after returning free heap pages, so that
    the usage a run starts from is what is live -> whether the RSS peak could restart."""
    release_free_heap()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # 5: reset the peak RSS (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def rss_mb() -> float:
    """The current RSS in MiB (without /proc: the peak, the closest getrusage offers)."""
    return _proc_status("VmRSS") or _max_rss_mb()


def peak_rss_mb() -> float:
    """The peak RSS in MiB since the last `reset_peak` (without /proc: since the process started)."""
    return _proc_status("VmHWM") or _max_rss_mb()
