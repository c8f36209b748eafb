"""Factors the simulated LLM invents for a world that is not drawn from the bank of texts.

A world of ``anchor truth make`` gets its inventions from its own domain (the bank's factors it does
not use: plausible but absent, see :func:`anchor.truth.simulate.knowledge.invention_pool`). A world
written by hand has no domain in the bank; for it, these phrases stand for an LLM naming things that
do not bear on the question: each belongs to a theme of its own, far from any decision a world is
about, and the simulated LLM draws from them (seeded per world), leaving out any the world contains.
The wording is ours.
"""

from __future__ import annotations

#: (theme, factor text) pairs; themes are unrelated to one another and to any one scenario.
INVENTED: tuple[tuple[str, str], ...] = (
    ("Night Sky", "phase of the moon"),
    ("Night Sky", "visibility of the northern lights"),
    ("Night Sky", "number of shooting stars"),
    ("Night Sky", "position of the pole star"),
    ("Night Sky", "light pollution over the horizon"),
    ("Garden Birds", "robins nesting in the hedge"),
    ("Garden Birds", "seed left on the bird table"),
    ("Garden Birds", "a woodpecker drumming nearby"),
    ("Garden Birds", "swallows arriving early"),
    ("Garden Birds", "starlings gathering at dusk"),
    ("Handicrafts", "colour of the knitting yarn"),
    ("Handicrafts", "a pottery wheel in the shed"),
    ("Handicrafts", "hand-carved wooden spoons"),
    ("Handicrafts", "quilting patterns from a pamphlet"),
    ("Handicrafts", "glue drying on a model ship"),
    ("Board Games", "chess opening repertoire"),
    ("Board Games", "dice rolled at the start"),
    ("Board Games", "a missing jigsaw piece"),
    ("Board Games", "scrabble tiles left in the bag"),
    ("Board Games", "card shuffling technique"),
    ("Old Music", "tuning of the church organ"),
    ("Old Music", "vinyl records in the attic"),
    ("Old Music", "a brass band rehearsal schedule"),
    ("Old Music", "lute strings made of gut"),
    ("Old Music", "a choir singing in latin"),
    ("Seashore", "height of the spring tide"),
    ("Seashore", "shells washed up on the sand"),
    ("Seashore", "a lighthouse keeper's logbook"),
    ("Seashore", "seaweed drying on the rocks"),
    ("Seashore", "colour of the beach huts"),
)
