"""What an evaluation's LLM requests cost, read back from run directories.

``attribution``: which scenario each logged request served, and each scenario's critical path (the
runner records it in ``metrics.json``). ``phases``: the phase (construction, mapping, inference,
...) a stage belongs to. ``compare``: ``anchor cost DIR_A DIR_B``, two runs of one dataset slice side
by side, as a document and as Markdown; ``compare_plot``: its bar chart.
"""
