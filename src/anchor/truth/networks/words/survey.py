"""survey (Scutari and Denis): a respondent's age, sex, education, occupation and the size of their town,
and how they usually travel."""

from anchor.truth.networks.words.model import NetworkWords, says

WORDS = NetworkWords(
    network="survey",
    scenario="A survey asks a resident about themselves, their work and their home town, and then how they "
             "usually get about.",
    outcome=("T", "car"),
    outcome1="The respondent usually travels by car.",
    outcome2="The respondent does not usually travel by car.",
    topics={"A": "age", "S": "sex", "E": "education", "O": "occupation", "R": "size of town", "T": "transport"},
    states={
        "A": {
            "young": says("a respondent under 30", "the respondent is under thirty years old",
                          "the respondent is still in their twenties or younger"),
            "adult": says("a respondent aged 30 to 60", "the respondent is between thirty and sixty",
                          "the respondent is middle-aged"),
            "old": says("a respondent over 60", "the respondent is over sixty years old",
                        "the respondent has passed sixty"),
        },
        "S": {
            "M": says("a male respondent", "the respondent is a man"),
            "F": says("a female respondent", "the respondent is a woman"),
        },
        "E": {
            "high": says("schooling up to high school", "the respondent's education stopped at high school",
                         "the respondent left education after high school"),
            "uni": says("a university degree", "the respondent has a university degree",
                        "the respondent went to university"),
        },
        "O": {
            "emp": says("a salaried employee", "the respondent works as an employee",
                        "the respondent draws a salary from an employer"),
            "self": says("a self-employed respondent", "the respondent is self-employed",
                         "the respondent runs their own business"),
        },
        "R": {
            "small": says("a small town", "the respondent lives in a small town",
                          "the respondent's home town is small"),
            "big": says("a big city", "the respondent lives in a big city", "the respondent's home is in a large city"),
        },
        "T": {
            "car": says("travel by car", "the respondent usually travels by car",
                        "the respondent drives to get around"),
            "train": says("travel by train", "the respondent usually travels by train",
                          "the respondent takes the train to get around"),
            "other": says("other means of travel", "the respondent usually travels neither by car nor by train",
                          "the respondent gets around on foot, by bicycle or by bus"),
        },
    },
)
