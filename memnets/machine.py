"""What a timing was measured on: the CPU's model, its cores and the vector instruction sets that decide speed.

Training and encoding times differ several-fold between CPUs of the same core count (AVX-512,
VNNI and AMX speed up matrix products; an AVX2-only CPU has none of them), so every figure that
``memnets run`` and the benchmarks record names the machine it came from.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

# the /proc/cpuinfo flags that matter for torch's and ONNX Runtime's CPU kernels, in the order printed
SPEED_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)


def _cpuinfo_value(key: str) -> str | None:
    """The first ``key : value`` of /proc/cpuinfo (Linux), None elsewhere or when it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor(), else "unknown"."""
    return _cpuinfo_value("model name") or platform.processor() or "unknown"


def instruction_sets() -> list[str]:
    """The CPU's flags among :data:`SPEED_FLAGS` (empty where /proc/cpuinfo cannot be read)."""
    flags = set((_cpuinfo_value("flags") or "").split())
    return [flag for flag in SPEED_FLAGS if flag in flags]


def describe() -> dict:
    """{"cpu", "cores", "instruction_sets", "platform"} of this machine."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "instruction_sets": instruction_sets(),
        "platform": platform.platform(),
    }
