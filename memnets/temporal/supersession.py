"""Does a newer memory end the validity of an older one? Two judges of the same contract.

The memory layer asks a ``SupersessionJudge`` (``memnets.memory.supersession``) about a candidate
pair, an older and a newer memory of the same speaker: ``score(older, newer)`` in [0, 1], and the
newer supersedes when the score reaches ``threshold``. The judges here:

- :class:`RuleJudge`, the default before training: the newer text carries a change cue ("moved
  to", "started", "stopped", "no longer", "now", "switched", "rescheduled", ...) or negates the
  older, AND the two are about the same subject: shared content words, or the same slot of
  :data:`SLOTS` (where one lives, what one eats, one's job, a flight's time, ...). "I love Paris in
  spring" after "I live in Paris" shares a word but carries no change: no supersession. "I still
  live in Paris" is a restatement ("still" cancels a change), and so is a newer text that repeats
  every content word of the older with only a weak cue ("now"); a strong one ("quit", "instead",
  :data:`STRONG_CUE`) is a change all the same. A wish or a plan ("would like to move") changes
  nothing, nor does a text about another person ("My cousin moved to Lima"); a weak cue counts only
  when the newer text opens on the older's subject and does not name "a new" one of the older's things.
- :class:`HeadJudge`: a trained head (``memnets.nn.heads.SupersessionHead``, exported in the pack)
  over the encoder's embeddings of the pair and the lexical features of :func:`pair_features`; a
  pair with no sign of change in its features scores 0.
- :class:`EitherJudge`: a pack's judge, the head and the rule judge together (either one suffices).

Both are plain text-in, score-out objects, so this module imports no torch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

# Change cues in the newer text, with their strength. A cue only counts with a shared subject.
CHANGE_PHRASES: dict[str, float] = {
    "no longer": 1.0, "not anymore": 1.0, "anymore": 0.9, "any more": 0.9, "moved to": 1.0, "moved": 0.9,
    "relocated": 1.0, "changed": 1.0, "switched": 1.0, "rescheduled": 1.0, "postponed": 1.0,
    "pushed back": 1.0, "brought forward": 1.0, "moved up": 1.0, "cancelled": 0.9, "canceled": 0.9,
    "started": 0.8, "began": 0.8, "stopped": 1.0, "quit": 1.0, "gave up": 1.0, "left": 0.4,
    "now": 0.8, "these days": 0.8, "instead": 0.9, "new": 0.4, "used to": 0.9,
    "became": 0.8, "got a": 0.4, "got divorced": 1.0, "broke up": 1.0, "got married": 1.0,
    "sold": 0.8, "replaced": 1.0, "updated": 0.4, "is now": 1.0, "are now": 1.0, "from now on": 1.0,
    "not any longer": 1.0, "ended": 0.8, "retired": 1.0, "dropped": 0.8, "upgraded": 0.9,
    "closed": 0.9, "opened": 0.6, "promoted": 1.0, "shifted": 1.0, "slipped": 1.0, "went up": 1.0,
    "went down": 1.0, "raised": 0.8, "lowered": 0.8, "migrated": 1.0, "cut out": 1.0, "handed": 0.8,
    "took over": 0.9, "passed away": 1.0, "died": 1.0, "got an": 0.4, "finally": 0.6, "took up": 0.8,
    "pushed": 0.9, "since": 0.5, "starting": 0.7, "alone": 0.5, "hasn't": 0.7, "seeing": 0.6,
    "ditched": 1.0, "dumped": 1.0, "traded": 0.9, "swapped": 1.0, "went back to": 1.0, "back to": 0.7,
    "stepped back": 1.0, "stepped down": 1.0, "as of": 0.8, "renamed": 1.0, "ported": 0.9, "lapse": 0.9,
    "remortgaged": 1.0, "renewed": 0.4, "got a raise": 1.0, "bumped": 0.9, "gave birth": 1.0,
    "stolen": 0.9, "found a": 0.6, "took over from": 1.0, "no more": 1.0, "dyed": 0.8,
    "signed": 0.6, "is led by": 1.0, "defended": 0.5, "not until": 0.8, "until": 0.5,
    "given up": 1.0, "giving up": 1.0, "not any more": 1.0, "gave away": 1.0, "got rid of": 1.0,
}  # fmt: skip
# Verbs of change, by family: each counts in its past and its -ing form (:func:`verb_forms`: "swap" ->
# swapped, swapping), so that "switching" counts as "switched" does. Not the bare or "-s" forms, which
# are nouns as often ("a night shift", "the bus stop") or habits ("she switches to decaf after noon").
CHANGE_VERBS: dict[str, float] = {
    "move": 0.9, "relocate": 1.0, "change": 1.0, "switch": 1.0, "swap": 1.0, "trade": 0.9, "stop": 1.0,
    "quit": 1.0, "start": 0.8, "begin": 0.8, "reschedule": 1.0, "postpone": 1.0, "push": 0.9, "cancel": 0.9,
    "replace": 1.0, "retire": 1.0, "drop": 0.8, "ditch": 1.0, "dump": 1.0, "upgrade": 0.9, "downgrade": 0.9,
    "migrate": 1.0, "shift": 1.0, "rename": 1.0, "become": 0.8, "sell": 0.8, "promote": 1.0, "bump": 0.9,
    "port": 0.9, "renew": 0.4,
}  # fmt: skip
IRREGULAR = {  # verb -> its past and -ing forms, where the rule of verb_forms does not give them
    "begin": ("began", "begun", "beginning"), "become": ("became", "becoming"), "sell": ("sold", "selling"),
    "quit": ("quit", "quitting"), "cancel": ("cancelled", "canceled", "cancelling", "canceling"),
}  # fmt: skip
STRONG_CUE = 0.9  # a cue this strong is a change even when the newer text repeats every older word


def verb_forms(verb: str) -> tuple[str, ...]:
    """The past and -ing forms of a verb of change: "move" -> moved, moving; "stop" -> stopped, stopping
    (a short verb ending in consonant, vowel, consonant doubles its last letter); else :data:`IRREGULAR`'s."""
    if verb in IRREGULAR:
        return IRREGULAR[verb]
    if verb.endswith("e"):
        return (f"{verb}d", f"{verb[:-1]}ing")
    vowels = "aeiou"
    doubled = len(verb) <= 4 and verb[-1] not in vowels + "wxy" and verb[-2] in vowels and verb[-3] not in vowels
    base = verb + verb[-1] if doubled else verb
    return (f"{base}ed", f"{base}ing")


