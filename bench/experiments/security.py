"""What the security hardening costs: the passphrase KDF per open, and opening a 100k archive.

- KDF: seconds to derive an archive key from a passphrase with the legacy scrypt parameters
  (N=2^14, r=8, p=1) and with the current default (N=2^17, OWASP's minimum); every open of a
  passphrase archive pays this once (raw 32-byte keys pay nothing).
- Open: an encrypted archive (raw key) of N memories (dim 384, the MiniLM size) is built and
  closed (which saves the FAISS index); then the time of ``Archive(folder, None, key=key)`` is
  taken, repeatedly, with the saved index loaded, and once with the index folder removed (a
  rebuild from SQLite). With this memnets the load first checks the index files (sha256 of each
  file, an HMAC over them, a private copy that FAISS reads).

The same script runs against an older checkout for the "before" figures (it uses only
``Archive(...)``, ``upsert`` and ``index_source``)::

    python -m bench.experiments.security --sizes 100000                          # this checkout
    PYTHONPATH=/path/to/old/checkout python -m bench.experiments.security --sizes 100000 --label before --out /tmp/b
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import parser, write_result


def kdf_seconds(repeats: int) -> dict:
    """Median and min seconds of one passphrase derivation per KDF setting this memnets knows."""
    from memnets.memory import crypto

    settings = {
        "legacy (N=2^14, r=8, p=1)": getattr(crypto, "LEGACY_KDF", None),
        "default": getattr(crypto, "DEFAULT_KDF", None),
    }
    out = {}
    for label, params in settings.items():
        if params is None:
            continue
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            crypto.derive_key("correct horse battery staple", os.urandom(16), params)
            times.append(time.perf_counter() - start)
        out[label] = {"params": params, "median_s": float(np.median(times)), "min_s": float(min(times))}
    return out


def build(folder: Path, n: int, dim: int, key: bytes) -> float:
    """An encrypted archive of n memories (random unit vectors, 5 owners); returns seconds to build and close."""
    from memnets.records import Memory
    from memnets.store.archive import Archive

    rng = np.random.default_rng(0)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    start = time.perf_counter()
    with Archive(folder, dim, key=key) as archive:
        for begin in range(0, n, 5000):
            size = min(5000, n - begin)
            vectors = rng.normal(size=(size, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            memories = [
                Memory(
                    id=f"m{i}",
                    owner=f"user{i % 5}",
                    t=t0 + timedelta(seconds=i),
                    content=f"memory number {i}: something the user said that is worth keeping",
                )
                for i in range(begin, begin + size)
            ]
            archive.upsert(memories, vectors)
    return time.perf_counter() - start


def open_seconds(folder: Path, key: bytes, repeats: int) -> dict:
    """Seconds per open with the saved index (median, min over ``repeats``) and with a rebuild."""
    from memnets.store.archive import Archive

    loaded, sources = [], set()
    for _ in range(repeats):
        start = time.perf_counter()
        archive = Archive(folder, None, key=key)
        loaded.append(time.perf_counter() - start)
        sources.add(archive.index_source)
        archive.close()
    shutil.rmtree(folder / "index")
    start = time.perf_counter()
    archive = Archive(folder, None, key=key)
    rebuilt = time.perf_counter() - start
    source = archive.index_source
    archive.close()  # saves the index again
    return {
        "open_loaded_median_s": float(np.median(loaded)),
        "open_loaded_min_s": float(min(loaded)),
        "index_sources": sorted(sources),
        "open_rebuilt_s": rebuilt,
        "rebuilt_source": source,
        "index_mb": sum(f.stat().st_size for f in (folder / "index").iterdir()) / 1e6,
        "db_mb": (folder / "archive.sqlite3").stat().st_size / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.security", __doc__.splitlines()[0])
    p.add_argument("--sizes", default="100000", help="comma-separated archive sizes (default: 100000)")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--label", default="this checkout", help="name of the code measured (e.g. 'before')")
    args = p.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    import memnets.store.archive as archive_module

    results = {
        "label": args.label,
        "archive_module": archive_module.__file__,
        "kdf": kdf_seconds(args.repeats),
        "open": {},
    }
    for label, row in results["kdf"].items():
        print(f"KDF {label:28s} {row['params']}: median {row['median_s']:.3f} s, min {row['min_s']:.3f} s")
    key = os.urandom(32)
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="memnets-bench-security-") as tmp:
            folder = Path(tmp) / "archive"
            build_s = build(folder, n, args.dim, key)
            row = {"build_s": build_s, **open_seconds(folder, key, args.repeats)}
        results["open"][str(n)] = row
        print(
            f"{args.label}: {n:,} memories (dim {args.dim}, encrypted): open with saved index "
            f"median {row['open_loaded_median_s']:.3f} s (min {row['open_loaded_min_s']:.3f} s, {row['index_sources']}), "
            f"open with rebuild {row['open_rebuilt_s']:.2f} s; index {row['index_mb']:.0f} MB, "
            f"database {row['db_mb']:.0f} MB; build {build_s:.1f} s"
        )
    load = os.getloadavg()
    results["load_average"] = load
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    path = write_result(args.out, "security", {"sizes": sizes, "dim": args.dim, "repeats": args.repeats}, results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
