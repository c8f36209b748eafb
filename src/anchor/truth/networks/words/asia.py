"""asia (Lauritzen and Spiegelhalter's chest clinic): a patient's visit to Asia and smoking, tuberculosis,
lung cancer and bronchitis, the node "either" (tuberculosis or lung cancer), an X-ray and breathlessness."""

from anchor.truth.networks.words.model import NetworkWords, says

WORDS = NetworkWords(
    network="asia",
    scenario="A patient has come to a chest clinic, and the doctors are working out what lies behind the "
             "symptoms.",
    outcome=("lung", "yes"),
    outcome1="The patient has lung cancer.",
    outcome2="The patient does not have lung cancer.",
    topics={"asia": "travel to Asia", "tub": "tuberculosis", "smoke": "smoking", "lung": "lung cancer",
            "bronc": "bronchitis", "either": "tuberculosis or cancer", "xray": "the chest X-ray",
            "dysp": "breathing"},
    states={
        "asia": {
            "yes": says("a recent trip to Asia", "the patient recently visited Asia",
                        "the patient travelled to Asia not long ago"),
            "no": says("no recent travel to Asia", "the patient has not been to Asia lately",
                       "the patient has made no journey to Asia recently"),
        },
        "tub": {
            "yes": says("active tuberculosis", "the patient has tuberculosis",
                        "a tuberculosis infection has been confirmed in the patient"),
            "no": says("no tuberculosis", "the patient is free of tuberculosis",
                       "tests have ruled out tuberculosis"),
        },
        "smoke": {
            "yes": says("a smoking habit", "the patient is a smoker", "the patient smokes regularly"),
            "no": says("a non-smoker", "the patient does not smoke", "the patient has never taken up cigarettes"),
        },
        "lung": {
            "yes": says("a malignant lung tumour", "the patient has lung cancer",
                        "a cancerous growth has been found in the patient's lung"),
            "no": says("no lung cancer", "the patient does not have lung cancer",
                       "the patient's lungs are free of cancer"),
        },
        "bronc": {
            "yes": says("a bout of bronchitis", "the patient has bronchitis",
                        "the patient's airways are inflamed with bronchitis"),
            "no": says("no sign of bronchitis", "the patient does not have bronchitis",
                       "the patient's bronchial tubes are not inflamed"),
        },
        "either": {
            "yes": says("tuberculosis or lung cancer", "the patient has at least one of tuberculosis and lung cancer",
                        "either tuberculosis or lung cancer is present in the patient"),
            "no": says("neither tuberculosis nor lung cancer",
                       "the patient has neither tuberculosis nor lung cancer",
                       "both tuberculosis and lung cancer have been excluded"),
        },
        "xray": {
            "yes": says("an abnormal chest X-ray", "the chest X-ray shows an abnormality",
                        "the patient's chest radiograph is abnormal"),
            "no": says("a clear chest X-ray", "the chest X-ray is normal",
                       "the patient's chest radiograph shows nothing unusual"),
        },
        "dysp": {
            "yes": says("shortness of breath", "the patient is short of breath",
                        "the patient gets breathless easily"),
            "no": says("easy breathing", "the patient breathes without difficulty",
                       "the patient has no trouble breathing"),
        },
    },
)
