"""``backend="auto"``: the fastest encoder backend that agrees with the exact one on this machine.

The candidates are tried fastest first (:data:`AUTO_ORDER`, the order measured on every CPU so
far: docs/benchmarks.md, "Encoding"): a candidate is kept when it loads and its vectors of
:data:`PROBE_TEXTS` have a mean cosine of at least :data:`AGREEMENT_FLOOR` to the exact torch
ones, computed here, on this CPU, at load. A candidate that cannot load (ONNX Runtime missing, a
broken graph file) is passed over with one log line, so the worst case is the exact torch encoder.
The chosen backend is the encoder's ``backend`` and so leads its fingerprint
(``"int8:384:..."``): a store records which path filled it, and refuses vectors of another one.

fp16 and bf16 are GPU backends here (torch autocast on CUDA); :func:`cpu_half_precision` says
whether this CPU could run half precision natively at all, read from its flags, never assumed. On
an AVX512-BF16 CPU torch's bf16 autocast measured no faster than float32 torch, and ONNX Runtime's
CPU kernels have no bf16 MatMul. Training differs: there a bf16 autocast step, backward pass
included, runs 2.5-3x faster on such a CPU, and CPU fits use it where the flags allow
(memnets.training.lit.precision). The VNNI int8 paths (``"int8_vnni"``, ``"int8_vnni_ffn"``, loaded
only where the CPU's flags show VNNI, else ``"int8"``: :func:`vnni_or_int8`) are faster still on
such a CPU, but they are not candidates: on a trained pack their R@10 fell up to 1.1 points
(docs/results/r10_int8_vnni-*, r10_enc6-*), outside the 0.5 points the automatic choice allows.
They are there by name (``backend="int8_vnni"``).
"""

from __future__ import annotations

import logging

from memnets.machine import instruction_sets

logger = logging.getLogger(__name__)

AUTO_ORDER = ("int8", "onnx")  # fastest first; torch, the exact encoder, is the last resort
AGREEMENT_FLOOR = 0.99  # mean cosine to the exact vectors a backend must reach to be chosen
PROBE_TEXTS = (
    "I adopted a rescue dog named Biscuit last spring.",
    "What time does the pottery class start on Saturdays?",
    "Melanie said she would paint a sunrise over the lake for the charity auction.",
    "My sister moved from Boston to Lisbon in 2021 and now works as a nurse there.",
    "remind me to renew the car insurance before the end of the month",
    "We argued about whether the hiking trip should be in June or September.",
    "The quarterly report is due on Friday; Tom owns the revenue section.",
    "ok",
)
# the CPU flags of VNNI, whose VPDPBUSD sums u8 x s8 products into 32 bits without saturating
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# the CPU flags whose instructions compute in half precision natively (an AVX2 CPU has none)
HALF_PRECISION_FLAGS = {"fp16": ("avx512_fp16",), "bf16": ("avx512_bf16", "amx_bf16")}


def cpu_half_precision(flags: list[str] | None = None) -> dict:
    """Whether this CPU (or one with ``flags``) has native fp16 / bf16 instructions, and the decision
    taken: ``{"fp16": bool, "bf16": bool, "flags": [...], "decision": str}``. memnets has no CPU
    half-precision backend, so the decision says why none is used here."""
    flags = instruction_sets() if flags is None else flags
    found = {kind: [f for f in wanted if f in flags] for kind, wanted in HALF_PRECISION_FLAGS.items()}
    if not any(found.values()):
        wanted = ", ".join(f for names in HALF_PRECISION_FLAGS.values() for f in names)
        decision = f"not used: the CPU has none of {wanted}, so fp16/bf16 would be emulated (slower than float32)"
    else:
        have = ", ".join(f for names in found.values() for f in names)
        decision = (
            f"the CPU has {have}, but memnets has no CPU half-precision backend (torch bf16 autocast measured"
            " no faster than float32, and ONNX Runtime has no CPU bf16 MatMul): int8 / float32 used"
        )
    return {"fp16": bool(found["fp16"]), "bf16": bool(found["bf16"]), "flags": flags, "decision": decision}


def has_vnni(flags: list[str] | None = None) -> bool:
    """Whether this CPU (or one with ``flags``) has one of :data:`VNNI_FLAGS`, read from its flags."""
    flags = instruction_sets() if flags is None else flags
    return any(flag in flags for flag in VNNI_FLAGS)


def vnni_or_int8(backend: str, flags: list[str] | None = None) -> str:
    """``backend`` (an s8 VNNI backend: ``"int8_vnni"``, ``"int8_vnni_ffn"``) where this CPU (or one
    with ``flags``) :func:`has_vnni`, else ``"int8"`` with one warning line naming the flags: s8
    weights saturate without VNNI (AVX2's u8 x s8 products are summed in pairs into 16 bits), and
    ``"int8"`` (u8 weights) is the int8 path made for such a CPU."""
    flags = instruction_sets() if flags is None else flags
    if has_vnni(flags):
        return backend
    logger.warning(
        "backend %r needs a CPU with one of %s (its flags: %s): using 'int8' instead",
        backend,
        ", ".join(VNNI_FLAGS),
        " ".join(flags) or "unknown",
    )
    return "int8"


def choose_backend(encoder, folder=None) -> str:
    """Set ``encoder`` (on its exact backend: torch, or the serving encoder's float32 ``"onnx"``) to the first of
    :data:`AUTO_ORDER` that loads and agrees (:data:`AGREEMENT_FLOOR` on :data:`PROBE_TEXTS`), else leave it on
    that exact backend; the chosen name. Logs one line: the choice, and why any faster candidate was passed over."""
    import numpy as np

    exact_backend = encoder.backend
    exact = np.asarray(encoder.encode(list(PROBE_TEXTS)))
    passed_over = []
    for backend in AUTO_ORDER:
        try:
            encoder.set_backend(backend, folder)
        except Exception as error:  # noqa: BLE001 - any failure to load means: not this backend
            passed_over.append(f"{backend!r} could not load ({type(error).__name__}: {error})")
            continue
        agreement = float((np.asarray(encoder.encode(list(PROBE_TEXTS))) * exact).sum(axis=1).mean())
        if agreement >= AGREEMENT_FLOOR:
            reasons = f"; passed over: {'; '.join(passed_over)}" if passed_over else ""
            logger.info(
                "backend 'auto' chose %r (mean cosine %.4f to the exact encoder)%s", backend, agreement, reasons
            )
            return backend
        passed_over.append(f"{backend!r} agrees only {agreement:.4f} with the exact encoder (floor {AGREEMENT_FLOOR})")
    encoder.set_backend(exact_backend, folder)
    logger.warning("backend 'auto' fell back to the exact %r backend: %s", exact_backend, "; ".join(passed_over))
    return exact_backend
