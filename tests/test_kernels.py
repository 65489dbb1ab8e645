"""Pinned CPU kernels (bench/kernels.py): what lets the learning benchmark's SFT stage
train the same model on a machine with AVX-512 as on one without."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import kernels


def test_avx2_is_read_from_the_cpus_flags_not_from_a_longer_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels.platform, "machine", lambda: "x86_64")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse2 avx avx2 fma\n")
    assert kernels.has_avx2(cpuinfo)
    cpuinfo.write_text("flags\t\t: fpu sse2 avx avx2x fma\n")
    assert not kernels.has_avx2(cpuinfo)
    assert not kernels.has_avx2(tmp_path / "absent")
    monkeypatch.setattr(kernels.platform, "machine", lambda: "aarch64")
    cpuinfo.write_text("flags\t\t: fpu sse2 avx avx2 fma\n")
    assert not kernels.has_avx2(cpuinfo)


def test_the_cpus_name_is_its_first_model_name_line(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nmodel name\t: other\n")
    assert kernels.cpu_name(cpuinfo) == "AMD EPYC 7B13"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")  # an ARM CPU names none
    assert kernels.cpu_name(cpuinfo) is None
    assert kernels.cpu_name(tmp_path / "absent") is None


@pytest.mark.skipif(not kernels.has_avx2(), reason="the kernels are pinned on x86-64 with AVX2")
def test_a_run_reruns_itself_once_with_the_kernels_pinned_to_avx2() -> None:
    script = (
        "import os, sys\n"
        "from bench import kernels\n"
        "print('run', flush=True)\n"
        "kernels.rerun_pinned()\n"
        "print(os.environ['MKL_CBWR'], os.environ['ONEDNN_MAX_CPU_ISA'], kernels.capability(),"
        " sys.argv[1:])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in kernels.PINNED}
    env["ATEN_CPU_CAPABILITY"] = "default"  # what a run would otherwise get: not AVX2
    done = subprocess.run(
        [sys.executable, "-c", script, "--flag"], env=env, capture_output=True, text=True,
        check=True, cwd=Path(__file__).parents[1], timeout=120,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "run"
    assert lines[1].startswith("rerunning with the CPU kernels pinned to AVX2")
    assert lines[2:] == ["run", "AVX2 AVX2 AVX2 ['--flag']"]
