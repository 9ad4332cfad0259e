"""Development phrasings of the change probe (`change_probe.py --phrasings dev`).

Written for tuning the slot reader (crates/trajwiki-memory/src/slots.rs) without looking at the
held-out phrasings (change_probe_heldout.py, which the tuning session never read): everyday ways
of saying that one moved, changed jobs, dropped a plan, renamed a pet, broke up, got engaged,
got another animal, changed a favourite, postponed an event, sold a thing or misspoke, plus
distractors that change nothing (another person's change, a wish, a question) naming a value of
the same kind taken from this file's own lists.

Interface (the one change_probe.py calls for its other phrasing sets):
- `texts(phr, kind, v, control=False, attribute=None)` -> (old text, [restatement], change
  text or None for a control), from the values `v` of the base generator;
- `distractor(phr, kind, attribute, scripted)` -> (text, value) or None;
- `NEW_MATCH_EXTRA[kind]`: words that also name the new value in a change text;
- `DIGITS[number word]`: its digits;
- `TEMPLATES[kind]` = {"old", "restate", "change", "other"}: the templates.
"""

from __future__ import annotations

import random
from typing import Any

DIGITS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
          "six": "6", "seven": "7"}

NEW_MATCH_EXTRA: dict[str, list[str]] = {
    "engaged": ["fiancé", "fiancee", "fiance", "marry", "married", "proposed", "ring"],
}

# Values for distractors only (not the generator's lists).
OTHER_CITIES = ["Montreal", "Krakow", "Seville", "Nairobi", "Adelaide", "Leipzig", "Quito",
                "Bristol", "Osaka", "Tampere"]
OTHER_EMPLOYERS = ["Pinecrest Dental", "Orbit Freight", "Copperleaf Cafe", "Westbrook Insurance",
                   "Stonegate Academy", "Blue Heron Press"]
OTHER_PEOPLE = ["Dana", "Marco", "Priya", "Tobias", "Lena", "Felix"]
OTHER_PET_NAMES = ["Pickles", "Juniper", "Mochi", "Clover", "Ramen", "Scout"]
OTHER_ITEMS = ["kayak", "motorbike", "drum kit", "telescope", "canoe"]
OTHER_PLANS = ["cruise", "ski trip", "yoga retreat", "road trip to the lakes"]
OTHER_FAVORITES = {"drink": ["bubble tea", "iced coffee"], "cuisine": ["Ethiopian food"],
                   "board game": ["backgammon", "Risk"], "sport to watch": ["rugby", "curling"]}
OTHER_NUMBERS = [("two", "second"), ("five", "fifth"), ("seven", "seventh")]
OTHER_DATES = ["14 March", "2 November", "21 August", "9 October"]

