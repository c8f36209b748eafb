"""The paper's four design analyses as library code: factor count, retrieval backend and K,
clustering algorithm, probability-estimator LLM. One module per analysis; each has a typed
result, a Markdown table and a PNG figure (``write_*``), written as ``<name>.json/.md/.png``."""
