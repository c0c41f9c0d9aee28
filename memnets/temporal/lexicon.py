"""The word lists of the rule-based supersession judge (:mod:`memnets.temporal.supersession`), and the
tokenising they share: what a slot of a person is, which words are its values, which nouns name a role
one holds one of at a time, which words end a thing.

Words are compared by :func:`stem` (a plural "s" off, the first five letters), so one entry meets its
other forms ("commutes" and "commute", "therapist" and "therapists").
"""

from __future__ import annotations

import re

# Slots: words that name the same attribute of a person; two texts touching one slot share a subject.
SLOTS: dict[str, tuple[str, ...]] = {
    "home": ("live", "lives", "living", "lived", "moved", "move", "moving", "relocated", "home", "apartment",
             "flat", "house", "city", "town", "neighborhood", "neighbourhood", "address", "rent", "renting",
             "rented"),
    "diet": ("eat", "eats", "eating", "ate", "vegetarian", "vegan", "meat", "fish", "diet", "pescatarian",
             "gluten", "dairy", "food", "keto", "chicken", "steak", "eggs", "cheese"),
    "work": ("work", "works", "working", "job", "employer", "employed", "company", "hired", "position", "role",
             "office", "career", "boss", "team", "engineer", "teacher", "nurse", "manager", "reports", "shift",
             "shifts", "lates", "earlies", "freelance", "freelancer", "contract", "teach", "teaches", "teaching",
             "accountant", "carpenter", "designer", "analyst", "developer", "lawyer", "chef", "notice"),
    "relationship": ("married", "wife", "husband", "boyfriend", "girlfriend", "partner", "dating", "divorced",
                     "engaged", "single", "fiance", "fiancee", "ex"),
    "drink": ("drink", "drinks", "drinking", "coffee", "tea", "alcohol", "beer", "wine", "sober", "lager"),
    "transport": ("car", "drive", "drives", "driving", "bike", "cycle", "cycling", "commute", "scooter", "train",
                  "bus", "tube", "subway", "metro", "tram", "ride", "rides", "biking"),
    "contact": ("phone", "number", "email", "address", "handle", "mobile", "carrier", "sim", "username",
                "landline"),
    "health": ("smoke", "smoking", "smoker", "cigarettes", "medication", "pills", "allergic", "allergy", "dose",
               "prescription"),
    "care": ("doctor", "gp", "physician", "therapist", "therapy", "counsellor", "counselor", "counselling",
             "psychiatrist"),
    "exercise": ("gym", "workout", "swim", "swims", "swimming", "laps", "yoga", "pilates", "climbing", "boulder",
                 "running", "runs", "jogging", "fitness", "crossfit", "boxing"),
    "pet": ("dog", "cat", "pet", "puppy", "kitten", "rabbit", "hamster", "parrot", "bird", "horse"),
    "study": ("study", "studying", "school", "university", "college", "degree", "course", "major", "student",
              "phd", "thesis", "postdoc", "lessons", "class", "master", "masters", "dissertation", "graduated",
              "nursery", "reception"),
    "sleep": ("sleep", "sleeps", "sleeping", "slept", "wake", "wakes", "woke", "waking", "bed", "bedtime", "nap",
              "lights"),
    "hair": ("hair", "blonde", "brunette", "dyed", "haircut"),
    "money": ("salary", "pay", "paid", "wage", "raise", "earn", "earns", "income", "budget", "mortgage",
              "remortgaged", "loan", "savings", "pension", "debt"),
    "pregnancy": ("pregnant", "pregnancy", "baby", "birth", "born", "expecting"),
    "club": ("club", "fc", "support", "supports", "supporter", "supporters", "supporting", "fan", "fans", "squad",
             "league"),
}  # fmt: skip
# The values of a slot, each with its other forms after "/": one replaces another ("bike" -> "tram", "single" ->
# "girlfriend"); a newer text with another value of the older's slot, the older's own gone from it, states a
# new one (:func:`memnets.temporal.implicit.values_swapped`).
SLOT_VALUES: dict[str, tuple[str, ...]] = {
    "diet": ("vegetarian", "vegan", "meat", "fish", "pescatarian", "keto", "steak", "eggs", "chicken"),
    "drink": ("coffee", "tea", "beer", "wine", "lager", "sober/teetotal", "decaf", "energydrink"),
    "transport": ("car/drive/drives/driving", "bike/biking/bikes", "cycle/cycling/cycles", "bus", "train", "tram", "tube", "subway",
                  "metro", "scooter", "walk/walks/walking", "taxi", "coach", "ferry"),
    "relationship": ("single", "married/husband/wife/spouse", "engaged/fiance/fiancee", "divorced",
                     "dating/boyfriend/girlfriend", "partnered/partner"),
    "work": ("accountant", "carpenter", "designer", "analyst", "developer", "lawyer", "chef", "engineer",
             "teacher", "nurse", "freelance/freelancer", "retired", "unemployed"),
    "exercise": ("gym", "swim/swims/swimming", "yoga", "pilates", "climbing/climbs/boulder/bouldering",
                 "running/runs/jogging", "boxing", "crossfit"),
    "study": ("nursery", "reception", "school", "college", "university", "phd", "postdoc"),
    "hair": ("blonde", "brown", "dark", "black", "red", "grey", "ginger", "short", "long", "natural", "bald"),
}  # fmt: skip
# Makes and models of things one owns one of at a time, by kind, each with its other names after "/": a value
# of the kind's slot like those of SLOT_VALUES, but counted only where written with a capital ("Windows", not
# "the window"; "a Switch", not "switch"), and a brand the newer text keeps only as an aside has still been
# replaced ("got an iPhone, the Pixel is in a drawer").
BRANDS: dict[str, tuple[str, ...]] = {
    "phone": ("iphone", "pixel", "samsung/galaxy", "android", "nokia", "motorola", "oneplus", "xiaomi", "huawei",
              "blackberry", "fairphone"),
    "computer": ("macbook/mac/imac/macos", "windows", "linux", "ubuntu", "fedora", "chromebook/chromeos",
                 "thinkpad"),
    "tablet": ("ipad",),
    "ereader": ("kindle", "kobo", "nook"),
    "console": ("playstation/ps5/ps4", "xbox", "switch/nintendo"),
    "car": ("fiat", "skoda", "toyota/yaris/corolla/prius", "honda/civic", "ford/fiesta", "volkswagen/vw/golf/polo",
            "bmw", "audi", "tesla", "nissan", "kia", "hyundai", "vauxhall/corsa/astra", "renault/clio", "peugeot",
            "volvo", "mazda", "citroen"),
}  # fmt: skip
# A value that says less than others of its slot, and is no new value where the older states one of them: "my
# partner" or "been together" after "I'm married" (but after "I'm single" they are).
VALUE_COVERS: dict[str, tuple[str, ...]] = {"partnered": ("married", "engaged", "dating")}
# Words after a brand that make it the name of something else than one's own thing ("iPhone users", "Switch games").
NOT_OWNED_AFTER = frozenset("users owners fans people games app apps store update updates".split())
# A thing of the kind besides one's own ("my work phone is an iPhone", "the office laptops"), unless the older
# says the same ("My work phone is a Pixel").
OTHER_ONES = frozenset("work office spare second backup company family kids loan courtesy hire rental".split())
KIND_NOUNS = frozenset("phone phones mobile laptop laptops computer pc tablet car console".split())
# Quantities before "of" that leave the value after it stated ("a lot of coffee", "a glass of wine").
MEASURES = frozenset("lot lots cup cups glass glasses pint pints bottle bottles mug mugs can cans shot shots".split())
# Phrases that state a value of a slot in other words, read as that value ("going out with" -> "dating").
VALUE_PHRASES: dict[str, str] = {
    "going out with": "dating", "been together": "partnered", "seeing someone": "dating", "seeing somebody": "dating",
    "tied the knot": "married", "got hitched": "married", "not with anyone": "single", "not seeing anyone": "single",
    "off the booze": "sober", "off the drink": "sober", "off alcohol": "sober", "dry since": "sober",
    "been dry": "sober", "energy drink": "energydrink", "energy drinks": "energydrink",
}  # fmt: skip
# Roles one holds one of at a time: "my new GP" after "My doctor is Dr. Ferreira" names the one that
# replaced the old ("a new brush", "a new friend" name another beside the old).
ROLES = frozenset(
    "doctor gp dentist therapist counsellor counselor manager boss landlord landlady boyfriend girlfriend partner "
    "husband wife job employer address number email phone car flat house home school nursery vet barber "
    "hairdresser coach teacher tutor lead carrier provider bank gym flatmate roommate nanny childminder".split()
)
# Words that end the thing they stand before ("sold the Civic", "off metformin", "ex-wife Claudia", "got rid
# of my HSBC account") or after ("LastPass is gone", "the Oxford office shut", "the covers band split",
# "Sven is her ex"), and phrases that end a slot ("graduated" a study, "handed my notice in" a job).
ENDS_BEFORE = ("sold", "selling", "off", "ex", "former", "quit", "got rid of", "out of", "dumped", "ditched")
ENDS_AFTER = ("gone", "shut", "closed", "split", "passed", "died", "folded", "her ex", "his ex", "my ex", "their ex")
NOT_ENDING = ("day off", "days off", "time off", "week off", "off to", "off work", "off sick", "show off", "drop off",
              "dropped off", "was out of", "were out of", "ran out of", "run out of", "out of stock", "gone on",
              "gone to", "gone out", "gone home", "gone for", "gone into", "gone back", "gone up", "gone down",
              "gone off", "passed his", "passed her", "passed the", "passed a", "passed an", "passed my",
              "passed their", "passed it", "split on", "split the", "split a", "split it", "split over")  # fmt: skip
