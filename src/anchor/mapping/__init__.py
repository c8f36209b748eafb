"""Stage 2: candidate retrieval over a factor space, then LLM selection and reflection."""
