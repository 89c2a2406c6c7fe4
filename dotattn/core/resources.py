"""Resources a run may take: the memory available now and the fraction of it a batch of runs may
claim before it is refused up front (every command that allocates in proportion to its inputs
estimates its need and refuses, in one line, before computing)."""

from __future__ import annotations

import os

__all__ = ["MEMORY_FRACTION", "available_memory", "check_memory"]

MEMORY_FRACTION = 0.8
"""A run is refused when its estimated memory (e.g. :meth:`dotattn.erm.config.ErmConfig.memory_bytes`) exceeds this fraction of the
memory available now (``MemAvailable`` in /proc/meminfo, else the physical memory)."""


def available_memory() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``; else physical memory; None if unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(need: int, what: str, advice: str, memory: int | None = -1) -> int:
    """``need`` (bytes, an estimate) if it fits in :data:`MEMORY_FRACTION` of the memory available
    (``memory``: bytes, default measured now; None: no check); otherwise ParameterError in one line
    naming ``what`` needs how much, what is allowed, and ``advice`` (e.g. "choose a smaller P")."""
    from dotattn.core.validation import ParameterError

    memory = available_memory() if memory == -1 else memory
    if memory is not None and need > MEMORY_FRACTION * memory:
        raise ParameterError(
            f"{what} needs about {need / 2**30:.1f} GiB, allowed {MEMORY_FRACTION:.0%} of the "
            f"{memory / 2**30:.1f} GiB available; {advice}"
        )
    return need