CHANGE_CUES: dict[str, float] = {
    **{form: weight for verb, weight in CHANGE_VERBS.items() for form in verb_forms(verb)},
    **CHANGE_PHRASES,  # a phrase's own weight wins ("moved to" over "moved")
}
CUE_WORDS = frozenset(word for cue in CHANGE_CUES for word in cue.split())  # no content words (content_words)
# Words that mark the newer text as a restatement, not a change.
STILL_CUES = ("still", "as always", "as before", "again and again", "like always", "same as")
# Words that make the newer text a wish, a plan or a maybe, which leaves the older fact standing
# ("I would like to move to Madrid someday" after "I live in Austin").
UNREAL_CUES = ("would like", "might", "maybe", "someday", "one day", "thinking of", "thinking about",
               "considering", "planning to", "hoping to", "wants to", "want to", "dreams of", "wish")  # fmt: skip
NEGATIONS = ("not", "no", "never", "n't", "don't", "doesn't", "didn't", "isn't", "aren't", "won't", "can't")

# Slots: words that name the same attribute of a person; two texts touching one slot share a subject.
SLOTS: dict[str, tuple[str, ...]] = {
    "home": ("live", "lives", "living", "lived", "moved", "move", "moving", "relocated", "home", "apartment",
             "flat", "house", "city", "town", "neighborhood", "neighbourhood", "address", "rent"),
    "diet": ("eat", "eats", "eating", "ate", "vegetarian", "vegan", "meat", "fish", "diet", "pescatarian",
             "gluten", "dairy", "food", "keto", "chicken"),
    "work": ("work", "works", "working", "job", "employer", "employed", "company", "hired", "position", "role",
             "office", "career", "boss", "team", "engineer", "teacher", "nurse", "manager"),
    "relationship": ("married", "wife", "husband", "boyfriend", "girlfriend", "partner", "dating", "divorced",
                     "engaged", "single", "fiance", "fiancee"),
    "drink": ("drink", "drinks", "drinking", "coffee", "tea", "alcohol", "beer", "wine", "sober"),
    "transport": ("car", "drive", "drives", "driving", "bike", "cycle", "cycling", "commute", "scooter", "train",
                  "bus", "tube", "subway", "metro", "tram", "ride", "rides"),
    "contact": ("phone", "number", "email", "address", "handle", "mobile", "carrier", "sim", "username"),
    "health": ("smoke", "smoking", "smoker", "cigarettes", "medication", "pills", "allergic", "allergy", "dose",
               "prescription"),
    "pet": ("dog", "cat", "pet", "puppy", "kitten", "rabbit", "hamster", "parrot", "bird", "horse"),
    "study": ("study", "studying", "school", "university", "college", "degree", "course", "major", "student",
              "phd", "thesis", "postdoc", "lessons", "class"),
    "sleep": ("sleep", "sleeps", "sleeping", "slept", "wake", "wakes", "woke", "waking", "bed", "bedtime", "nap"),
    "money": ("salary", "pay", "paid", "wage", "raise", "earn", "earns", "income", "budget", "mortgage",
              "remortgaged", "loan", "savings", "pension", "debt"),
    "pregnancy": ("pregnant", "pregnancy", "baby", "birth", "born", "expecting"),
}  # fmt: skip
STOPWORDS = frozenset(
    "a an the i i'm im me my mine we our you your he she his her they their it its is am are was were be been "
    "being to of in on at for from with by and or but so that this these those there here as about into than "
    "then do does did have has had will would can could should just really very also too some any all "
    "what when where who which how up out over again only own same s t".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"\d+(?:[:.,]\d+)*")
