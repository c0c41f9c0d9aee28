"""The written change-of-fact pairs keep their held-out parts apart: no training text is a validation or test text.

Writers A to I wrote before that rule (data/supersession/README.md); a few of their short sentences ("I'm
allergic to penicillin.") equal a held-out one, written independently, and stay as they were measured. Every
writer since (K on) is held to it, as any file added to the judge that ships will be.
"""

from pathlib import Path

from memnets.training.configs import load_config
from memnets.training.lit.supersession import read_pairs

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ROOT / "data/supersession/written"
HELD_OUT = ("validation.jsonl", "validation_j.jsonl", "test.jsonl")
BEFORE_THE_RULE = {f"data/supersession/written/train_{writer}.jsonl" for writer in "abefghi"}


def _texts(path: Path) -> set[str]:
    return {" ".join(row[side].lower().split()) for row in read_pairs([path]) for side in ("older", "newer")}


def test_no_text_of_the_shipped_judges_later_training_pairs_is_a_held_out_text():
    held_out = set().union(*(_texts(WRITTEN / name) for name in HELD_OUT))
    train = [path for path in load_config("supersession/shipped")["data"]["train"] if path not in BEFORE_THE_RULE]
    assert len(train) >= 6 and held_out
    shared = {path: sorted(_texts(ROOT / path) & held_out) for path in train}
    assert not {path: texts for path, texts in shared.items() if texts}
