"""Text clean-up shared by the loaders: whitespace normalisation, the repair of two storage defects,
and the template negation that writes a fact-checking claim's second outcome."""

from __future__ import annotations

import re

from anchor.text import normalise_space

_HTML_TAG = re.compile(r"</?(?:b|i|u|em|strong|font|span|br|p)(?:\s[^<>]*)?/?>", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff]")


def repair_text(text: str) -> str:
    """Undo two storage defects and normalise whitespace.

    * Text containing CJK characters is re-encoded as GBK and decoded as UTF-8; this turns
      ``鈥檓`` back into ``’m``. If that round trip fails the text is genuine CJK and is kept.
    * Simple HTML formatting tags (``<b>``, ``<font ...>`` and the like) are removed.
    """
    if _CJK.search(text):
        try:
            text = text.encode("gbk").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    text = _HTML_TAG.sub(" ", text)
    return normalise_space(text)


def negate_claim(claim: str) -> str:
    """Deterministic negation of a claim: ``"It is not true that <claim>."``.

    The first word is lower-cased when it looks like an ordinary sentence-initial word (capital
    letter followed by lower-case letters only), so ``"Saliva viral load ..."`` becomes ``"It is
    not true that saliva viral load ..."``; words like ``COVID-19`` or ``mRNA`` are left alone. A
    proper noun at the start is lower-cased too, which is cosmetic only. A trailing full stop is
    dropped before the template adds its own.
    """
    text = normalise_space(claim).rstrip(" .")
    if not text:
        raise ValueError("cannot negate an empty claim")
    first, sep, rest = text.partition(" ")
    if len(first) > 1 and first.isalpha() and first[0].isupper() and first[1:].islower():
        first = first.lower()
    return f"It is not true that {first}{sep}{rest}."
