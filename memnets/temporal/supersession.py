"""Does a newer memory end the validity of an older one? Two judges of the same contract.

The memory layer asks a ``SupersessionJudge`` (``memnets.memory.supersession``) about a candidate
pair, an older and a newer memory of the same speaker: ``score(older, newer)`` in [0, 1], and the
newer supersedes when the score reaches ``threshold``. The judges here:

- :class:`RuleJudge`, the default before training: the newer text carries a change cue ("moved
  to", "started", "stopped", "no longer", "now", "switched", "rescheduled", ...), negates the older
  (a negation that reaches one of its things) or states another value (numbers, a name in the old
  one's place), AND the two are about the same subject: shared content words, or the same slot of
  :data:`~memnets.temporal.lexicon.SLOTS` (where one lives, what one eats, one's job, ...). A change
  with no change word (:mod:`memnets.temporal.implicit`: "sold the Civic", "my new GP", "I cycle to
  work these days" after "I take the bus") is both at once. "I love Paris in spring" after "I live in
  Paris" shares a word but carries no change: no supersession. "I still live in Paris" is a
  restatement ("still" cancels a change), and so is a newer text that repeats every content word of
  the older with only a weak cue ("now"); a strong one ("quit", "instead", :data:`STRONG_CUE`) is a
  change all the same. A wish, a plan, a question or an anecdote ("would like to move", "should I
  switch?", "when I lived in Leeds") changes nothing, nor does a one-day exception to a standing fact
  ("the train was cancelled so I drove in today"), nor a text about another person ("My cousin moved
  to Lima"); a weak cue counts only when the newer text opens on the older's subject and does not
  name "a new" one of the older's things.
- :class:`HeadJudge`: a trained head (``memnets.nn.heads.SupersessionHead``, exported in the pack)
  over the encoder's embeddings of the pair and the lexical features of :func:`pair_features`; a
  pair with no sign of change in its features scores 0.
- :class:`EitherJudge`: a pack's judge, the head and the rule judge together (either one suffices).

Both are plain text-in, score-out objects, so this module imports no torch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence, Set
from typing import Any

from memnets.temporal import implicit
from memnets.temporal.lexicon import (
    CLAUSE,
    PLACE_SLOTS,
    RELATIONS,
    SLOT_OF,
    STOPWORDS,
    WORD,
    WRITTEN_WORD,
    capitalised,
    place,
    slots,
    stem,
    words,
)

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
    "took over": 0.9, "passed away": 1.0, "died": 1.0, "got an": 0.4, "finally": 0.45, "took up": 0.8,
    "pushed": 0.9, "since": 0.4, "starting": 0.7, "alone": 0.5, "hasn't": 0.7, "seeing": 0.6,
    "ditched": 1.0, "dumped": 1.0, "traded": 0.9, "swapped": 1.0, "went back to": 1.0, "back to": 0.7,
    "stepped back": 1.0, "stepped down": 1.0, "as of": 0.8, "renamed": 1.0, "ported": 0.9, "lapse": 0.9,
    "remortgaged": 1.0, "renewed": 0.4, "got a raise": 1.0, "bumped": 0.9, "gave birth": 1.0,
    "stolen": 0.9, "found a": 0.6, "took over from": 1.0, "no more": 1.0, "dyed": 0.8,
    "signed": 0.6, "is led by": 1.0, "defended": 0.5, "not until": 0.8, "until": 0.45,
    "from here on": 1.0, "given up": 1.0, "giving up": 1.0, "not any more": 1.0, "gave away": 1.0, "got rid of": 1.0,
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
# Words that make the newer text an anecdote of another time, or an exception, not the fact as it stands
# ("when I lived in Leeds ...", "mum visited my brother in Galway", "went to bed at 3, a one-off").
ASIDE_CUES = ("when i", "when we", "back when", "as a kid", "visited", "visiting", "one-off", "for once")
# Words that make the newer text a wish, a plan or a maybe, which leaves the older fact standing
# ("I would like to move to Madrid someday" after "I live in Austin").
UNREAL_CUES = ("would like", "might", "maybe", "someday", "one day", "thinking of", "thinking about",
               "considering", "planning to", "hoping to", "wants to", "want to", "dreams of", "wish", "would love",
               "if", "whether", "should i", "i'd", "going to try", "try out", "trying out", "should")  # fmt: skip
NEGATIONS = ("not", "no", "never", "n't", "don't", "doesn't", "didn't", "isn't", "aren't", "won't", "can't")

_DATE_NAME = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December|Monday|Tuesday"
    r"|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b"
)  # capitalised: "may" the verb is no month
# number (a phone number's groups of 3+ digits as one), suffix, next word
_NUMBERED = re.compile(r"(\d+(?:[:.,]\d+)*(?: \d{3,})*)([a-z]*)(?:\s+(?:a |an |per )?([a-z]+))?")
NUMBER_WORDS = {
    word: str(n) for n, word in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)
}
_NUMBER_WORD = re.compile(rf"\b({'|'.join(NUMBER_WORDS)})\b(?=\s+([a-z]+))")
CLOCK_WORDS = {"midnight": "0:00", "noon": "12:00", "midday": "12:00"}
ORDINAL = ("th", "st", "nd", "rd")
LONG_NUMBER = 4  # digits of a number that names a thing (a phone number's group, an account), not a count
UNITLESS_NOT = ("ordinal", "date")  # kinds a number with no unit is not: "0412 555 019" -> "until Monday"
NOT_UNITS = frozenset(
    "most every each till until sharp today tonight tomorrow since o'clock ish".split()
)  # "at 10 most nights"
FEATURE_NAMES = ("change_cue", "still_cue", "negation_flip", "value_change", "word_overlap", "same_slot", "rule_score")
# Raised whenever pair_features computes a feature differently (2: implicit changes, implicit.py; 3: brands,
# names by their place's class, identifiers said dead, the club slot and its guards): a head trained on
# another version's features is not used (memnets.pack.Pack.supersession_judge).
PAIR_FEATURES_VERSION = 3


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
    found = WRITTEN_WORD.findall(text)[1:]
    return {word.lower().removesuffix("'s") for word in found if word[0].isupper() and word != "I"}


def numbers(text: str) -> dict[str, str]:
    """The numbers of ``text`` with their kind: "time" (``10:30``, ``7 pm``, "midnight"), "ordinal" ("12th"),
    a suffix or the stem of the unit word after it ("50 mg" -> "mg", "45 a month" -> "month", "four coffees"
    -> "coffe"), else "" (any kind but an ordinal: "under-12s", "is 3"); and the months and weekdays it
    names, of kind "date" ("in June", "on Tuesdays" -> "tuesday")."""
    lowered = _NUMBER_WORD.sub(  # "four coffees" as "4 coffees"; not "one of them"
        lambda match: match.group(1) if match.group(2) in STOPWORDS else NUMBER_WORDS[match.group(1)], text.lower()
    )
    lowered = re.sub(r"\b(midnight|noon|midday)\b", lambda match: CLOCK_WORDS[match.group(1)], lowered)
    found = {}
    for match in _NUMBERED.finditer(lowered):
        number, suffix, unit = match.groups()
        kind = (suffix if suffix != "s" else "") or (stem(unit) if unit and unit not in STOPWORDS | NOT_UNITS else "")
        found[number] = "time" if ":" in number or kind in ("am", "pm") else "ordinal" if kind in ORDINAL else kind
    return found | {day.lower(): "date" for day in _DATE_NAME.findall(text)}


def dated(text: str) -> bool:
    """``text`` names a time, a date or a day of the month: an appointment, not a standing fact."""
    return any(kind in ("time", "date", "ordinal") for kind in numbers(text).values())


def numbers_changed(older: str, newer: str) -> bool:
    """Both texts state numbers, times or dates, the newer's all other ones, of a kind the older's has
    ("at 10:30" -> "at 11:30", "50 mg" -> "100 mg", "in June" -> "in September"; not "45 a month" -> "20 GB",
    nor a number with no unit -> "until Monday")."""
    old, new = numbers(older), numbers(newer)
    return bool(old and new and not new.keys() & old.keys()) and any(
        a == b or (not a and b not in UNITLESS_NOT) or (not b and a not in UNITLESS_NOT)
        for a in old.values()
        for b in new.values()
    )


# "left Aldi for Lidl", "traded my Fiat for a Skoda": the name after "for" takes the left one's place
LEFT_FOR = re.compile(
    r"\b(?:left|leaving|traded|trading|swapped|swapping|ditched|ditching|dropped|dropping|quit|quitting)\s+"
    r"(?:(?:the|my|our|his|her|their)\s+)?([A-Z][\w'-]*)(?:\s+[A-Z][\w'-]*)*\s+for\s+(?:(?:the|a|an)\s+)?([A-Z][\w'-]*)"
)

# a stay of a while ("left Paris for Rome for the weekend"): a trip, not a new place
A_WHILE = re.compile(
    r"\bfor (?:the|a|an|a few|a couple of|\w+) (?:weekend|weeks?|days?|nights?|months?|holidays?|trip|bit)\b", re.I
)


def named_after(text: str, skip: Set[str] = frozenset()) -> set[tuple[str, str]]:
    """(the place, the name) for each name of ``text`` (:func:`names`) with a word before it in its clause: the
    place is the word before, an article skipped (("with", "admiral") for "with Admiral", ("for", "bears") for
    "for the Bears"), and the class of the words before where they have one
    (:func:`~memnets.temporal.lexicon.place`: "report to Kwame" and "manager is Sandra" are both ("boss", ...)). In a clause opening on a name of ``skip`` (stems),
    a place of a class is left out: "Sandra reports to Priya" names Sandra's own boss ("Carmen handed over to
    Felix" keeps ("to", "felix"))."""
    out = set()
    for clause in CLAUSE.split(text):
        found = WRITTEN_WORD.findall(clause)
        if not found:
            continue
        theirs = stem(found[0].lower().removesuffix("'s")) in skip
        lowered = [word.lower() for word in found]
        for i in range(1, len(found)):
            word, before = found[i], i - 1
            if not word[0].isupper() or word == "I":
                continue
            while before >= 0 and lowered[before] in ARTICLES:
                before -= 1
            if before >= 0:
                where, name = place(lowered[max(0, before - 1) : before + 1]), lowered[i].removesuffix("'s")
                if not (theirs and where in PLACE_SLOTS):
                    out |= {(where, name), (lowered[before], name)}
    return out