_DATE_NAME = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December|Monday|Tuesday"
    r"|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b"
)  # capitalised: "may" the verb is no month
_NUMBERED = re.compile(r"(\d+(?:[:.,]\d+)*)([a-z]*)(?:\s+(?:a |an |per )?([a-z]+))?")  # number, suffix, next word
FEATURE_NAMES = ("change_cue", "still_cue", "negation_flip", "value_change", "word_overlap", "same_slot", "rule_score")


def words(text: str) -> list[str]:
    """Lower-case words, a possessive "'s" taken off ("Ann's" -> "ann")."""
    return [word.removesuffix("'s") for word in _WORD.findall(text.lower())]


def stem(word: str) -> str:
    """A crude stem, enough to meet "gym" in "gyms" and "teach" in "teaching": a plural "s" off, then
    the first five letters."""
    return (word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)[:5]


SLOT_OF = {stem(word): slot for slot, words in SLOTS.items() for word in words}  # by stem: "commutes" meets "commute"


def content_words(text: str) -> set[str]:
    """The stems of the words of ``text`` that name things (stop words, change cues and numbers left out)."""
    return {
        stem(word) for word in words(text) if word not in STOPWORDS and word not in CUE_WORDS and not word.isdigit()
    }


def subject_words(older: str, newer: str) -> tuple[set[str], set[str]]:
    """The content words of both texts, less the speaker's own name where both open with it: the
    pair is of one speaker already, so "Ann" in common says nothing about a common subject. Likewise
    the person both open on (:data:`RELATIONS`) when the two touch two other slots: "My sister minds
    our dog" and "My sister moved to a bigger flat" are about a pet and a home."""
    a, b = content_words(older), content_words(newer)
    first_a, first_b = words(older)[:1], words(newer)[:1]
    if first_a and first_a == first_b:
        a, b = a - {stem(first_a[0])}, b - {stem(first_a[0])}
    person = opener(older) & opener(newer) & {stem(word) for word in RELATIONS}
    if person and slots(older) and slots(newer) and not slots(older) & slots(newer):
        a, b = a - person, b - person
    return a, b


def names(text: str) -> set[str]:
    """The capitalised words of ``text`` after its first word: the names of places, firms, people
    ("Vodafone", "Three", "Dr. Okafor" -> "okafor"), lower-cased."""
    found = re.findall(r"[A-Za-z][\w'-]*", text)[1:]
    return {word.lower().removesuffix("'s") for word in found if word[0].isupper() and word != "I"}


