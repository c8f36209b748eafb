"""The numpy MiniLM (anchor.embedding.minilm) against sentence-transformers running the same bundled model."""

from __future__ import annotations

import numpy as np
import pytest

from anchor.embedding.embed import MiniLMEmbedder, minilm_dir

#: Largest difference of one vector component allowed between the two implementations. Measured:
#: 2.6e-7 on the texts below (float32 rounding in a different order), so 1e-5 leaves a wide margin.
TOLERANCE = 1e-5


def _texts() -> list[str]:
    words = (minilm_dir() / "vocab.txt").read_text(encoding="utf-8").split()[2000:8000]
    rng = np.random.default_rng(0)
    texts = ["", "A", "hello world", "Hot water cooks noodles faster than warm water.",
             "  Ünïcödé café naïve 東京 — «quotes» and emoji 🍜  ", "x" * 3000,  # 3000 x: cut at 256 pieces
             "Boiling point drops at high altitude. " * 40]  # longer than the limit, real words
    texts += [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 300, size=30)]
    return texts


@pytest.mark.slow
def test_numpy_minilm_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    texts = _texts()
    reference = SentenceTransformer(str(minilm_dir()), device="cpu")
    expected = reference.encode(texts, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
    ours = MiniLMEmbedder().encode(texts)
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    assert np.abs(ours - expected).max() <= TOLERANCE
    # The same word pieces go in, cut at the same limit.
    model = MiniLMEmbedder().model
    assert model.token_ids(texts) == reference.tokenizer(texts, truncation=True, max_length=256)["input_ids"]
    assert max(len(ids) for ids in model.token_ids(texts)) == 256


def test_vectors_are_the_same_bits_in_any_batch(embedder):
    texts = [f"factor {i}: {'water ' * (i % 5)}heat" for i in range(40)]
    together = embedder.model.encode(texts)
    for size in (1, 3, 16):
        assert np.array_equal(embedder.model.encode(texts, batch_size=size), together)
    assert np.array_equal(np.stack([embedder.model.encode([t])[0] for t in texts[:6]]), together[:6])


def test_word_pieces_give_offsets_and_words_for_chunking(embedder):
    text = "Unbelievably, noodles boil."
    offsets, words = embedder.model.word_pieces(text)
    assert [text[a:b] for a, b in offsets] == ["Un", "bel", "ie", "va", "bly", ",", "noodles", "boil", "."]
    assert words == [0, 0, 0, 0, 0, 1, 2, 3, 4]
