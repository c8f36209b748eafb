"""Sentence embeddings, for stage 1 (deduplication, clustering, themes) and stage 2 (retrieval).

* :mod:`.embed`: the ``Embedder`` protocol, the bundled all-MiniLM-L6-v2 (``MiniLMEmbedder``) with its
  vector cache and long-text chunking, and an embedder's identity;
* :mod:`.minilm`: the model itself, run in numpy;
* :mod:`.server`: embeddings from an OpenAI-compatible ``/v1/embeddings`` server, and
  ``make_embedder``, which picks one from the settings.

Nothing is imported here: the command line reaches for one module at a time, and the model loads
only when a text is first embedded.
"""
