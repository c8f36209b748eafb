"""Stage 1: the hierarchical factor space (abduction, voting, clustering, themes)."""
