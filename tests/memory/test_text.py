"""One speaker-prefix rule for every text heuristic: the importance heuristic and the head's text features."""

import numpy as np

from memnets.memory.signals import HeuristicImportance
from memnets.nn.heads import text_features
from memnets.text import SPEAKER_PREFIX_MAX, strip_speaker


def test_strip_speaker_removes_a_short_prefix_only():
    assert strip_speaker("Ann: I adopted a beagle named Rex") == "I adopted a beagle named Rex"
    assert strip_speaker("no prefix here") == "no prefix here"
    late = "x" * SPEAKER_PREFIX_MAX + ": not a speaker"
    assert strip_speaker(late) == late
    assert strip_speaker("Ann: it is 5: 30 now") == "it is 5: 30 now"  # only the first separator


def test_heuristic_and_text_features_see_the_same_body():
    late = "the plan for the whole week ahead of us all: bring the tent and the stove"
    assert late.index(": ") > SPEAKER_PREFIX_MAX  # a colon in the text, not a speaker prefix
    words = len(late.split())
    # neither strips it: the length counts every word (no digits, names or first person here)
    assert HeuristicImportance(full_length=25).score_text(late) == 0.5 * words / 25
    assert float(text_features([late])[0, 1]) == np.float32(np.log1p(words) / 4.0)
    # with a speaker, neither counts the name
    heuristic = HeuristicImportance()
    assert heuristic.score_text("Bob: the plan") == heuristic.score_text("the plan")
    np.testing.assert_array_equal(text_features(["Bob: the plan"]).numpy(), text_features(["the plan"]).numpy())


def test_the_digit_feature_is_str_isdigit_of_any_character_ascii_or_not():
    """The text features test ASCII text for digits as bytes: the same answer as str.isdigit, which also
    takes digits outside ASCII (superscripts, Arabic-Indic) and leaves numerals that are not digits."""
    from memnets.nn.heads import TEXT_FEATURES

    texts = [
        "Ann: in 2023",
        "Ann: no numbers",
        "Ann: x\u00b2 is a square",
        "Ann: \u0663 cats",
        "Ann: \u216b o'clock",
        "",
    ]
    digit = text_features(texts)[:, TEXT_FEATURES.index("digit")].tolist()
    assert digit == [float(any(map(str.isdigit, strip_speaker(text)))) for text in texts] == [1, 0, 1, 1, 0, 0]