def past_names(text: str) -> set[str]:
    """The stems of the names ``text`` marks as past ("ex-wife Marta", "her ex Tom", "former boss Ann"): no
    new value."""
    found = WRITTEN_WORD.findall(text)
    marked = [i for i, word in enumerate(found) if word.lower().split("-")[0] in implicit.PAST_MARKS]
    return {stem(found[j].lower()) for i in marked for j in range(i, min(i + 3, len(found))) if found[j][0].isupper()}


def value_change(older: str, newer: str) -> bool:
    """The newer text states another value than the older: :func:`numbers_changed`; or it names something
    new while a name of the older is gone from it ("carrier is Vodafone" -> "ported his number to Three";
    words compared by their stems); or it names something new in the older name's place, after the same
    word or a word of the same place (:func:`named_after`), the old name kept only as an aside ("insurance is
    with Admiral" -> "insurance renewed with Aviva, Admiral was dearer"), or left for it ("left Aldi for
    Lidl", :data:`LEFT_FOR`)."""
    if numbers_changed(older, newer):
        return True
    old_words, new_words = {stem(word) for word in words(older)}, {stem(word) for word in words(newer)}
    old_names = {stem(name) for name in names(older)}
    gone = old_names - new_words
    added = {stem(name) for name in names(newer)} - old_words - past_names(newer)
    old_places = {before for before, _ in named_after(older)}
    in_place = {name for before, name in named_after(newer, old_names) if before in old_places and stem(name) in added}
    left_for = not A_WHILE.search(newer) and any(
        stem(left.lower()) in old_names and stem(taken.lower()) in added for left, taken in LEFT_FOR.findall(newer)
    )
    return bool(added and (gone or in_place or left_for))