def numbers(text: str) -> dict[str, str]:
    """The numbers of ``text`` with their kind: "time" (``10:30``, ``7 pm``), a suffix or the unit word
    after it ("12th" -> "th", "50 mg" -> "mg", "45 a month" -> "month"), else "" (any kind); and the
    months and weekdays it names, of kind "date" ("in June", "on Tuesdays" -> "tuesday")."""
    found = {}
    for match in _NUMBERED.finditer(text.lower()):
        number, suffix, unit = match.groups()
        kind = suffix or (unit if unit and unit not in STOPWORDS else "")
        found[number] = "time" if ":" in number or kind in ("am", "pm") else kind
    return found | {day.lower(): "date" for day in _DATE_NAME.findall(text)}


def numbers_changed(older: str, newer: str) -> bool:
    """Both texts state numbers, times or dates, the newer's all other ones, of a kind the older's has
    ("at 10:30" -> "at 11:30", "50 mg" -> "100 mg", "in June" -> "in September"; not "45 a month" -> "20 GB")."""
    old, new = numbers(older), numbers(newer)
    return bool(old and new and not new.keys() & old.keys()) and any(
        not a or not b or a == b for a in old.values() for b in new.values()
    )


def named_after(text: str) -> set[tuple[str, str]]:
    """(the word before, the name) for each name of ``text`` (:func:`names`): ("with", "admiral")."""
    found = re.findall(r"[A-Za-z][\w'-]*", text)
    return {
        (before.lower(), word.lower().removesuffix("'s"))
        for before, word in zip(found[1:], found[2:])
        if word[0].isupper() and word != "I"
    }


def value_change(older: str, newer: str) -> bool:
    """The newer text states another value than the older: :func:`numbers_changed`; or it names something
    new while a name of the older is gone from it ("carrier is Vodafone" -> "ported his number to Three";
    words compared by their stems); or it names something new in the older name's place, after the same
    word, the old name kept only as an aside ("insurance is with Admiral" -> "insurance renewed with
    Aviva, Admiral was dearer")."""
    if numbers_changed(older, newer):
        return True
    old_words, new_words = {stem(word) for word in words(older)}, {stem(word) for word in words(newer)}
    gone = {stem(name) for name in names(older)} - new_words
    added = {stem(name) for name in names(newer)} - old_words
    old_places = {before for before, _ in named_after(older)}
    in_place = {name for before, name in named_after(newer) if before in old_places and stem(name) in added}
    return bool(added and (gone or in_place))


def restated(older_words: set[str], newer_words: set[str]) -> bool:
    """Every content word of the older text (:func:`subject_words`) is in the newer one: it keeps the old
    fact and adds a detail ("kids walk to school" -> "kids now walk to school with the twins"); the
    caller rules out a newer text that negates the older or changes a value."""
    return bool(older_words) and older_words <= newer_words


PERSONS = {"i": "i", "i'm": "i", "i've": "i", "i'd": "i", "i'll": "i", "me": "i", "my": "i", "we": "we",
           "we're": "we", "we've": "we", "us": "we", "our": "we"}  # fmt: skip
ARTICLES = frozenset({"the", "a", "an", "his", "her", "their", "your", "its", "this", "that"})
# People one speaks of: "my cousin ..." and "Ann's sister ..." are about them, not about the speaker or Ann.
RELATIONS = frozenset(
    "mum mom mother dad father parent parents sister brother sibling cousin aunt uncle niece nephew grandma "
    "grandpa grandmother grandfather son daughter kid kids child children wife husband partner boyfriend "
    "girlfriend friend friends neighbour neighbor colleague coworker boss flatmate roommate".split()
)


