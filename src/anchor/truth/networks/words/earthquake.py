"""earthquake (the burglar-alarm example of Pearl, as Korb and Nicholson give it): a burglary or an
earthquake can set off a house's alarm, and two neighbours, John and Mary, may call when they hear it."""

from anchor.truth.networks.words.model import NetworkWords, says

WORDS = NetworkWords(
    network="earthquake",
    scenario="A house has a burglar alarm, and its two neighbours, John and Mary, have promised to phone the "
             "owner, who is at work, if they hear it.",
    outcome=("Burglary", "True"),
    outcome1="There has been a burglary at the house.",
    outcome2="There has been no burglary at the house.",
    topics={"Burglary": "burglary", "Earthquake": "earthquake", "Alarm": "the alarm", "JohnCalls": "John's call",
            "MaryCalls": "Mary's call"},
    states={
        "Burglary": {
            "True": says("a break-in at the house", "someone has broken into the house",
                         "a burglar has entered the house"),
            "False": says("an undisturbed house", "nobody has broken into the house",
                          "the house has not been burgled"),
        },
        "Earthquake": {
            "True": says("a local earthquake", "an earthquake struck the area",
                         "the ground shook in a small earthquake"),
            "False": says("no seismic activity", "there was no earthquake", "the ground has been still"),
        },
        "Alarm": {
            "True": says("a ringing burglar alarm", "the alarm is going off", "the burglar alarm has been triggered"),
            "False": says("a silent burglar alarm", "the alarm has stayed silent",
                          "the burglar alarm has not gone off"),
        },
        "JohnCalls": {
            "True": says("a call from John", "John phoned the owner", "the neighbour John rang to report the alarm"),
            "False": says("silence from John", "John has not phoned", "the neighbour John never rang"),
        },
        "MaryCalls": {
            "True": says("a call from Mary", "Mary phoned the owner", "the neighbour Mary rang to report the alarm"),
            "False": says("silence from Mary", "Mary has not phoned", "the neighbour Mary never rang"),
        },
    },
)