def restated(older_words: set[str], newer_words: set[str]) -> bool:
    """Every content word of the older text (:func:`subject_words`) is in the newer one: it keeps the old
    fact and adds a detail ("kids walk to school" -> "kids now walk to school with the twins"); the
    caller rules out a newer text that negates the older or changes a value."""
    return bool(older_words) and older_words <= newer_words


PERSONS = {"i": "i", "i'm": "i", "i've": "i", "i'd": "i", "i'll": "i", "me": "i", "my": "i", "we": "we",
           "we're": "we", "we've": "we", "us": "we", "our": "we"}  # fmt: skip
ARTICLES = frozenset({"the", "a", "an", "his", "her", "their", "your", "its", "this", "that"})


def opener(text: str) -> set[str]:
    """Who or what ``text`` is about, from its first words (stems): the speaker for "I ..." ({"i"}) and
    "My flight ..." ({"i", "fligh"}), a name and its thing for "Ulla's team ..." ({"ulla", "team"}),
    the noun after an article for "The flight ..." ({"fligh"}), else the first word. Another person
    (:data:`RELATIONS`) after a possessive is that person alone: "My cousin ..." -> {"cousi"}."""
    found = WORD.findall(text.lower())
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
    Denver" ("Aunt Bea moved the reunion to May" may end "The reunion is in July"). Not when that person
    is a value of the older's slot: "my girlfriend Anouk ..." after "I'm single" is the speaker's news."""
    found, about = WORD.findall(newer.lower())[:1], opener(newer)
    owned = bool(found) and (found[0] in ("my", "our") or found[0].endswith("'s"))
    person = about & {stem(word) for word in RELATIONS}
    own_slot = {SLOT_OF.get(word) for word in person} & slots(older)
    return owned and bool(person) and not own_slot and not opener(older) & about


def another_of(older_words: set[str], newer: str) -> bool:
    """The newer text names "a new X" where X is a thing of the older one: another of the same thing
    ("Sam plays chess" -> "Sam started a new chess club"), which leaves the older fact
    standing (a replaced value, "Ann's new employer is Globex", is :func:`value_change`'s to see)."""
    found = words(newer)
    return any(word == "new" and stem(next_) in older_words for word, next_ in zip(found, found[1:]))


