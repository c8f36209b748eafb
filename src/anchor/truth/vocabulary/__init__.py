"""The words worlds are made of: hand-written domains (a scenario and its two outcomes), their themes,
the factors of each theme, and sentences that match no factor.

A *domain* is one kind of situation (a football match, a new shop, an exam, ...). Its scenario has
one slot, ``{name}``, filled per world from :data:`FILLERS` (people, places or brands), so that two
worlds of one domain still have different scenarios. Each domain has four *themes*; each theme five
*factors*. A factor is a short noun phrase (its text, what an LLM would name it by) and one or two
*paraphrases*: clauses that say, in other words, that the factor is present. A world's plain
mention of a factor is built from its text with :data:`PLAIN_TEMPLATES`; its other mentions are the
paraphrases. Factors of one theme share their vocabulary (so MiniLM puts them near each other, as
it does with real factors of one concept); no two factors of a domain are near-duplicates
(tests/truth/test_vocabulary.py checks both with the real MiniLM).

:data:`DISTRACTORS` are whole sentences about unrelated everyday things: a condition adds them as
content that matches no factor of any domain.

Everything here is data, written for this project; :func:`bank_digest` names this exact bank, so a
world file records which words it was drawn from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from anchor.truth.vocabulary.life import DOMAINS as _LIFE
from anchor.truth.vocabulary.words import Domain, FactorWords, FillerKind, Theme, theme
from anchor.truth.vocabulary.work import DOMAINS as _WORK

#: How a plain mention says that a factor is present, around its noun phrase (lower case, no full stop:
#: a condition puts mentions into sentences).
PLAIN_TEMPLATES: tuple[str, ...] = (
    "reports mention {text}",
    "observers point to {text}",
    "the notes list {text}",
    "there is talk of {text}",
    "the record shows {text}",
)

#: How a condition frames each clause as a sentence (``{clause}`` is a mention, lower case).
SENTENCE_FRAMES: tuple[str, ...] = (
    "{clause}.",
    "It turns out that {clause}.",
    "Also, {clause}.",
    "We hear that {clause}.",
    "By all accounts, {clause}.",
)

# Sentences about unrelated everyday things: no sport, weather, health, money, food, study, software
# or farming, so that none says anything about a factor of any domain.
DISTRACTORS: tuple[str, ...] = (
    "The local library has extended its weekend opening hours.",
    "A new bus timetable comes into force next month.",
    "The town's annual flower show drew a record number of visitors.",
    "A television quiz programme was renewed for another series.",
    "The post office on the corner has changed its logo.",
    "A jazz festival is planned for the autumn.",
    "A family on the next street adopted a grey cat.",
    "The regional museum acquired an old tapestry.",
    "A chess tournament took place in the community hall.",
    "A film crew was seen shooting a period drama in the square.",
    "The cathedral bells were cleaned and retuned.",
    "A visiting choir gave a concert at the church.",
    "Migrating geese were seen flying over the river.",
    "The children's playground has a new slide.",
    "An old bookshop held a poetry reading.",
    "The mayor unveiled a bronze statue of a poet.",
    "A knitting circle meets every Tuesday afternoon.",
    "The bridge over the canal was painted green.",
    "A travelling circus put up its tents on the edge of town.",
    "The radio station has a new morning presenter.",
    "Silent films were screened all night at the old cinema.",
    "A stamp collectors' fair is coming to the town hall.",
    "The lighthouse keeper's cottage became a small gallery.",
    "Volunteers repainted the benches in the park.",
    "A puppet theatre is touring the region's schools.",
    "The clock on the church tower runs two minutes fast.",
    "A birdwatching society counted owls in the woods.",
    "The ferry company launched a new timetable for tourists.",
)

#: Names that fill a scenario's ``{name}`` slot, by kind: invented or common, never a real organisation.
FILLERS: dict[FillerKind, tuple[str, ...]] = {
    "people": (
        "Amara", "Bogdan", "Chiara", "Dmitri", "Elif", "Fergus", "Greta", "Hamid", "Ines", "Jonas", "Keiko",
        "Lorcan", "Mireille", "Nikhil", "Oona", "Pavel", "Quentin", "Rosa", "Soren", "Tamsin", "Ulla", "Viktor",
        "Wanjiru", "Xavier", "Yasmin", "Zeno", "Anouk", "Bram", "Cosima", "Dario", "Esme", "Florian", "Gwen",
        "Hugo", "Isla", "Jasper", "Kira", "Leon", "Maren", "Nadia",
    ),
    "places": (
        "Ashcombe", "Brackenford", "Carrow Hill", "Dunmere", "Eastwick Vale", "Fallowby", "Glenmarsh",
        "Harrowden", "Ivybridge End", "Juniper Cross", "Kestrel Bay", "Lindholm", "Marrowgate", "Northcote",
        "Oakhurst", "Pellingham", "Quarry Bank", "Redmoor", "Saltmarsh", "Thornbury Edge", "Upton Lacey",
        "Vellington", "Westerby", "Yarrowfield", "Alderney Green", "Birchwood", "Coldharbour", "Drayfield",
        "Elmstead", "Foxley", "Greystone", "Hollins", "Inglemere", "Jessop's Ford", "Kilburnie", "Larkspur",
        "Millbrook", "Nettlecombe", "Ormsby", "Pinecrest",
    ),
    "brands": (
        "Lumen", "Quillby", "Tallybird", "Pennywise", "Cobalt", "Ledgerly", "Sprout", "Budgetfox", "Minted",
        "Coinpath", "Thrifty Owl", "Kettle", "Parcel", "Nimbus", "Saveway", "Abacus", "Tillbox", "Piggyback",
        "Moneta", "Ferngrove", "Brightpenny", "Stackly", "Orbit", "Plumline", "Dollop", "Harbour", "Clover",
        "Tidewater", "Marigold", "Juniper", "Quokka", "Sparrow", "Ember", "Willow", "Granite", "Pebble", "Lark",
        "Meadow", "Copperleaf", "Sundial",
    ),
}


#: Every domain of the bank (the order is part of what a seed draws).
DOMAINS: tuple[Domain, ...] = _WORK + _LIFE


def domain(key: str) -> Domain:
    for d in DOMAINS:
        if d.key == key:
            return d
    raise KeyError(key)


def bank_digest() -> str:
    """A short hash of every word in this bank: two world files drawn from the same seed and the same
    digest hold the same texts."""
    data = {"domains": [asdict(d) for d in DOMAINS], "plain": PLAIN_TEMPLATES, "frames": SENTENCE_FRAMES,
            "distractors": DISTRACTORS, "fillers": FILLERS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:16]


__all__ = [
    "DISTRACTORS",
    "DOMAINS",
    "FILLERS",
    "PLAIN_TEMPLATES",
    "SENTENCE_FRAMES",
    "Domain",
    "FactorWords",
    "FillerKind",
    "Theme",
    "bank_digest",
    "domain",
    "theme",
]