# Words that end an identifier one is reached by, after it and the noun it is ("the yahoo address is dead", "the
# shadowfox account got banned"): a phone "is dead" when its battery is, an address "is dead" when it is no more.
ID_ENDS = ("dead", "bounces", "bouncing", "banned", "deactivated", "disconnected", "deleted", "closed", "suspended")
ID_NOUNS = frozenset("account address number inbox email handle username profile".split())
# Change cues that end a thing (memnets.temporal.supersession.CHANGE_CUES): they count only of a thing of the
# older ("the flight was cancelled"), not of another ("the flat's boiler died").
THING_CUES = ("died", "closed", "cancelled", "canceled", "shut", "passed away", "folded", "ended")
# Words between a thing and the ending word after it ("LastPass is gone", "Biscuit has just died").
LINKS = frozenset("is was has had have been just got finally sadly".split())
# Words that make a value the topic or object of another verb, not a value of the speaker's own slot.
NOT_STATED = frozenset(
    "about for of with than like met meet meeting watched watching read reading saw ordered cooked cooking "
    "bought made film book show documentary friend friends want wants wanted rented renting borrowed borrowing "
    "hired hiring test brought rental hire loaner courtesy".split()
)
RECIPIENTS = frozenset("everyone everybody us them guests team".split())  # "coffee for everyone": no value of one's own
# Verbs of liking: "I love fish tacos" after "I'm vegetarian" states a taste, not another value of the slot.
LIKING = frozenset("love loves like likes enjoy enjoys hate hates miss misses fancy prefer".split())
SLOT_ENDS: dict[str, tuple[str, ...]] = {
    "study": ("graduated", "dropped out"),
    "work": ("handed my notice", "handed in my notice", "resigned", "laid off", "made redundant", "got fired",
             "got sacked"),
    "relationship": ("divorced", "split up", "broke up", "separated", "called it quits", "calling it quits",
                     "parted ways", "ended things"),
    "pet": ("put down", "passed away"),
    "health": ("quit smoking", "stopped smoking"),
}  # fmt: skip
# A one-off told of a day ("had a beer with the team last night"), or opened by a verb of an outing ("went
# swimming with the kids"), is an episode: it ends no standing fact, unless it says the new one stands
# (a word of STANDING: "these days", "since", "every", "from the 1st", "this year", ...).
DAY_MARKS = ("today", "yesterday", "last night", "this morning", "this afternoon", "this evening", "tonight")
EPISODE_VERBS = frozenset("went had took tried cooked made ate drank saw did visited grabbed".split())
STANDING = re.compile(
    r"\b(these days|nowadays|since|now|anymore|any more|every|most|usually|always|starting|as of|full time"
    r"|from (?:the \d|next|now|here|\w+day)|this (?:year|term|season|month|quarter|week))\b"
)
STOPWORDS = frozenset(
    "a an the i i'm im me my mine we our you your he she his her they their it its is am are was were be been "
    "being to of in on at for from with by and or but so that this these those there here as about into than "
    "then do does did have has had will would can could should just really very also too some any all "
    "what when where who which how up out over again only own same s t".split()
)
# People one speaks of: "my cousin ..." and "Ann's sister ..." are about them, not about the speaker or Ann.
RELATIONS = frozenset(
    "mum mom mother dad father parent parents sister brother sibling cousin aunt uncle niece nephew grandma "
    "grandpa grandmother grandfather son daughter kid kids child children wife husband partner boyfriend "
    "girlfriend friend friends neighbour neighbor colleague coworker boss flatmate roommate".split()
)
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
WRITTEN_WORD = re.compile(r"[A-Za-z][\w'-]*")  # a word as written, capitals and "'s" kept ("Leon's", "iPhone")
CLAUSE = re.compile(r"[,;:!?()]|\.(?:\s|$)|\s(?:and|but|so|while|because)\s")  # where a clause ends
# The place of a name: the words before it that give it a role, by class, so that a name in the older's role
# replaces the older's name however each text words the role ("manager is Sandra" -> "report to Kwame",
# "supports Celtic" -> "plays for Hibs", "have a Nespresso" -> "got a Sage").
PLACE_PHRASES: dict[str, tuple[str, ...]] = {
    "boss": ("report to", "reports to", "reporting to", "answer to", "answers to", "answering to", "work under",
             "works under", "working under", "supervised by", "managed by", "led by", "manager is", "boss is",
             "supervisor is", "lead is", "leader is"),
    "partner": ("married to", "engaged to", "out with", "partner is", "boyfriend is", "girlfriend is",
                "husband is", "wife is"),
    "club": ("plays for", "play for", "playing for", "played for", "signed for", "signs for", "out for"),
}  # fmt: skip
PLACE_WORDS: dict[str, tuple[str, ...]] = {
    "partner": ("dating", "seeing"),
    "club": ("support", "supports", "supporting", "supporter"),
    "own": ("have", "has", "got", "bought", "use", "uses", "own", "owns", "drive", "drives", "ride", "rides"),
}  # fmt: skip
PLACE_SLOTS = {"boss": "work", "partner": "relationship", "club": "club"}  # the slot of a place of a name
_PLACE_OF = {
    **{word: kind for kind, found in PLACE_WORDS.items() for word in found},
    **{phrase: kind for kind, found in PLACE_PHRASES.items() for phrase in found},
}


