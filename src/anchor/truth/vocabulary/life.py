"""Domains of the bank about a person or a farm: an exam, a wheat harvest, a recovery from knee
surgery. Each factor: its noun phrase, then one or two clauses saying it is present in other words."""

from __future__ import annotations

from anchor.truth.vocabulary.words import Domain, theme

EXAM = Domain(
    key="chemistry-exam",
    scenario="{name}, a second-year student, sits the final organic chemistry exam next month.",
    outcome1="The student passes the exam.",
    outcome2="The student fails the exam.",
    filler="people",
    themes=(
        theme(
            "study habits",
            ("a fixed daily revision timetable", "the student follows a set study plan every single day"),
            ("timed revision with past exam papers", "old exam papers have been worked through under time limits"),
            ("a weekly revision group with classmates", "a few classmates meet each week to study together"),
            ("revision left to the final week", "most of the studying is being put off until just before the exam"),
            ("revision flashcards for reaction mechanisms", "the student drills mechanisms with small memory cards"),
        ),
        theme(
            "health and sleep",
            ("regular nights of poor sleep", "the student often lies awake until the early hours"),
            ("a recent bout of glandular fever", "a viral infection kept the student ill for weeks this term"),
            ("constant stress and anxiety", "worry keeps the student tense and on edge most days"),
            ("a healthy morning exercise routine", "the student runs or swims before breakfast each day"),
            ("energy drinks to stay awake", "cans of caffeinated drinks fuel most late sessions"),
        ),
        theme(
            "the course and its teaching",
            ("a lecturer who explains clearly", "the module's teacher makes hard topics easy to follow"),
            ("missed laboratory classes in the course", "the student skipped several of the practical sessions"),
            ("a course syllabus rewritten mid-year", "the module's content was changed halfway through the year"),
            ("extra tutorials from the course lecturers", "the department runs additional help sessions in the run-up"),
            ("a notoriously harsh course marking scheme", "examiners in this module are known to grade severely"),
        ),
        theme(
            "life outside university",
            ("a twenty-hour weekly part-time job", "the student works long shifts at a supermarket"),
            ("a noisy shared flat", "flatmates throw loud parties several nights a week"),
            ("parents paying the rent", "the family covers the living costs so money is no worry"),
            ("a long daily commute", "getting to campus takes over an hour each way"),
            ("caring for a sick grandparent", "the student looks after an unwell relative at home"),
        ),
    ),
)

HARVEST = Domain(
    key="wheat-harvest",
    scenario="A farmer near {name} is waiting to see how this season's wheat harvest turns out.",
    outcome1="The harvest is above the farm's average yield.",
    outcome2="The harvest is below the farm's average yield.",
    filler="places",
    themes=(
        theme(
            "the season's weather",
            ("a dry spell during flowering", "hardly any rain fell while the crop was in bloom"),
            ("a late spring frost", "temperatures dropped below freezing at the end of April"),
            ("steady rain through the growing season", "showers came regularly all through spring and early summer"),
            ("an early summer heatwave", "weeks of scorching temperatures arrived in June"),
            ("hailstorms just before harvest", "ice pellets battered the fields shortly before cutting"),
        ),
        theme(
            "soil and fertiliser",
            ("soil rich in nitrogen", "lab results show plenty of nitrogen in the ground"),
            ("compacted, poorly drained soil", "the earth is packed hard and water sits on it"),
            ("clover grown to enrich the soil", "legumes were grown over the winter to feed the ground"),
            ("acidic soil left unlimed", "the ground is sour and no lime was spread on it"),
            ("fertiliser spread on the soil promptly", "feed was applied just as the plants began to grow fast"),
        ),
        theme(
            "pests and crop disease",
            ("an outbreak of yellow rust disease", "orange fungal streaks have appeared on the leaves"),
            ("aphid pests across several fields", "small sap-sucking insects are swarming on the stems"),
            ("a wheat variety resistant to disease", "the seed sown was bred to fight off common infections"),
            ("slug pests eating young shoots", "slugs chewed through many seedlings after sowing"),
            ("fungicide sprayed against crop disease", "the crop got its protective spray exactly when planned"),
        ),
        theme(
            "farm management and machinery",
            ("a combine harvester prone to breakdowns", "the old combine keeps failing in the middle of the field"),
            ("a new precision seed drill", "seeds were planted with modern machinery at exact spacing"),
            ("an experienced farm manager", "the farm is run by someone with decades of growing experience"),
            ("sowing delayed by three weeks", "the seed went into the ground far later than planned"),
            ("a shortage of seasonal farmhands", "too few workers have been hired for the busy weeks"),
        ),
    ),
)

KNEE = Domain(
    key="knee-recovery",
    scenario="{name}, a keen amateur runner, had knee ligament surgery last week.",
    outcome1="The patient is running again within six months.",
    outcome2="The patient is not yet running six months after the surgery.",
    filler="people",
    themes=(
        theme(
            "rehabilitation",
            ("daily physiotherapy exercises at home", "the patient does the prescribed knee exercises every day"),
            ("a specialist sports physiotherapist", "rehab is guided by a therapist who works with athletes"),
            ("missed rehabilitation appointments", "several sessions with the physio were skipped"),
            ("a physio's gradual return-to-running plan", "distance will build up slowly under a written schedule"),
            ("access to a hydrotherapy pool", "the patient can exercise in warm water at a rehab pool"),
        ),
        theme(
            "general health",
            ("a healthy body weight", "the patient is slim and carries no extra weight"),
            ("long-standing type 2 diabetes", "the patient has lived with high blood sugar for years"),
            ("poor health from heavy smoking", "the patient gets through a pack of cigarettes a day"),
            ("a young and otherwise healthy patient", "the patient is in their twenties and rarely ill"),
            ("low general fitness before the injury", "the patient was out of shape even before getting hurt"),
        ),
        theme(
            "the operation",
            ("a complication during surgery", "the operation did not go entirely to plan"),
            ("a highly experienced knee surgeon", "the surgeon has performed hundreds of these repairs"),
            ("an infected surgical wound", "the incision became infected after the procedure"),
            ("a meniscus tear repaired too", "the cartilage cushion in the knee was stitched at the same time"),
            ("a stable joint at the check-up", "the knee felt firm and steady at the follow-up visit"),
        ),
        theme(
            "daily life and support",
            ("a physically demanding job", "the patient works on their feet lifting boxes all day"),
            ("a supportive partner at home", "someone at home helps with chores and keeps spirits up"),
            ("a strong drive to race again", "the runner is determined to be back on the start line"),
            ("little time off work", "the employer allows only a few days away from the job"),
            ("support from running club friends", "clubmates visit and encourage the patient every week"),
        ),
    ),
)

DOMAINS = (EXAM, HARVEST, KNEE)
