"""cancer (Korb and Nicholson): air pollution and smoking as causes of lung cancer, and two of its signs,
an X-ray and breathlessness (dyspnoea)."""

from anchor.truth.networks.words.model import NetworkWords, says

WORDS = NetworkWords(
    network="cancer",
    scenario="A patient is seen by a chest physician who suspects a serious illness of the lungs.",
    outcome=("Cancer", "True"),
    outcome1="The patient has lung cancer.",
    outcome2="The patient does not have lung cancer.",
    topics={"Pollution": "air pollution", "Smoker": "smoking", "Cancer": "lung cancer", "Xray": "the X-ray result",
            "Dyspnoea": "breathing"},
    states={
        "Pollution": {
            "low": says("low air pollution", "the patient lives where the air is clean",
                        "pollution levels around the patient's home are low"),
            "high": says("heavy air pollution", "the patient lives in a heavily polluted area",
                         "the air around the patient's home is badly polluted"),
        },
        "Smoker": {
            "True": says("a tobacco smoker", "the patient smokes", "the patient is a regular smoker"),
            "False": says("a non-smoking patient", "the patient does not smoke",
                          "the patient has never smoked tobacco"),
        },
        "Cancer": {
            "True": says("a cancerous lung tumour", "the patient has lung cancer",
                         "a malignant tumour has been found in the patient's lung"),
            "False": says("no cancer", "the patient does not have lung cancer", "the patient is free of cancer"),
        },
        "Xray": {
            "positive": says("a positive X-ray", "the X-ray came back positive",
                             "the X-ray shows a suspicious shadow"),
            "negative": says("a negative X-ray", "the X-ray came back negative",
                             "the X-ray shows nothing suspicious"),
        },
        "Dyspnoea": {
            "True": says("laboured breathing", "the patient struggles for breath",
                         "the patient suffers from dyspnoea"),
            "False": says("normal breathing", "the patient breathes normally", "the patient shows no dyspnoea"),
        },
    },
)
