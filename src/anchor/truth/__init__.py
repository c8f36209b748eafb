"""Known truth: synthetic worlds whose true P(O1 | S, u) is known exactly, a simulated LLM that answers
anchor's prompts from that truth with stated errors, and scores of any run against the truth.

* :mod:`.world`: the world model (scenario, hidden network, factors, conditions), saved as JSON;
* :mod:`.exact`: exact probabilities in a world, by enumeration.
"""
