"""Signs of a change of fact that carry no change word, for the rule judge (:mod:`memnets.temporal.supersession`).

"I work at Shopify" -> "Just finished my first month at Stripe" says no "moved", "changed" or "now":
the change is in what the newer text says of the older's thing or slot. Three families, each a sign of
change and of a shared subject at once:

- :func:`ended`: the newer text ends the older's own thing ("sold the Civic", "off metformin", "ex-wife
  Claudia", "LastPass is gone", "Sven is her ex", "the covers band split", "put Pickles down", "the yahoo
  address is dead") or its slot ("graduated" after a master's, "handed my notice in" after a job, "called
  it quits" after "dating");
- :func:`new_role`: "my new GP, Dr. Okonjo" after "My doctor is Dr. Ferreira": a new one of a role held
  one at a time (:data:`~memnets.temporal.lexicon.ROLES`), of the older's slot or thing;
- :func:`values_swapped`: another value of the older's slot in the older's own one's place ("bike" ->
  "tram", "single" -> "going out with", "blonde" -> "natural dark brown", a Pixel -> an iPhone: the brands
  of :data:`~memnets.temporal.lexicon.BRANDS`).

Each reads only the clauses the newer text says of the pair's own subject (:func:`own_clauses`): "my
husband had steak" is no value of the vegetarian speaker's. And :func:`asks` finds a newer text that asks
about the older's thing ("should I get the new iPhone or stick with Samsung?"), which changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Set

from memnets.temporal.lexicon import (
    BRAND_OF,
    BRANDS,
    CLAUSE,
    DAY_MARKS,
    ENDS_AFTER,
    ENDS_BEFORE,
    EPISODE_VERBS,
    ID_ENDS,
    ID_NOUNS,
    KIND_NOUNS,
    LIKING,
    LINKS,
    MEASURES,
    NOT_ENDING,
    NOT_OWNED_AFTER,
    NOT_STATED,
    OTHER_ONES,
    RECIPIENTS,
    RELATIONS,
    ROLE_STEMS,
    SLOT_ENDS,
    SLOT_OF,
    STANDING,
    THING_CUES,
    VALUE_COVERS,
    VALUE_OF,
    VALUE_PHRASES,
    WRITTEN_WORD,
    capitalised,
    stem,
    words,
)

POSSESSIVES = frozenset({"my", "our", "his", "her", "their", "your"})
PAST_MARKS = frozenset({"ex", "former", "previous", "old", "late"})  # "ex-wife Marta" is no new value
# verbs of NOT_STATED that make a brand one's own ("read on a Kindle", "bought a Kobo")
OWNING = frozenset({"bought", "read", "reading"})
PAST_CLAUSE = frozenset("was were used had".split())  # "energy drinks were wrecking his sleep"
VALUE_REACH = 3  # words before a value that may make it the topic or object of another verb
AFTER_WINDOW = 4  # words after an ending word that may name the thing it ends ("got rid of my HSBC account")
_AFTER_NEW = re.compile(r"\s*(?:[,:;.!?]|$)|\s+[A-Z]|\s+(?:is|was|has|and|who|called)\b")  # "new GP, Dr. ..."


def own_clauses(newer: str, about: Set[str]) -> list[list[str]]:
    """The words of ``newer`` said of the pair's own subject, clause by clause: of a clause that opens on "my
    husband", "her sister", "Leon's boss" (a possessive and one of :data:`~memnets.temporal.lexicon.RELATIONS`),
    only those two words ("my girlfriend Anouk and I ..." names the speaker's partner; "my husband had steak"
    is no meal of the speaker's), unless that person is whom the pair is about (``about``: the stems the older
    opens on)."""
    kept = []
    for clause in CLAUSE.split(newer):
        found = words(clause)
        owner = bool(found) and (found[0] in POSSESSIVES or clause.split()[0].lower().endswith("'s"))
        if owner and len(found) > 1 and found[1] in RELATIONS and stem(found[1]) not in about:
            found = found[:2]  # the person themself is said of the speaker ("my girlfriend ...")
        kept.append(found)
    return kept


def _phrase_at(phrase: str, found: list[str]) -> list[int]:
    """The indexes just after each occurrence of ``phrase`` (one or more words) in ``found``."""
    parts = phrase.split()
    return [i + len(parts) for i in range(len(found) - len(parts) + 1) if found[i : i + len(parts)] == parts]


def _keyed_before(keys: Set[str], found: list[str], start: int, noun: Set[str] = frozenset()) -> bool:
    """The word before index ``start`` of ``found`` (:data:`~memnets.temporal.lexicon.LINKS` skipped) is a key;
    with ``noun``, that word is one of ``noun`` and the word before it a key ("the yahoo address is dead")."""
    while start > 0 and found[start - 1] in LINKS:
        start -= 1
    if noun:
        if start < 2 or found[start - 1] not in noun:
            return False
        start -= 1
    return start > 0 and stem(found[start - 1]) in keys


def _keyed_after(keys: Set[str], found: list[str], end: int) -> bool:
    """One of the :data:`AFTER_WINDOW` words from index ``end`` of ``found`` is a key."""
    return any(stem(word) in keys for word in found[end : end + AFTER_WINDOW])


def unmasked(found: list[str]) -> list[str]:
    """``found`` with each idiom of :data:`~memnets.temporal.lexicon.NOT_ENDING` ("a day off work", "gone on
    holiday") as one word "_", which ends nothing."""
    text = " " + " ".join(found) + " "
    for idiom in NOT_ENDING:
        text = text.replace(f" {idiom} ", " _ ")
    return text.split()


def ended(keys: Set[str], older_slots: Set[str], found: list[str]) -> bool:
    """``found`` (the words of the newer's :func:`own_clauses`) ends a thing of the older (``keys``: its content stems) or one
    of its slots: an ending word of :data:`~memnets.temporal.lexicon.ENDS_BEFORE` with a key among the next
    words, one of ``ENDS_AFTER`` right after a key (:data:`~memnets.temporal.lexicon.LINKS` between: "LastPass
    is gone"), one of ``ID_ENDS`` after a key and one of ``ID_NOUNS`` ("the yahoo address is dead", "that 0161
    number is dead"), "put <key> down", or a phrase of ``SLOT_ENDS`` for a slot of the older; not in an idiom
    (:func:`unmasked`)."""
    found = unmasked(found)
    padded = " " + " ".join(found) + " "
    if any(f" {phrase} " in padded for slot in older_slots for phrase in SLOT_ENDS.get(slot, ())):
        return True
    for phrase in ENDS_BEFORE:
        if any(_keyed_after(keys, found, end) for end in _phrase_at(phrase, found)):
            return True
    for phrase in ENDS_AFTER:
        if any(_keyed_before(keys, found, end - len(phrase.split())) for end in _phrase_at(phrase, found)):
            return True
    for phrase in ID_ENDS:
        if any(_keyed_before(keys, found, end - len(phrase.split()), ID_NOUNS) for end in _phrase_at(phrase, found)):
            return True
    return any(
        "down" in found[end + 1 : end + 3] and _keyed_after(keys, found[: end + 2], end)
        for end in _phrase_at("put", found)
    )


def thingless(keys: Set[str], found: list[str]) -> set[str]:
    """The cues of :data:`~memnets.temporal.lexicon.THING_CUES` in ``found`` that end no thing of the older:
    neither right after a key ("the flight was cancelled") nor before one ("cancelled the Leith
    membership"): "the flat's boiler died" ends no flat."""
    found = unmasked(found)
    return {
        cue
        for cue in THING_CUES
        for end in _phrase_at(cue, found)
        if not _keyed_before(keys, found, end - len(cue.split())) and not _keyed_after(keys, found, end)
    }


def new_role(keys: Set[str], older_slots: Set[str], newer: str) -> bool:
    """``newer`` names "a new <role>" (:data:`~memnets.temporal.lexicon.ROLES`) of the older's thing or slot,
    the role word ending its phrase (a comma, a name, "is" after it): "my new GP, Dr. Okonjo", "the new
    landlord is a company"; not "a new phone case", nor "a new physio" after a doctor."""
    for match in re.finditer(r"\bnew\s+([A-Za-z]+)", newer, re.IGNORECASE):
        role = stem(match.group(1).lower())
        if role in ROLE_STEMS and (role in keys or SLOT_OF.get(role) in older_slots):
            if _AFTER_NEW.match(newer[match.end() :]):
                return True
    return False


def phrased(found: list[str]) -> list[str]:
    """``found`` with each phrase of :data:`~memnets.temporal.lexicon.VALUE_PHRASES` as the one word of its value
    ("going out with" -> "dating", "tied the knot" -> "married") and a quantity's "of" left out ("a lot of
    coffee" -> "a lot coffee", :data:`~memnets.temporal.lexicon.MEASURES`)."""
    text = " " + " ".join(found) + " "
    for phrase, value in VALUE_PHRASES.items():
        text = text.replace(f" {phrase} ", f" {value} ")
    for measure in MEASURES:
        text = text.replace(f" {measure} of ", f" {measure} ")
    return text.split()


def _gift(found: list[str], i: int) -> bool:
    """The value at index ``i`` of ``found`` is for others: "a Kindle for my dad", "coffee for everyone"."""
    after = found[i + 1 : i + 4]
    return after[:1] == ["for"] and bool(set(after[1:]) & (RELATIONS | RECIPIENTS))


def others_brands(newer: str, about: Set[str]) -> set[str]:
    """The words of ``newer`` (lower-case) owned by another: after "Sam's", "his", "her" or "their" (a word
    between at most), unless that owner is whom the pair is about (``about``: "Omar's laptop" for Omar)."""
    found = WRITTEN_WORD.findall(newer)
    owners = [
        i for i, word in enumerate(found)
        if word.lower() in ("his", "her", "their", "your")
        or word.lower().endswith("'s") and stem(word.lower().removesuffix("'s")) not in about
    ]  # fmt: skip
    return {found[j].lower().removesuffix("'s") for i in owners for j in range(i + 1, min(i + 3, len(found)))}


def _other_one(found: list[str]) -> bool:
    """``found`` names another thing of a kind than one's own: "work phone", "office laptops"
    (:data:`~memnets.temporal.lexicon.OTHER_ONES` before one of ``KIND_NOUNS``)."""
    return any(a in OTHER_ONES and b in KIND_NOUNS for a, b in zip(found, found[1:]))


def values(found: list[str], marked: Set[str] = frozenset()) -> dict[str, set[str]]:
    """slot -> the values of :data:`~memnets.temporal.lexicon.SLOT_VALUES` that ``found`` states of its
    subject, phrases read as their values (:func:`phrased`), and the brands of
    :data:`~memnets.temporal.lexicon.BRANDS` among ``marked`` (the words written with a capital), by kind:
    none marked as past ("ex-wife", "my old bike"), none that is the topic or object of another verb or of a
    taste (:data:`~memnets.temporal.lexicon.NOT_STATED` or :data:`~memnets.temporal.lexicon.LIKING` among the
    three words before: "a film about a designer", "met a teacher", "I love fish tacos"), no gift ("coffee for
    everyone"), no brand that names something else (:data:`~memnets.temporal.lexicon.NOT_OWNED_AFTER`: "iPhone
    users")."""
    out: dict[str, set[str]] = {}
    found = phrased(found)
    for i, word in enumerate(found):
        before = set(found[max(0, i - VALUE_REACH) : i])
        if found[i - 1 : i] and found[i - 1] in PAST_MARKS or LIKING & before:
            continue
        if _gift(found, i) or (word in BRAND_OF and set(found[i + 1 : i + 2]) & NOT_OWNED_AFTER):
            continue
        if stem(word) in VALUE_OF and not NOT_STATED & before:
            slot, value = VALUE_OF[stem(word)]
        elif word in marked and word in BRAND_OF and not (NOT_STATED - OWNING) & before:
            slot, value = BRAND_OF[word]
        else:
            continue
        out.setdefault(slot, set()).add(value)
    return out


def values_swapped(older: str, clauses: list[list[str]], marked: Set[str] = frozenset()) -> bool:
    """``clauses`` (the newer's :func:`own_clauses`; ``marked``: its words written with a capital) state another
    value of a slot of the older, and none of the older's values of that slot: "I take the 38 bus" -> "I cycle
    to work these days". The older's value may stay in a clause of its own, with no new value, where it is a
    brand (:data:`~memnets.temporal.lexicon.BRANDS`: "got an iPhone, the Pixel is in a drawer") or told in the
    past, not as a habit ("on green tea, energy drinks were wrecking his sleep"; not "coffee was always my
    morning thing": :data:`~memnets.temporal.lexicon.STANDING`). A brand in a clause about another thing of its
    kind ("my work phone is an iPhone") is none, and a value that says less than the older's is no new one
    (:data:`~memnets.temporal.lexicon.VALUE_COVERS`: "been together" after "married")."""
    old = values(words(older), capitalised(older))
    besides = _other_one(words(older))
    each = [
        {slot: found for slot, found in values(clause, marked).items() if besides or not (slot in BRANDS and _other_one(clause))}
        for clause in clauses
    ]  # fmt: skip
    for slot in old:
        added = {value for found in each for value in found.get(slot, ())} - old[slot]
        added = {value for value in added if not set(VALUE_COVERS.get(value, ())) & old[slot]}
        kept = [(clause, found[slot]) for clause, found in zip(clauses, each) if found.get(slot, set()) & old[slot]]
        if added and all(
            not found & added and (slot in BRANDS or PAST_CLAUSE & set(clause) and not STANDING.search(" ".join(clause)))
            for clause, found in kept
        ):  # fmt: skip
            return True
    return False


def asks(keys: Set[str], newer: str) -> bool:
    """A sentence of ``newer`` that ends in "?" names a thing of the older: a question, not a new fact."""
    return any(
        sentence.strip().endswith("?") and any(stem(word) in keys for word in words(sentence))
        for sentence in re.split(r"(?<=[.?!])\s+", newer)
    )


def one_day(newer: str) -> bool:
    """``newer`` is told of one day (:data:`~memnets.temporal.lexicon.DAY_MARKS`: "the train was cancelled so
    I drove in today") and says nothing of a standing fact (``STANDING``: "these days", "since", "every", ...)."""
    padded = " " + " ".join(words(newer)) + " "
    return any(f" {mark} " in padded for mark in DAY_MARKS) and not STANDING.search(newer.lower())


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def one_of_many(older: str, newer: str) -> bool:
    """The older names a weekday as a habit ("on Mondays", "every Monday") and the newer that weekday once
    ("Monday's yoga class was cancelled"), with no word of a standing fact: one instance, not the habit."""
    old, new = words(older), words(newer)
    habit = {
        day for day in WEEKDAYS if f"{day}s" in old or any(a == "every" and b == day for a, b in zip(old, old[1:]))
    }
    once = {day for day in habit if day in new and not any(a == "every" and b == day for a, b in zip(new, new[1:]))}
    return bool(once) and not STANDING.search(newer.lower())


def on_a_day(older: str, newer: str) -> bool:
    """``newer`` names one weekday ("on Saturday", not "on Saturdays") and the older none: an occasion."""
    old, new = set(words(older)), set(words(newer))
    return not any(day in old or f"{day}s" in old for day in WEEKDAYS) and any(day in new for day in WEEKDAYS)


def episode(newer: str) -> bool:
    """``newer`` tells a one-off: of one day (:func:`one_day`) or opening on a verb of an outing
    (:data:`~memnets.temporal.lexicon.EPISODE_VERBS`: "went swimming with the kids on Sunday", "had a beer")
    with no word of a standing fact."""
    opens = bool(EPISODE_VERBS & set(words(newer)[:3])) and not STANDING.search(newer.lower())
    return one_day(newer) or opens
