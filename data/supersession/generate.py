"""Generate template pairs of changes of fact: data/supersession/templates.jsonl, a sample the judge trains on.

Each line is ``{"older": ..., "newer": ..., "label": 0|1, "kind": ..., "slot": ..., "split": ...}``:
label 1 when the newer text ends the older fact (kind ``change``), 0 for a restatement of it
(``restatement``), a text that only looks alike (same place, food, company or time, another
relation to it: ``lookalike``) and an unrelated fact of the same speaker (``unrelated``). Every slot
(where one lives, diet, job, a schedule, a partner, a provider, who one sees, a hobby, ...) has its
own fact templates with many paraphrases, filled from value lists; one in five values is held out for the ``val`` split, so
validation pairs mention places, firms and times that training never saw.

The change judge (memnets/nn/change_judge.py) trains on the hand-written pairs of written/ and on a
seeded sample of these (:data:`SAMPLE` pairs, all marked "train"): the written pairs say most changes with
no cue word, and the templates add the plain explicit ones ("I moved to Lyon") that the writers said less
often; with them the judge's validation AP held (0.961 against 0.963) and the plain changes it had missed
are caught (docs/memory.md). Its validation and test pairs are the written ones, never these.

    python data/supersession/generate.py            # writes data/supersession/templates.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

PEOPLE = ["I", "Maya", "Tom", "Priya", "Lukas", "Grace", "Omar", "Hana", "Diego", "Zoe"]
CITIES = ["Paris", "Berlin", "Lisbon", "Toronto", "Osaka", "Denver", "Madrid", "Oslo", "Austin", "Dublin",
          "Seoul", "Prague", "Boston", "Vienna", "Lima"]  # fmt: skip
FIRMS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Labs", "Wayne Corp", "Vandelay",
         "Soylent", "Cyberdyne"]  # fmt: skip
ROLES = ["nurse", "designer", "accountant", "teacher", "developer", "chef", "lawyer", "pilot"]
TIMES = ["9:15", "10:30", "11:45", "13:00", "14:20", "16:10", "18:30", "20:05"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
PETS = ["dog", "cat", "parrot", "rabbit", "hamster"]
CARS = ["Honda", "Toyota", "Volvo", "Tesla", "Ford", "Subaru"]
WHEN = ["", " last month", " in March", " two weeks ago", " recently", " last year", " this spring"]


def pick(rng: random.Random, values: list[str], avoid: str | None = None) -> str:
    return rng.choice([value for value in values if value != avoid])


def subject(person: str) -> dict[str, str]:
    """Words for ``person`` in templates: {S} the subject, {Pos} its possessive, {be} am/is, {has}
    have/has, {do} don't/doesn't, {v} the verb ending (live/lives)."""
    if person == "I":
        return {"s": "I", "S": "I", "Pos": "My", "be": "am", "has": "have", "do": "don't", "v": ""}
    return {"s": person, "S": person, "Pos": f"{person}'s", "be": "is", "has": "has", "do": "doesn't", "v": "s"}


# slot -> (values, older templates, change templates, restatement templates, look-alike templates);
# {a}: the older value, {b}: another value, {when}: an optional time
SLOTS = {
    "home": (
        CITIES,
        [
            "{S} live{v} in {a}",
            "{Pos} home is in {a}",
            "{S} {be} based in {a}",
            "{S} rent{v} a flat in {a}",
            "{S} {be} living in {a} these days",
        ],
        [
            "{S} moved to {b}{when}",
            "{S} relocated to {b}{when}",
            "{S} now live{v} in {b}",
            "{S} {do} live in {a} anymore, {s} moved to {b}",
            "{S} packed up and moved to {b}{when}",
            "{Pos} new home is in {b}",
            "{S} left {a} for {b}{when}",
            "{S} {be} living in {b} now",
        ],
        [
            "{S} still live{v} in {a}",
            "{Pos} home is still in {a}",
            "{S} {be} still based in {a}",
            "{S} live{v} in {a}",
            "{a} is home for {s}",
        ],
        [
            "{S} love{v} {a} in spring",
            "{S} visited {b}{when}",
            "{S} would like to move to {b} someday",
            "{S} flew to {b} for a conference",
            "{S} had dinner in {a} with friends",
            "{a} was rainy today",
            "{S} might visit {b} next year",
            "{Pos} cousin moved to {b}",
        ],
    ),
    "diet": (
        ["vegetarian", "vegan", "pescatarian"],
        ["{S} {be} {a}", "{S} {do} eat meat", "{S} follow{v} a {a} diet", "{S} went {a} years ago"],
        [
            "{S} started eating fish again",
            "{S} {be} no longer {a}",
            "{S} eat{v} meat again now",
            "{S} gave up being {a}{when}",
            "{S} switched to a {b} diet",
            "{S} {be} {b} now",
            "{S} stopped being {a}{when}",
            "{S} eat{v} chicken these days",
        ],
        ["{S} {be} still {a}", "{S} still {do} eat meat", "{S} {be} {a}, as always", "{S} {be} a strict {a}"],
        [
            "{S} cooked a {a} lasagna",
            "{S} love{v} {a} restaurants",
            "{Pos} friend eats meat",
            "{S} tried a new {a} recipe",
            "{S} read a book about {b} cooking",
            "{S} ordered fish for a guest",
        ],
    ),
    "work": (
        FIRMS,
        ["{S} work{v} at {a}", "{S} {be} employed by {a}", "{Pos} job is at {a}", "{S} {be} a developer at {a}"],
        [
            "{S} started a new job at {b}{when}",
            "{S} quit {a}",
            "{S} switched to {b}{when}",
            "{S} now work{v} at {b}",
            "{S} left {a} and joined {b}",
            "{S} {be} no longer at {a}",
            "{S} got hired by {b}{when}",
            "{Pos} new employer is {b}",
        ],
        ["{S} still work{v} at {a}", "{S} {be} still with {a}", "{S} work{v} at {a}, same as before"],
        [
            "{a} had a great quarter",
            "{S} met someone from {b} at a party",
            "{S} worked late at {a} yesterday",
            "{S} applied to {b} but nothing came of it",
            "{a} opened a new office",
            "{S} read about {b} in the news",
        ],
    ),
    "role": (
        ROLES,
        ["{S} work{v} as a {a}", "{S} {be} a {a}", "{Pos} job is being a {a}"],
        [
            "{S} became a {b}{when}",
            "{S} {be} a {b} now",
            "{S} {be} no longer a {a}, {s} retrained as a {b}",
            "{S} changed careers to {b}",
            "{S} quit being a {a}",
        ],
        ["{S} {be} still a {a}", "{S} still work{v} as a {a}"],
        ["{S} met a {b} at the gym", "{Pos} sister is a {b}", "{S} watched a film about a {b}"],
    ),
    "flight": (
        TIMES,
        ["{Pos} flight leaves at {a}", "The flight departs at {a}", "{Pos} plane takes off at {a}"],
        [
            "The flight moved to {b}",
            "{Pos} flight now leaves at {b}",
            "The flight was rescheduled to {b}",
            "The departure changed to {b}",
            "{Pos} flight got pushed back to {b}",
            "The airline moved the flight to {b}",
        ],
        ["{Pos} flight still leaves at {a}", "The flight departs at {a} as planned"],
        [
            "{S} booked a taxi for {b}",
            "The flight was smooth",
            "{S} land{v} at {b}",
            "{S} had lunch at {b}",
            "The flight had free snacks",
        ],
    ),
    "meeting": (
        DAYS,
        ["The team meeting is on {a}", "{Pos} dentist appointment is on {a}", "The review call is on {a}"],
        [
            "The meeting was moved to {b}",
            "The appointment got rescheduled to {b}",
            "The call is now on {b}",
            "They postponed the meeting to {b}",
            "The meeting changed to {b}",
        ],
        ["The meeting is still on {a}", "The appointment stays on {a}"],
        [
            "{S} went running on {b}",
            "{S} have another meeting on {b}",
            "The meeting on {a} went well",
            "{S} took {b} off",
        ],
    ),
    "partner": (
        ["Sam", "Alex", "Jordan", "Chris", "Robin"],
        ["{S} {be} dating {a}", "{Pos} partner is {a}", "{S} {be} engaged to {a}"],
        [
            "{S} broke up with {a}",
            "{S} {be} single now",
            "{S} and {a} split up{when}",
            "{S} {be} dating {b} now",
            "{S} {be} no longer with {a}",
        ],
        ["{S} {be} still with {a}", "{S} and {a} are still together"],
        ["{S} had coffee with {b}", "{a} likes hiking", "{S} went to {a}'s birthday party"],
    ),
    "pet": (
        PETS,
        ["{S} {has} a {a}", "{Pos} pet is a {a}"],
        [
            "{Pos} {a} passed away{when}",
            "{S} gave away the {a}",
            "{S} adopted a {b} instead",
            "{S} {do} have a {a} anymore",
        ],
        ["{S} still {has} the {a}", "{Pos} {a} is doing well"],
        ["{S} saw a cute {b} at the park", "{Pos} neighbour has a {b}", "{S} bought food for the {a}"],
    ),
    "car": (
        CARS,
        ["{S} drive{v} a {a}", "{Pos} car is a {a}"],
        [
            "{S} sold the {a} and bought a {b}",
            "{S} drive{v} a {b} now",
            "{S} replaced the {a} with a {b}",
            "{S} {do} drive anymore",
        ],
        ["{S} still drive{v} the {a}", "{Pos} car is still the {a}"],
        ["{S} rented a {b} on holiday", "The {a} needs new tyres", "{S} saw a {b} ad"],
    ),
    "smoking": (
        ["smoke"],
        ["{S} smoke{v}", "{S} {be} a smoker"],
        ["{S} quit smoking{when}", "{S} stopped smoking", "{S} {do} smoke anymore", "{S} {be} no longer a smoker"],
        ["{S} still smoke{v}", "{S} smoke{v} a pack a day"],
        ["{S} hate{v} the smell of smoke", "The bar was smoky"],
    ),
    "provider": (
        ["Comcast", "Verizon", "Netflix", "Hulu", "Revolut", "Monzo", "Allianz", "Geico", "Aldi", "Tesco"],
        ["{Pos} provider is {a}", "{S} {be} with {a}", "{S} use{v} {a}", "{S} pay{v} for {a}", "{S} bank{v} with {a}"],
        [
            "{S} cancelled {a} and signed up with {b}",
            "{S} ditched {a} for {b}{when}",
            "{S} went over to {b}",
            "{S} {be} with {b} these days",
            "{S} dropped {a}, {s} use{v} {b} instead",
            "{S} changed from {a} to {b}",
            "{S} finally left {a} for {b}",
            "{S} only use{v} {b} now",
        ],
        ["{S} {be} still with {a}", "{S} renewed with {a} for another year", "{S} stay{v} with {a}"],
        [
            "{S} called {a} about a bill",
            "{a} raised its prices",
            "{S} saw an ad for {b}",
            "{S} had a new problem with {a}",
            "{Pos} friend switched to {b}",
            "{a} now offers a student discount",
            "{S} updated the {a} app",
        ],
    ),
    "person": (
        ["Dr. Reyes", "Mr. Lund", "Ms. Ito", "Nadia", "Felix", "Bruno", "Carmen"],
        ["{Pos} doctor is {a}", "{Pos} manager is {a}", "{Pos} piano teacher is {a}", "{S} report{v} to {a}"],
        [
            "{S} see{v} {b} now, {a} retired",
            "{a} left, so {s} report{v} to {b}",
            "{Pos} new doctor is {b}",
            "{a} handed over to {b}{when}",
            "{S} found a new teacher, {b}",
            "{b} took over from {a}{when}",
            "{S} {be} with {b} since {a} moved away",
        ],
        ["{S} still see{v} {a}", "{a} is still {Pos} manager"],
        [
            "{a} was on holiday last week",
            "{a} gave {s} good advice",
            "{S} met {b} at a conference",
            "{a} started a new project",
            "{S} sent {a} a thank-you card",
        ],
    ),
    "schedule": (
        ["7 am", "8 am", "6:30", "noon", "5 pm", "9 pm"],
        ["{Pos} alarm is set for {a}", "{Pos} class starts at {a}", "{S} head{v} to bed at {a}", "Dinner is at {a}"],
        [
            "{S} bumped it to {b}",
            "{Pos} class starts at {b} as of next week",
            "{S} head{v} to bed at {b} these days",
            "Dinner got pushed to {b}",
            "{S} set the alarm to {b} instead",
            "It's {b} from now on",
        ],
        ["{Pos} alarm is still set for {a}", "{S} head{v} to bed at {a} as usual"],
        [
            "{S} slept through the alarm",
            "{S} was late for class",
            "{S} made pasta for dinner",
            "{S} woke up at {b} once",
        ],
    ),
    "hobby": (
        ["guitar", "violin", "chess", "tennis", "climbing", "pottery", "judo"],
        ["{S} play{v} {a}", "{S} practise{v} {a} every week", "{Pos} hobby is {a}", "{S} take{v} {a} lessons"],
        [
            "{S} traded {a} for {b}{when}",
            "{S} gave up {a} and took up {b}",
            "{S} {be} into {b} now",
            "{S} stopped {a} after an injury",
            "{S} swapped {a} for {b}",
            "No more {a} for {s}, it's {b} now",
        ],
        ["{S} still play{v} {a}", "{S} love{v} {a} as much as ever"],
        [
            "{S} started a new {a} course",
            "{S} bought new {a} gear",
            "{Pos} {a} coach is now on holiday",
            "{S} watched a {b} match",
            "{S} won a {a} tournament",
            "{S} now practise{v} {a} with a friend",
        ],
    ),
}
UNRELATED = ["{S} like{v} jazz", "{S} played tennis{when}", "{Pos} sister is a doctor", "{S} read a novel",
             "{S} baked bread", "{S} went hiking{when}", "{S} bought new shoes", "The weather was nice"]  # fmt: skip


def held_out(value: str) -> bool:
    """One in five values (a stable choice) belongs to the val split."""
    return sum(map(ord, value)) % 5 == 0


def fill(template: str, person: str, a: str, b: str, when: str) -> str:
    text = template.format(a=a, b=b, when=when, **subject(person))
    text = text.replace("I am ", "I'm ")
    return text[0].upper() + text[1:]


def pairs(rng: random.Random, per_slot: int) -> list[dict]:
    rows = []
    for slot, (values, facts, changes, restatements, lookalikes) in SLOTS.items():
        for _ in range(per_slot):
            person, a = rng.choice(PEOPLE), rng.choice(values)
            b = pick(rng, values, avoid=a) if len(values) > 1 else a
            split = "val" if held_out(a) or held_out(b) or held_out(person) else "train"
            older = fill(rng.choice(facts), person, a, b, "")

            for templates, kind, label, count in (
                (changes, "change", 1, 2),
                (restatements, "restatement", 0, 1),
                (lookalikes, "lookalike", 0, 1),
                (UNRELATED, "unrelated", 0, 1),
            ):
                for _ in range(count):
                    newer = fill(rng.choice(templates), person, a, b, rng.choice(WHEN))
                    row = {"older": older, "newer": newer, "label": label, "kind": kind, "slot": slot}
                    rows.append({**row, "split": split})
    return rows


SAMPLE = (700, 800)  # changes, non-changes: about as many as the written training pairs hold


def sample(rows: list[dict], changes: int, others: int, rng: random.Random) -> list[dict]:
    """``changes`` pairs of label 1 and ``others`` of label 0 of ``rows`` (shuffled by ``rng``), all of split train."""
    rows = list(rows)
    rng.shuffle(rows)
    chosen = [r for r in rows if r["label"] == 1][:changes] + [r for r in rows if r["label"] == 0][:others]
    return [r | {"split": "train"} for r in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).with_name("templates.jsonl")))
    parser.add_argument("--sample", type=int, nargs=2, default=SAMPLE, metavar=("CHANGES", "OTHERS"),
                        help="a seeded sample of this many changes and non-changes, all marked train")  # fmt: skip
    parser.add_argument("--per-slot", type=int, default=160, help="older facts per slot (5 pairs each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = pairs(random.Random(args.seed), args.per_slot)
    seen, unique = set(), []
    for row in rows:
        key = (row["older"], row["newer"])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    unique = sample(unique, *args.sample, random.Random(args.seed))
    with open(args.out, "w", encoding="utf-8") as handle:
        for row in unique:
            handle.write(json.dumps(row) + "\n")
    positives = sum(row["label"] for row in unique)
    print(f"{args.out}: {len(unique)} pairs ({positives} changes, {len(unique) - positives} non-changes)")


if __name__ == "__main__":
    main()