TEMPLATES: dict[str, dict[str, list[str]]] = {
    "move": {
        "old": ["I'm renting a flat in {old} at the moment, it's tiny but cosy.",
                "We've got a little house in {old}, ten minutes from the station.",
                "I've lived in {old} since college and I can't picture leaving.",
                "My apartment in {old} has the best view of the hills."],
        "restate": ["The weather in {old} has been grim all week, I'm stuck indoors.",
                    "Still in {old}, still paying way too much rent."],
        "change": ["We packed up the whole flat and headed to {new} for good.",
                   "Just signed a lease in {new}, so that's where you'll find me from now on.",
                   "After all those years in {old} I've finally made the jump to {new}.",
                   "I'm writing this from my new apartment in {new}!",
                   "We left {old} at the end of the month, we're living in {new} now.",
                   "Moving day is done, I'm officially a resident of {new}.",
                   "{new} is where I'm based now, I gave up the place in {old}.",
                   "The movers dropped our stuff off in {new} on Tuesday, we're slowly unpacking."],
        "other": ["My sister just moved to {x}, she loves it.",
                  "My best friend is relocating to {x} next month.",
                  "I might move to {x} someday, who knows.",
                  "Have you ever lived in {x}?",
                  "My parents bought a house in {x} last year.",
                  "If I won the lottery I'd live in {x}."],
    },
    "job": {
        "old": ["I've been {a_role} with {emp} for a few years now.",
                "I'm employed by {emp}, I work there as {a_role}.",
                "My day job is {a_role} over at {emp}.",
                "At {emp} I'm {a_role}, mostly day shifts."],
        "restate": ["Long week at {emp}, half the team was out sick.",
                    "Nothing new on the work front, still {a_role} at {emp}."],
        "change": ["I handed in my notice at {emp} and started as {a_new_role} at {new_emp}.",
                   "{new_emp} brought me on as {a_new_role}, I started this week.",
                   "I'm {a_new_role} at {new_emp} now, I left {emp} last month.",
                   "New chapter: I work at {new_emp} now, as {a_new_role}.",
                   "I switched employers, I'm with {new_emp} these days as {a_new_role}.",
                   "Said goodbye to {emp} on Friday, and on Monday I began at {new_emp}.",
                   "I got an offer from {new_emp} and took it, so I'm {a_new_role} there now."],
        "other": ["My brother just got hired at {x}.",
                  "I have an interview at {x} next week, fingers crossed.",
                  "My wife started a new job at {x}.",
                  "My friend quit her job at {x} on Monday.",
                  "Would you ever work for {x}?"],
    },
    "plan_cancelled": {
        "old": ["We're saving up for {plan} next year.",
                "I've got {plan} lined up for the autumn.",
                "Next spring I want to do {plan}, I've dreamed about it for ages.",
                "I put down a deposit on {plan} for the summer."],
        "restate": ["Still counting the days until {plan_the}.",
                    "I bought a guidebook for {plan_the} yesterday."],
        "change": ["{plan_the_cap} isn't going to happen after all, money's too tight.",
                   "We had to scrap {plan_the}, work got in the way.",
                   "I've decided to skip {plan_the} this year.",
                   "Bad news, {plan_the} got cancelled.",
                   "{plan_the_cap} is off, I couldn't get the time off.",
                   "I pulled the plug on {plan_the} and asked for a refund.",
                   "Forget {plan_the}, I'm not doing it anymore."],
        "other": ["My cousin cancelled her {x}.",
                  "My neighbours called off their {x}.",
                  "Are you still going on your {x}?"],
    },
    "pet_renamed": {
        "old": ["Our {pet} {old} chews every sock in the house.",
                "I adopted a {pet} last year, {old}, and she's the sweetest.",
                "{old}, my {pet}, has learned to open doors.",
                "We have a {pet} named {old}, she runs the house."],
        "restate": ["{old} was covered in mud after our walk today.",
                    "{old} says hi, by the way."],
        "change": ["We ended up renaming {old}, {new} just suits the {pet} better.",
                   "The {pet} is {new} now, {old} never really stuck.",
                   "{old} didn't fit, so the {pet} goes by {new} these days.",
                   "We decided to call the {pet} {new} instead of {old}.",
                   "Fun update: our {pet} has a new name, {new}.",
                   "The kids voted and the {pet}'s name is {new} from now on."],
        "other": ["My neighbour named her {pet} {x}.",
                  "If I ever get another {pet} I'll call it {x}.",
                  "My cousin's {pet} is called {x}."],
    },
    "breakup": {
        "old": ["{p} and I have been together since the spring.",
                "I'm seeing someone, {p}, we met at a friend's party.",
                "I've been going out with {p} for a few months.",
                "My partner {p} cooked dinner for us tonight."],
        "restate": ["{p} surprised me with flowers yesterday.",
                    "I spent the whole weekend with {p}, it was lovely."],
        "change": ["{p} and I aren't a thing anymore.",
                   "It's over between me and {p}.",
                   "{p} and I decided to go our separate ways.",
                   "I ended it with {p}, it just wasn't working.",
                   "{p} broke up with me last weekend.",
                   "I'm single again, {p} and I called it off.",
                   "Me and {p} split last month."],
        "other": ["My sister broke up with {x} last week.",
                  "{x} and her boyfriend split up, can you believe it?",
                  "My best friend is getting divorced from {x}."],
    },
    "engaged": {
        "old": ["{p} and I have been dating for almost two years.",
                "I'm with {p} now, we've been together a while.",
                "My boyfriend {p} is taking me to the coast this weekend.",
                "{p} and I moved our stuff into one wardrobe, it's getting serious."],
        "restate": ["{p} made me breakfast in bed this morning.",
                    "Date night with {p} tonight, finally."],
        "change": ["{p} proposed on the beach and I said yes!",
                   "{p} and I are engaged!",
                   "We're getting married! {p} asked me on Saturday.",
                   "I asked {p} to marry me and the answer was yes.",
                   "{p} is officially my fiancé now.",
                   "Got engaged to {p} over the weekend!",
                   "There's a ring on my finger, {p} and I are getting married next year."],
        "other": ["My cousin just got engaged to {x}!",
                  "My best friend is marrying {x} in June.",
                  "Do you think {x} will ever propose to my sister?"],
    },
    "count_grows": {
        "old": ["We keep {n} {animals} in the back garden.",
                "There are {n} {animals} at our place, it's chaos.",
                "I look after {n} {animals}, it's a lot of work.",
                "Our house has {n} {animals} running around."],
        "restate": ["All {n} of my {animals} were fed before breakfast.",
                    "The {n} {animals} are doing great, thanks for asking."],
        "change": ["We brought home one more {animal}, so it's {n1} {animals} now.",
                   "Another {animal} joined the family, which makes {n1}.",
                   "Our {ordinal} {animal} arrived yesterday!",
                   "We're at {n1} {animals} now after adopting one more.",
                   "I couldn't resist and got a {ordinal} {animal}.",
                   "Now there are {n1} {animals} in the yard."],
        "other": ["My neighbour has {x} {animals}.",
                  "My aunt just got her {xo} {animal}.",
                  "How many {animals} do you think is too many?"],
    },
    "preference_flip": {
        "old": ["{a_cap} has always been my {dom} of choice.",
                "If I had to pick one {dom}, it'd be {a}.",
                "My number one {dom} is {a}, no contest.",
                "I'm a huge fan of {a}, my favourite {dom} by a mile."],
        "restate": ["{a_cap} again today, I never get tired of it.",
                    "Still all about {a}, as you know."],
        "change": ["These days I'd take {b} over {a} any time, it's my favourite {dom} now.",
                   "I've gone off {a}, {b} is my new favourite {dom}.",
                   "Honestly {b} has overtaken {a} as my favourite {dom}.",
                   "I used to love {a}, but now my favourite {dom} is {b}.",
                   "My favourite {dom} is {b} now, {a} got boring.",
                   "{b_cap} is my top {dom} now, I'm over {a}."],
        "other": ["My husband's favourite {dom} is {x}.",
                  "My kids are obsessed with {x} lately.",
                  "Do you like {x}?"],
    },
    "date_postponed": {
        "old": ["The {event} is set for {d1}.",
                "Save the date: our {event} is on {d1}.",
                "We've booked the {event} for {d1}.",
                "Our {event} takes place on {d1}."],
        "restate": ["Getting everything ready for the {event} on {d1}.",
                    "Only a few weeks left until the {event} on {d1}."],
        "change": ["We had to push the {event} back to {d2}.",
                   "The {event} got moved to {d2} because the venue double-booked.",
                   "Change of plans: the {event} is now on {d2}.",
                   "The {event} has been rescheduled for {d2}.",
                   "We're delaying the {event} until {d2}.",
                   "Heads up, the {event} has a new date: {d2}."],
        "other": ["My friend's {event} is on {x}.",
                  "My cousin moved her {event} to {x}.",
                  "Is your brother's {event} still on {x}?"],
    },
    "item_sold": {
        "old": ["I finally treated myself to {item}.",
                "I picked up {item} second-hand last year.",
                "I own {item}, believe it or not.",
                "I've had {item} for ages, it's still going strong."],
        "restate": ["Spent Saturday polishing the {key}.",
                    "The {key} needed a small repair but it's fine now."],
        "change": ["The {key} is gone, a guy from across town bought it.",
                   "I sold the {key} last week, it was just taking up space.",
                   "Said goodbye to the {key} today, sold it online.",
                   "I let the {key} go to a collector.",
                   "I don't own the {key} anymore, my cousin bought it.",
                   "Finally parted with the {key}, got a fair price for it."],
        "other": ["My dad sold his {x}.",
                  "My neighbour is selling her {x}, want it?",
                  "I might buy a {x} one day."],
    },
    "correction": {
        # By attribute: {a} / {b} the values, {a_a} / {a_b} with an article.
        "old": ["hometown|I'm originally from {a}, a small place really.",
                "hometown|I was born and raised in {a}.",
                "hometown|I grew up in {a}, right by the harbour.",
                "sister's job|My sister works as {a_a} downtown.",
                "sister's job|My older sister has been {a_a} for years.",
                "sister's job|My sister is {a_a}, she loves it.",
                "birthday month|My birthday's in {a}.",
                "birthday month|My birthday is in {a}, so it's coming up.",
                "birthday month|I always celebrate my birthday in {a}.",
                "first car|My first car was a {a}, a total wreck.",
                "first car|My very first car was an old {a}.",
                "first car|I learned to drive in my first car, a {a}."],
        "restate": ["hometown|I miss the food back home in {a}.",
                    "sister's job|My sister had a long shift again, the life of {a_a}.",
                    "birthday month|{a} always feels like a special month to me.",
                    "first car|I still think about that {a} sometimes."],
        "change": ["hometown|Wait, I said {a} earlier, but I actually grew up in {b}.",
                   "hometown|Sorry, I mixed that up: I was raised in {b}, not {a}.",
                   "hometown|Let me fix that, I'm from {b} originally, not {a}.",
                   "hometown|Correction: my hometown is {b}, {a} is where my cousins live.",
                   "sister's job|I misspoke before, my sister is {a_b}, not {a_a}.",
                   "sister's job|Oops, my sister's actually {a_b}, I confused her with my cousin.",
                   "sister's job|Correction: my sister works as {a_b}.",
                   "sister's job|Sorry, I mixed that up, my sister is {a_b}.",
                   "birthday month|Wait, my birthday is in {b}, not {a}, no idea why I said that.",
                   "birthday month|Oops, I meant {b}, that's my birthday month.",
                   "birthday month|Correction: my birthday is actually in {b}.",
                   "birthday month|Sorry, got that wrong, I was born in {b}, not {a}.",
                   "first car|Actually my first car was a {b}, the {a} was my dad's.",
                   "first car|I mixed that up, my first car was a {b}.",
                   "first car|Correction: my first car was a {b}, not a {a}.",
                   "first car|Sorry, I got it wrong, it was a {b}, not a {a}."],
        "other": ["hometown|My husband grew up in {x}.",
                  "sister's job|My cousin is a {x}.",
                  "birthday month|My mum's birthday is in {x}.",
                  "first car|My brother's first car was a {x}."],
    },
}

