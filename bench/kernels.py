"""CPU arithmetic that repeats from one machine to the next.

PyTorch picks its vectorised kernels (ATen's) and MKL its matrix-multiply branch by
the CPU they find: AVX-512 on one VM, AVX2 on the next. Each level sums in its own
order, so the same recipe, data and seeds train a different model on each: the
learning benchmark's SFT stage landed on models of unequal quality on VMs "of the
same kind" (bench/README.md, "Does the SFT stage repeat?"). Pinning both to AVX2,
which every x86-64 machine here has, makes a machine with AVX-512 compute as one
without it, at whatever speed AVX2 gives it.

ATen and MKL read their settings once, at their first call, which importing the
trainer may already have made; so the pinned settings are put in the environment of
a fresh run of the same command rather than set in this process.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""ATen's kernel level, MKL's conditional-numerical-reproducibility branch, oneDNN's
highest instruction set."""


def has_avx2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this is an x86-64 CPU with AVX2 (elsewhere the settings mean nothing)."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    try:
        return "avx2" in cpuinfo.read_text().split()
    except OSError:
        return False


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name (``AMD EPYC 7B13``), where Linux tells it: pinned kernels
    repeat a model across VMs of one vendor, not from AMD's to Intel's (bench/README.md,
    "The last free cell")."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return None
    names = (line.partition(":")[2].strip() for line in lines if line.startswith("model name"))
    return next(names, None)


def pinned() -> bool:
    """Whether this process runs with the pinned settings."""
    return all(os.environ.get(name) == value for name, value in PINNED.items())


def rerun_pinned() -> None:
    """Replace this process with the same command under ``PINNED``, unless it already
    runs so or the CPU has no AVX2; returns only in those two cases."""
    if pinned() or not has_avx2():
        return
    print("rerunning with the CPU kernels pinned to AVX2 (bench/kernels.py)", flush=True)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, **PINNED})


def capability() -> str:
    """The kernel level ATen dispatches to in this process: AVX2, AVX512, DEFAULT..."""
    import torch

    return torch.backends.cpu.get_cpu_capability()
