"""Domains of the bank about a team or a business: a football match, a bakery's new shop, a software
release. Each factor: its noun phrase, then one or two clauses saying it is present in other words."""

from __future__ import annotations

from anchor.truth.vocabulary.words import Domain, theme

FOOTBALL = Domain(
    key="football-match",
    scenario="{name} Rovers play a home league match this Saturday against a side from the middle of the table.",
    outcome1="Rovers win the match.",
    outcome2="Rovers do not win the match (they draw or lose).",
    filler="places",
    themes=(
        theme(
            "player fitness and injuries",
            ("the top scorer's hamstring injury", "the leading goal scorer is nursing a torn hamstring",
             "their best finisher has been ruled out with a strained thigh muscle"),
            ("several players recovering from illness", "a stomach bug went through the dressing room last week",
             "a handful of squad members have only just got over the flu"),
            ("fatigue from a midweek cup tie", "the players went to extra time in a cup game on Wednesday",
             "the squad is worn out from a draining midweek fixture"),
            ("the first-choice goalkeeper back from suspension",
             "the regular keeper has served his ban and can play again"),
            ("a fully fit back four", "every defender trained without any restriction this week",
             "the defence has no injury worries at all"),
        ),
        theme(
            "weather and pitch conditions",
            ("heavy rain forecast for kick-off", "forecasters expect a downpour as the game starts",
             "a wet afternoon is predicted for the match"),
            ("a waterlogged, muddy pitch", "the grass has turned boggy after days of showers"),
            ("strong gusting wind across the stadium", "a fierce crosswind is expected to sweep the ground"),
            ("freshly relaid turf on the pitch", "the groundsman has just put down a new playing surface"),
            ("freezing temperatures at kick-off", "the thermometer should stay below zero during the game"),
        ),
        theme(
            "tactics and coaching",
            ("a newly appointed head coach", "the club changed managers only ten days ago",
             "a new manager has just taken charge of the team"),
            ("a switch to an unfamiliar formation", "the coach plans to line up in a shape the players rarely use"),
            ("detailed scouting of opponents' set pieces",
             "the staff spent the week studying how the visitors defend corners"),
            ("an aggressive high-pressing game plan",
             "the team intends to hunt the ball near the visitors' goal from the first whistle"),
            ("a row between coach and captain", "the captain and the manager fell out in the press this week"),
        ),
        theme(
            "supporters and morale",
            ("a sold-out crowd of home supporters", "every ticket for the game has been sold",
             "the stands will be packed with home fans"),
            ("a confident squad after five wins", "the side has won each of its last five games"),
            ("supporters protesting against the club owners", "fans plan to march against the board before the game"),
            ("an unhappy squad over unpaid wages", "the players have not received this month's salaries"),
            ("morale lifted by a new signing", "the arrival of a new forward has raised spirits in the dressing room"),
        ),
    ),
)

BAKERY = Domain(
    key="bakery-branch",
    scenario="{name} runs a successful bakery and is opening a second shop in a neighbouring town.",
    outcome1="The second shop makes a profit within its first year.",
    outcome2="The second shop runs at a loss through its first year.",
    filler="people",
    themes=(
        theme(
            "location and passing trade",
            ("a storefront on the high street", "the new premises face the town's main shopping street",
             "the shop sits where shoppers walk past all day"),
            ("a railway station around the corner", "commuters pass the door on their way to the trains"),
            ("ample free parking outside", "customers can leave their cars right in front of the shop"),
            ("a rival bakery two doors down", "another baker already trades a few steps away"),
            ("months of roadworks on the street", "the council will dig up the road outside for most of the year"),
        ),
        theme(
            "staff and skills",
            ("an experienced head baker", "a baker with twenty years in the trade will run the ovens"),
            ("high turnover among counter staff", "shop assistants keep leaving after a few weeks"),
            ("staff trained at the original shop", "the new team spent a month learning at the first bakery"),
            ("an owner split between two shops", "the owner can only visit the new branch a couple of days a week"),
            ("few applicants for early-morning shifts", "nobody wants to apply for work that starts at four a.m."),
        ),
        theme(
            "costs and finance",
            ("a long lease at high rent", "the landlord demands steep monthly payments for ten years"),
            ("rising costs of flour and butter", "ingredients have become much more expensive this year"),
            ("a bank loan at high interest", "the fit-out was paid for with expensive borrowing"),
            ("lower energy bills from efficient ovens", "the kitchen runs on modern ovens that use far less power"),
            ("a cash reserve for early months", "the owner set aside savings to cover early shortfalls"),
        ),
        theme(
            "products and reputation",
            ("a well-loved signature sourdough", "the bakery's sourdough loaf already has a loyal following"),
            ("a large following on social media", "thousands of people follow the bakery's posts online"),
            ("a regional food award last year", "the bakery won a prize for its pastries at a county fair"),
            ("a narrow range of products", "the shop will sell only a few kinds of bread"),
            ("a wholesale deal with nearby cafés", "several coffee shops have agreed to buy their bread every morning"),
        ),
    ),
)

SOFTWARE = Domain(
    key="software-release",
    scenario="The team behind the {name} budgeting app has promised its users a major update on the first of "
             "next month.",
    outcome1="The update ships on the promised date.",
    outcome2="The update is delayed beyond the promised date.",
    filler="brands",
    themes=(
        theme(
            "code quality and testing",
            ("a large automated test suite", "thousands of automatic checks run on every change"),
            ("a backlog of unresolved critical bugs", "dozens of serious defects are still open"),
            ("a fragile legacy payment module", "the old billing code breaks whenever anyone touches it"),
            ("mandatory code review for every change", "nothing is merged until a second engineer approves it"),
            ("flaky continuous integration builds", "the build pipeline fails at random and has to be rerun"),
        ),
        theme(
            "team and staffing",
            ("two senior engineers resigning", "a pair of the most experienced developers have handed in notice"),
            ("contractors still being onboarded", "recently hired freelancers are only now getting access to the code"),
            ("weeks of developer overtime", "programmers have been staying late every night for weeks"),
            ("a dedicated release manager", "one person does nothing but coordinate the launch"),
            ("key staff on holiday before launch", "several team members are away on leave in the final weeks"),
        ),
        theme(
            "scope and requirements",
            ("features added late by management", "executives keep asking for new functions after the plan was fixed"),
            ("a frozen feature list", "nothing new may be added to the update any more"),
            ("vague requirements from the product owner", "nobody has said clearly what the update must do"),
            ("a redesign of the whole interface", "every screen of the app is being rebuilt from scratch"),
            ("a smaller fallback release", "a trimmed-down version is ready in case the full one slips"),
        ),
        theme(
            "infrastructure and outside services",
            ("a partner's cloud API changing terms", "an outside online service the app relies on is changing how it may be called"),
            ("servers running close to full capacity", "the machines behind the app are already near their limits"),
            ("an unfinished database server migration", "moving the data to the new storage system is not complete"),
            ("an outage at the cloud provider", "the company that hosts the service went down for hours last month"),
            ("automated deployment to the production servers", "releases go out through a single push-button process"),
        ),
    ),
)

DOMAINS = (FOOTBALL, BAKERY, SOFTWARE)