CORRECTION_VALUES = {"hometown": OTHER_CITIES, "sister's job": ["dentist", "pilot", "chef"],
                     "birthday month": ["February", "October"],
                     "first car": ["Peugeot", "Saab", "Honda"]}


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _for_attribute(templates: list[str], attribute: str | None) -> list[str]:
    """Templates without an attribute prefix, or those of `attribute` with it cut off."""
    out = []
    for t in templates:
        if "|" in t:
            attr, text = t.split("|", 1)
            if attr == attribute:
                out.append(text)
        else:
            out.append(t)
    return out


def texts(phr: random.Random, kind: str, v: dict[str, str], control: bool = False,
          attribute: str | None = None) -> tuple[str, list[str], str | None]:
    """The old statement, one restatement and the change (None for a control) of `kind` with
    the values `v`."""
    t = TEMPLATES[kind]
    values: dict[str, Any] = dict(v)
    if kind == "correction":
        values.update(a_a=_article(v["a"]), a_b=_article(v["b"]))
    if kind == "preference_flip":
        values.update(a_cap=_cap(v["a"]), b_cap=_cap(v["b"]))
    old = phr.choice(_for_attribute(t["old"], attribute)).format(**values)
    restate = [phr.choice(_for_attribute(t["restate"], attribute)).format(**values)]
    change = phr.choice(_for_attribute(t["change"], attribute)).format(**values)
    return old, restate, (None if control else change)