def opener(text: str) -> set[str]:
    """Who or what ``text`` is about, from its first words (stems): the speaker for "I ..." ({"i"}) and
    "My flight ..." ({"i", "fligh"}), a name and its thing for "Ulla's team ..." ({"ulla", "team"}),
    the noun after an article for "The flight ..." ({"fligh"}), else the first word. Another person
    (:data:`RELATIONS`) after a possessive is that person alone: "My cousin ..." -> {"cousi"}."""
    found = _WORD.findall(text.lower())
    if not found:
        return set()
    first, second = found[0], found[1].removesuffix("'s") if len(found) > 1 else ""
    owner = first in ("my", "our") or first.endswith("'s")
    if owner and second in RELATIONS:
        return {stem(second)}
    after = {stem(second)} if second else set()
    if first in PERSONS:
        return {PERSONS[first], *(after if owner else ())}
    if first in ARTICLES:
        return after
    return {stem(first.removesuffix("'s")), *(after if owner else ())}


def about_another(older: str, newer: str) -> bool:
    """The newer text is about another person than the older (it opens on one of :data:`RELATIONS`
    after a possessive, and the older does not): "My cousin moved to Lima" ends nothing of "I live in
    Denver" ("Aunt Bea moved the reunion to May" may end "The reunion is in July")."""
    found, about = _WORD.findall(newer.lower())[:1], opener(newer)
    owned = bool(found) and (found[0] in ("my", "our") or found[0].endswith("'s"))
    return owned and bool(about & {stem(word) for word in RELATIONS}) and not opener(older) & about


def another_of(older_words: set[str], newer: str) -> bool:
    """The newer text names "a new X" where X is a thing of the older one: another of the same thing
    ("Sam plays chess" -> "Sam started a new chess club"), which leaves the older fact
    standing (a replaced value, "Ann's new employer is Globex", is :func:`value_change`'s to see)."""
    found = words(newer)
    return any(word == "new" and stem(next_) in older_words for word, next_ in zip(found, found[1:]))


def _has(phrase: str, padded: str) -> bool:
    return f" {phrase} " in padded


def change_cue(text: str) -> float:
    """The strongest change cue of ``text`` (0 when none)."""
    padded = " " + " ".join(words(text)) + " "
    return max((weight for cue, weight in CHANGE_CUES.items() if _has(cue, padded)), default=0.0)


def still_cue(text: str) -> bool:
    """``text`` leaves the older fact standing: it restates it (:data:`STILL_CUES`) or only wishes, plans or
    guesses (:data:`UNREAL_CUES`)."""
    padded = " " + " ".join(words(text)) + " "
    return any(_has(cue, padded) for cue in (*STILL_CUES, *UNREAL_CUES))


def negated(text: str) -> bool:
    found = words(text)
    return any(word in NEGATIONS or word.endswith("n't") for word in found)


def slots(text: str) -> set[str]:
    """The :data:`SLOTS` the words of ``text`` touch (compared by their stems)."""
    return {SLOT_OF[stem(word)] for word in words(text) if stem(word) in SLOT_OF}


def pair_features(older: str, newer: str) -> list[float]:
    """The lexical features of a pair, in :data:`FEATURE_NAMES` order (the rule judge reads them,
    and the trained head takes them beside the embeddings)."""
    a, b = subject_words(older, newer)
    overlap = len(a & b) / max(1, min(len(a), len(b)))
    same_slot = 1.0 if slots(older) & slots(newer) else 0.0
    cue, still = change_cue(newer), still_cue(newer)
    flip = 1.0 if negated(older) != negated(newer) else 0.0
    values = 1.0 if value_change(older, newer) else 0.0
    # one slot, or words in common (a changed number or time of a thing both name is the same subject)
    subject = max(min(1.0, 2 * overlap), same_slot, 1.0 if overlap and numbers_changed(older, newer) else 0.0)
    kept = restated(a, b) and not flip and not values and cue < STRONG_CUE
    # a weak cue speaks of the newer text's own subject: none when that is another one than the older's
    # ("Eli's daughter goes to Oak Hill" -> "Oak Hill now has a gym") or it is another of the same thing
    about = opener(newer)
    its_thing = bool(about & content_words(older)) and not about & opener(older)
    weak_elsewhere = cue < STRONG_CUE and (its_thing or another_of(a, newer))
    change = max(0.0 if weak_elsewhere else cue, 0.9 * flip, 0.8 * values)
    score = 0.0 if still or kept or about_another(older, newer) else subject * change
    return [cue, float(still), flip, values, overlap, same_slot, score]