def place(before: list[str]) -> str:
    """The class of a name's place from the (one or two, lower-case) words before it (:data:`PLACE_PHRASES`,
    then :data:`PLACE_WORDS`), else the last of them."""
    return _PLACE_OF.get(" ".join(before)) or _PLACE_OF.get(before[-1]) or before[-1]


def words(text: str) -> list[str]:
    """Lower-case words, a possessive "'s" taken off ("Ann's" -> "ann")."""
    return [word.removesuffix("'s") for word in WORD.findall(text.lower())]


def stem(word: str) -> str:
    """A crude stem, enough to meet "gym" in "gyms" and "teach" in "teaching": a plural "s" off, then
    the first five letters."""
    return (word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)[:5]


SLOT_OF = {stem(word): slot for slot, words in SLOTS.items() for word in words}  # by stem: "commutes" meets "commute"
VALUE_OF = {  # stem -> (slot, the value's first form): "swims" and "swimming" are one value
    stem(form): (slot, value.split("/")[0])
    for slot, values in SLOT_VALUES.items()
    for value in values
    for form in value.split("/")
}
ROLE_STEMS = frozenset(stem(word) for word in ROLES)
BRAND_OF = {form: (kind, value.split("/")[0]) for kind, found in BRANDS.items() for value in found for form in value.split("/")}  # fmt: skip


def capitalised(text: str) -> set[str]:
    """The words of ``text`` written with a capital letter, lower-cased ("iPhone" -> "iphone"; "'s" off), the
    first word only where its capital is not that of the sentence ("iPhone ...")."""
    found = WRITTEN_WORD.findall(text)
    return {
        word.lower().removesuffix("'s")
        for i, word in enumerate(found)
        if word != "I" and any(c.isupper() for c in (word[1:] if i == 0 else word))
    }


_EMAIL = re.compile(r"\S+@\S+\.[a-z]{2,}")


def slots(text: str) -> set[str]:
    """The :data:`SLOTS` the words of ``text`` touch (compared by their stems), and those of the phrases of
    :data:`PLACE_PHRASES` in it ("answers to", "signed for"); an email address is "contact"."""
    found = words(text)
    padded = " " + " ".join(found) + " "
    return (
        {SLOT_OF[stem(word)] for word in found if stem(word) in SLOT_OF}
        | {
            PLACE_SLOTS[kind]
            for kind, phrases in PLACE_PHRASES.items()
            for phrase in phrases
            if f" {phrase} " in padded
        }
        | ({"contact"} if _EMAIL.search(text.lower()) else set())
    )
