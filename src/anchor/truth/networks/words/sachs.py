"""sachs (Sachs et al. 2005): eleven phosphorylated proteins and phospholipids of the signalling network of
human T cells, each measured as low, average or high."""

from anchor.truth.networks.words.model import NetworkWords, StateWords, says


def _enzyme(name: str) -> dict[str, StateWords]:
    """The three levels of a protein measured by how much of it is phosphorylated (active)."""
    return {
        "LOW": says(f"low {name} activity", f"{name} activity is low",
                    f"little phosphorylated {name} is detected"),
        "AVG": says(f"average {name} activity", f"{name} activity is at an average level",
                    f"a typical amount of phosphorylated {name} is detected"),
        "HIGH": says(f"high {name} activity", f"{name} activity is high",
                     f"a large amount of phosphorylated {name} is detected"),
    }


def _lipid(name: str) -> dict[str, StateWords]:
    """The three levels of a membrane phospholipid."""
    return {
        "LOW": says(f"a low {name} level", f"the level of {name} is low", f"little {name} is found in the membrane"),
        "AVG": says(f"an average {name} level", f"the level of {name} is average",
                    f"a typical amount of {name} is found in the membrane"),
        "HIGH": says(f"a high {name} level", f"the level of {name} is high",
                     f"plenty of {name} is found in the membrane"),
    }


WORDS = NetworkWords(
    network="sachs",
    scenario="Single human T cells are stimulated in the laboratory, and eleven signalling molecules are "
             "measured in each cell.",
    outcome=("Erk", "HIGH"),
    outcome1="Erk (the MAP kinase p44/42) is highly active in the cell.",
    outcome2="Erk is not highly active in the cell.",
    topics={"Raf": "Raf signalling", "Mek": "Mek signalling", "Erk": "Erk signalling", "Akt": "Akt signalling",
            "PKA": "protein kinase A", "PKC": "protein kinase C", "P38": "p38 signalling", "Jnk": "Jnk signalling",
            "Plcg": "PLC-gamma signalling", "PIP2": "PIP2 lipid", "PIP3": "PIP3 lipid"},
    states={
        "Raf": _enzyme("Raf"), "Mek": _enzyme("Mek"), "Erk": _enzyme("Erk"), "Akt": _enzyme("Akt"),
        "PKA": _enzyme("PKA"), "PKC": _enzyme("PKC"), "P38": _enzyme("p38"), "Jnk": _enzyme("Jnk"),
        "Plcg": _enzyme("PLC-gamma"), "PIP2": _lipid("PIP2"), "PIP3": _lipid("PIP3"),
    },
)