class RuleJudge:
    """The default supersession decision, by rule (see the module docstring); no model, no LLM.

    ``score(older, newer)`` = subject x change: subject is 1 for a shared slot or twice the share of
    content words in common (at most 1; the speaker's name left out); change is the strongest cue of
    the newer text, 0.9 when exactly one of the two is negated, 0.8 when the newer states other
    numbers or times; 0 when the newer says "still". Supersedes at ``threshold``.
    """

    def __init__(self, threshold: float = 0.5):
        if not 0 <= threshold <= 1:
            raise ValueError(f"RuleJudge: threshold must be in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def score(self, older: str, newer: str) -> float:
        return pair_features(older, newer)[-1]


def signalled(features: Sequence[float]) -> bool:
    """A pair's :func:`pair_features` carry a sign of change: a change cue, a negation that flips or a
    changed value, and no "still" (nor a wish). Without one, nothing in the text says the fact changed."""
    named = dict(zip(FEATURE_NAMES, features, strict=True))
    return not named["still_cue"] and bool(named["change_cue"] or named["negation_flip"] or named["value_change"])


class HeadJudge:
    """A trained supersession head as a judge: the encoder embeds the pair, the head scores it.

    ``encoder``: a ``TextEncoder``; ``head``: a ``SupersessionHead`` (its ``threshold`` as saved: set on
    the dev set by ``bench.experiments.supersession --set-threshold``, else the one of validation).
    Load both from a pack with ``Pack.supersession_judge``. A pair with no sign of change
    (:func:`signalled`) scores 0, as it does for the rule judge: the head judges whether a signalled
    change ends the older fact (same subject, same slot, said of the same person), never that two texts
    only look alike ("The billing migration hit a snag" after "Gustav's project is the billing migration").
    """

    def __init__(self, encoder: Any, head: Any, threshold: float | None = None):
        self.encoder, self.head = encoder, head
        self.threshold = float(head.threshold if threshold is None else threshold)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The scores of many (older, newer) pairs, embedded in one batch."""
        return self.scored(pairs)[0]

    def scored(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[list[float]]]:
        """(:meth:`scores`, each pair's :func:`pair_features`): the features' last is the rule judge's score."""
        if not pairs:
            return [], []
        vectors = self.encoder.encode([text for pair in pairs for text in pair], "memory")
        features = [pair_features(older, newer) for older, newer in pairs]
        found = self.head.predict_proba(vectors[0::2], vectors[1::2], features)
        return [float(p) if signalled(f) else 0.0 for p, f in zip(found, features, strict=True)], features

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]


def at_half(score: float, threshold: float) -> float:
    """``score`` mapped onto [0, 1] piecewise linearly so that ``threshold`` lands on 0.5 (order kept)."""
    if score >= threshold:
        return 1.0 if threshold >= 1 else 0.5 + 0.5 * (score - threshold) / (1 - threshold)
    return 0.5 * score / threshold


class EitherJudge:
    """The pack's judge: the trained head and the rule judge together; the newer supersedes when either
    would at its own threshold (the head's set on the dev set). Its score is the larger of the two, each
    mapped so that its threshold is 0.5 (:func:`at_half`), and its threshold is 0.5; each decision is
    logged (DEBUG, ``memnets.temporal.supersession``) with both judges' own scores and thresholds.

    The head meets changes whose subject no word list names ("ported his number" after "the carrier is
    Vodafone"); the rule judge meets changes the head, trained on generated templates, has not seen.
    """

    threshold = 0.5

    def __init__(self, head: HeadJudge, rule: RuleJudge | None = None):
        self.head, self.rule = head, rule or RuleJudge()

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        heads, features = self.head.scored(pairs)  # the rule judge's score is the features' last: not twice
        for (older, newer), head, rule in zip(pairs, heads, (f[-1] for f in features), strict=True):
            score = max(at_half(head, self.head.threshold), at_half(rule, self.rule.threshold))
            log.debug(
                "supersession %.3f: head %.3f (threshold %.2f), rule %.3f (threshold %.2f) | %r -> %r",
                score, head, self.head.threshold, rule, self.rule.threshold, older[:60], newer[:60],
            )  # fmt: skip
            out.append(score)
        return out

    def score(self, older: str, newer: str) -> float:
        return self.scores([(older, newer)])[0]
