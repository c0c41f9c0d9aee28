"""Load a trained pack: check it, read its figures, and give a memory its encoder, heads and scorer.

    python examples/load_pack.py PACK [FOLDER]

PACK is a folder written by `memnets export` (the main job writes checkpoints/pack;
examples/train_on_jsonl.py writes one too). Loading verifies the manifest, every checksum and the
shapes, and never unpickles. FOLDER (default: a new temporary folder) is a memory filled by the
pack's encoder.
"""

from __future__ import annotations

import json
import sys
import tempfile

import memnets


def main(pack_dir: str, folder: str) -> None:
    pack = memnets.load_pack(pack_dir)  # raises a PackError naming the file if anything is off
    print(f"pack {pack_dir}: format {pack.manifest['format_version']}, dim {pack.manifest['embedding_dim']}")
    print("metrics:", json.dumps(pack.manifest.get("metrics", {}), sort_keys=True)[:300])
    with memnets.open(folder, pack=pack_dir) as memory:  # the pack's encoder, importance, gate, scorer
        memory.add_many(["I moved to Lisbon in March", "My sister Ana plays the cello"], user="alice")
        for hit in memory.search("Where does Alice live?", user="alice", k=2):
            print(f"{hit.score:.3f}  {hit.memory.content}  (importance {hit.memory.importance:.2f})")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="memnets-pack-"))