def distractor(phr: random.Random, kind: str, attribute: str,
               scripted: set[str]) -> tuple[str, str] | None:
    """A statement by the changing speaker that names another value of the same kind and
    changes nothing (another person's change, a wish, a question), with that value."""
    tpl = phr.choice(_for_attribute(TEMPLATES[kind]["other"], attribute))
    values: dict[str, str] = {}
    if kind == "move":
        x = phr.choice(OTHER_CITIES)
    elif kind == "job":
        x = phr.choice(OTHER_EMPLOYERS)
    elif kind == "plan_cancelled":
        x = phr.choice(OTHER_PLANS)
    elif kind == "pet_renamed":
        x = phr.choice(OTHER_PET_NAMES)
        values["pet"] = phr.choice(["dog", "cat", "rabbit"])
    elif kind in ("breakup", "engaged"):
        x = phr.choice(OTHER_PEOPLE)
    elif kind == "count_grows":
        x, xo = phr.choice(OTHER_NUMBERS)
        animals = attribute.removeprefix("number of ")
        values.update(xo=xo, animals=animals, animal=animals[:-1])
    elif kind == "preference_flip":
        values["dom"] = attribute.removeprefix("favorite ")
        if values["dom"] not in OTHER_FAVORITES:
            return None
        x = phr.choice(OTHER_FAVORITES[values["dom"]])
    elif kind == "date_postponed":
        x = phr.choice(OTHER_DATES)
        values["event"] = attribute.removeprefix("date of the ")
    elif kind == "item_sold":
        x = phr.choice(OTHER_ITEMS)
    elif kind == "correction":
        x = phr.choice(CORRECTION_VALUES.get(attribute, OTHER_CITIES))
    else:
        return None
    if x in scripted:
        return None
    return tpl.format(x=x, **values), x