def _has(phrase: str, padded: str) -> bool:
    return f" {phrase} " in padded


def change_cue(text: str, left_out: Set[str] = frozenset()) -> float:
    """The strongest change cue of ``text`` (0 when none), the cues of ``left_out`` not counted."""
    padded = " " + " ".join(words(text)) + " "
    return max((w for cue, w in CHANGE_CUES.items() if cue not in left_out and _has(cue, padded)), default=0.0)


def still_cue(text: str) -> bool:
    """``text`` leaves the older fact standing: it restates it (:data:`STILL_CUES`), tells of another time
    (:data:`ASIDE_CUES`, or ends on "once": "I woke up at noon once") or only wishes, plans, asks or guesses
    (:data:`UNREAL_CUES`)."""
    padded = " " + " ".join(words(text)) + " "
    once = words(text)[-1:] == ["once"]
    return once or any(_has(cue, padded) for cue in (*STILL_CUES, *ASIDE_CUES, *UNREAL_CUES))


def negated(text: str) -> bool:
    found = words(text)
    return any(word in NEGATIONS or word.endswith("n't") for word in found)


def negates(keys: set[str], text: str, reach: int = 3) -> bool:
    """A negation of ``text`` reaches a thing of the older (``keys``, content stems) within ``reach`` words:
    "doesn't need glasses", "no half marathon"; not "Tesco had no bread"."""
    found = words(text)
    return any(
        (word in NEGATIONS or word.endswith("n't")) and keys & {stem(w) for w in found[i + 1 : i + 1 + reach]}
        for i, word in enumerate(found)
    )


def pair_features(older: str, newer: str) -> list[float]:
    """The lexical features of a pair, in :data:`FEATURE_NAMES` order (the rule judge reads them,
    and the trained head takes them beside the embeddings)."""
    a, b = subject_words(older, newer)
    overlap = len(a & b) / max(1, min(len(a), len(b)))
    older_slots, older_opener, older_negated = slots(older), opener(older), negated(older)
    same_slot = 1.0 if older_slots & slots(newer) else 0.0
    clauses = implicit.own_clauses(newer, older_opener)
    own = [word for clause in clauses for word in clause]
    # an implicit change (implicit.py) is a sign of change and of the older's subject at once; its keys are the
    # things of the older, not whom it is about, and its long numbers ("that 0161 number is dead")
    keys = (a - older_opener) | {stem(word) for word in words(older) if word.isdigit() and len(word) >= LONG_NUMBER}
    ends = implicit.ended(keys, older_slots, own) or implicit.new_role(keys, older_slots, newer)
    marked = capitalised(newer) - implicit.others_brands(newer, older_opener)  # "Sam's Ford" is not the speaker's
    swapped = implicit.values_swapped(older, clauses, marked) and not implicit.episode(newer)
    cue = max(change_cue(newer, implicit.thingless(keys, own)), STRONG_CUE if ends else 0.0)
    still = still_cue(newer) or implicit.asks(a, newer)
    flip = 1.0 if older_negated != negated(newer) and (older_negated or negates(a, newer)) else 0.0
    # another name told of an outing or of one day, with no cue that is a change on its own (0.5, the rule
    # judge's threshold), is an occasion ("had to report to Kwame about the incident", "we're playing Leyton FC
    # on Saturday"), not a new value
    occasion = cue < 0.5 and (implicit.episode(newer) or implicit.on_a_day(older, newer))
    renamed = value_change(older, newer) and (numbers_changed(older, newer) or not occasion)
    values = 1.0 if swapped or renamed else 0.0
    # one slot, or words in common (a changed number or time of a thing both name is the same subject)
    subject = max(
        min(1.0, 2 * overlap), same_slot, 1.0 if ends or swapped else 0.0,
        1.0 if overlap and numbers_changed(older, newer) else 0.0,
    )  # fmt: skip
    kept = restated(a, b) and not flip and not values and cue < STRONG_CUE
    # a weak cue speaks of the newer text's own subject: none when that is another one than the older's
    # ("Eli's daughter goes to Oak Hill" -> "Oak Hill now has a gym") or it is another of the same thing
    about = opener(newer)
    its_thing = bool(about & content_words(older)) and not about & older_opener
    weak_elsewhere = cue < STRONG_CUE and (its_thing or another_of(a, newer))
    change = max(0.0 if weak_elsewhere else cue, 0.9 * flip, 0.8 * values)
    # a one-day exception, or one instance of a weekly habit, ends no standing fact (an appointment's
    # date or time may move on the day)
    exception = not ends and (implicit.one_day(newer) and not dated(older) or implicit.one_of_many(older, newer))
    score = 0.0 if still or kept or exception or about_another(older, newer) else subject * change
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
