"""Held-out phrasings for the change probe (`change_probe.py --phrasings heldout`).

These templates were written separately from the base templates of `change_probe.py` and
without reading the slot patterns of the engine (crates/trajwiki-memory/src/slots.rs), so that
the probe can tell how far the slot model reaches beyond the wordings it was written against.
Keep it so: do not tune these templates to what the slot model reads, and do not write slot
patterns while reading them. A failure on a held-out phrasing is reported by its class (a
passing mention of the old value, the value before the verb, a perfect tense, ...), not by the
template.

For every kind of change there are the statement kinds the generator writes:
  old      the first statement of the fact (of the speaker whose fact changes);
  other    the other speaker's statement of the same attribute (a control: it never changes);
  restate  a same-value restatement between the first statement and the change;
  change   the change (a REVISE, or a DEPRECATE for a withdrawal).
They differ from the base templates on purpose: other verbs and constructions, the value before
the verb, passing mentions of the old value ("we moved from A to B", "since leaving X, I ..."),
contractions, fillers ("um", "so yeah"), past and perfect tenses, British spellings.

The placeholders are the generator's (`{old}`, `{new}`, `{emp}`, `{a_new_role}`, `{p}`, ...)
and a few derived here (`extras`): capitalised forms, digits for counts, month-first dates.
A correction's statements ("I grew up in X") have held-out wordings of their own
(`CORRECTION_STATEMENTS`); its turns use `{stmt_a}` / `{stmt_b}` made from one of them.
"""

from __future__ import annotations

import random
from typing import Any

DIGITS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
          "six": "6"}

TEMPLATES: dict[str, dict[str, list[str]]] = {
    "move": {
        "old": ["Been in {old} going on three years now, and I can't picture living anywhere else.",
                "{old}'s home for now, my flat's ten minutes from the station.",
                "My place in {old} has the tiniest kitchen, but the view makes up for it.",
                "So yeah, I'm based in {old}, have been since uni.",
                "We rent a little house on the edge of {old}.",
                "I call {old} home these days."],
        "other": ["Me, I rent a place in {old}, near the old harbour.",
                  "I'm over in {old}, so it's a bit of a trek to see you.",
                  "Ha, {old} is where I've lived my whole adult life."],
        "restate": ["The trams in {old} were a mess again this morning, typical.",
                    "Um, {old} still treats me well, can't complain about where I live.",
                    "Walked home across {old} tonight, I never get tired of this city.",
                    "Yep, still renting in {old}, the landlord finally fixed the heating."],
        "change": ["So we moved from {old} to {new} over the holidays, still living out of boxes.",
                   "I'm a {new} resident now, can you believe it? The lease started on the first.",
                   "Since leaving {old} I've been renting a place in {new}, it's much quieter.",
                   "Just handed back the keys in {old} and signed for a flat in {new}, so that's "
                   "home now.",
                   "{new} has been home for a couple of weeks, the {old} chapter is closed.",
                   "I've relocated, well, we've relocated, to {new}.",
                   "Living in {new} now! Packing up the old place took forever.",
                   "Ended up moving house, it's {new} for me from now on.",
                   "I just moved into a small apartment in {new}."],
    },
    "job": {
        "old": ["{emp} pays the bills: I'm {a_role} there, mostly early shifts.",
                "I've been {a_role} at {emp} for about two years.",
                "Work's fine, you know, the usual {role} stuff at {emp}.",
                "At {emp} they've got me working as {a_role}, which I actually like.",
                "My day job? {a_role_cap} at {emp}.",
                "I'm employed by {emp}, in the role of {role}."],
        "other": ["I'm {a_role} myself, at {emp}, so I know the feeling.",
                  "Over at {emp}, where I'm {a_role}, it's chaos this week."],
        "restate": ["Had a brutal week at {emp}, half the team was out sick.",
                    "Still at {emp}, still {a_role}, nothing's changed on that front.",
                    "My manager at {emp} finally approved my holiday."],
        "change": ["Since leaving my job at {emp}, I've been working as {a_new_role} at "
                   "{new_emp}.",
                   "I handed in my notice at {emp}; from Monday I'm {a_new_role} with {new_emp}.",
                   "{new_emp} took me on as {a_new_role}, so no more {emp} for me.",
                   "New job! I've joined {new_emp}, {a_new_role} this time.",
                   "I'm at {new_emp} now, working as {a_new_role}.",
                   "Quit {emp} last month, I'm {a_new_role} over at {new_emp} these days.",
                   "Um, so, I switched jobs: {a_new_role} at {new_emp}.",
                   "Turns out {new_emp} wanted me, I've been {a_new_role} there since the "
                   "spring."],
    },
    "plan_cancelled": {
        "old": ["{plan_cap} is happening in May, I've already put down a deposit.",
                "We're going on {plan} in the autumn, finally.",
                "I signed up for {plan}, it starts in a few months.",
                "So I've got {plan} lined up for after the summer.",
                "Booked it! {plan_cap}, next April."],
        "other": ["I've got {plan} coming up myself, it's all paid for.",
                  "We've signed up for {plan}, it's in the diary."],
        "restate": ["Bought new gear for {plan_the} today, getting excited.",
                    "Counting down the days to {plan_the}.",
                    "{plan_the_cap} is still on, I checked the dates again."],
        "change": ["Well, {plan_the}'s been cancelled, the organisers pulled out.",
                   "We've called off {plan_the}, money's too tight this year.",
                   "I'm dropping {plan_the}, I just can't take the time off.",
                   "{plan_the_cap}? Not happening anymore, sadly.",
                   "Got my deposit back for {plan_the}, I pulled out of it.",
                   "Forget {plan_the}, I've decided against it.",
                   "Um, so {plan_the} fell through, we won't be going.",
                   "There won't be {plan_the} this year after all, I cancelled it."],
    },
    "pet_renamed": {
        "old": ["My {pet}'s name is {old}, and what a menace.",
                "{old}, that's my {pet}, chewed through a charger cable yesterday.",
                "We got a {pet} last year and named it {old}.",
                "Meet {old}, my {pet}! I'd show you a photo if I could.",
                "Our {pet}, {old}, has the loudest snore."],
        "other": ["I've got a {pet}, {old} is her name.",
                  "We've got a {pet} at home, {old}, a proper little troublemaker."],
        "restate": ["{old} knocked a plant off the shelf again, that {pet} is trouble.",
                    "Took {old} to the vet for a check-up, the {pet}'s doing great.",
                    "Yep, {old} is still the boss of the house."],
        "change": ["Funny thing, {old} isn't {old} anymore, the kids renamed the {pet} {new}.",
                   "The {pet}'s called {new} now, we changed it last week.",
                   "We've started calling our {pet} {new}, and it actually answers to it.",
                   "{new} is the {pet}'s new name, {old} just never fit.",
                   "I gave my {pet} a new name: {new}.",
                   "So, um, my {pet} is {new} from now on, not {old}.",
                   "We went with {new} in the end, the {pet} had outgrown {old}.",
                   "It's official, the {pet} answers to {new} now."],
    },
    "breakup": {
        "old": ["I've been seeing {p} since the winter, it's going really well.",
                "{p}, my partner, is cooking tonight, lucky me.",
                "Me and {p} have been together almost a year now.",
                "Date night with {p} tonight, we're trying that new ramen place.",
                "I'm in a relationship with {p}, we met through friends."],
        "other": ["I'm with {p}, we've been a couple for a while."],
        "restate": ["{p} and I went hiking on Sunday, it was lovely.",
                    "Still going strong with {p}, we've got a trip planned.",
                    "{p} says hello, by the way, we're having a quiet night in."],
        "change": ["So {p} and I aren't together anymore, we called it quits.",
                   "It's over between me and {p}.",
                   "I broke it off with {p} a couple of weeks ago.",
                   "{p} moved out, we've separated.",
                   "Since splitting with {p}, I've been spending a lot of time with friends.",
                   "Um, yeah, {p} and me, that's done, we ended it a while back.",
                   "We're not seeing each other anymore, {p} and I.",
                   "{p} dumped me last week, honestly I'm okay."],
    },
    "engaged": {
        "old": ["I've been seeing {p} for a while, we met on a hike.",
                "{p} and I are a couple, it's still pretty new.",
                "Me and {p} have been together since last summer.",
                "{p}'s my partner, we met at a friend's birthday."],
        "other": ["I've got a partner too, {p}, we've been together ages.",
                  "Me? I'm seeing {p}, it's early days."],
        "restate": ["{p} and I spent the whole weekend baking, it was so nice.",
                    "Still with {p}, still happy.",
                    "{p} picked me up from work today, such a sweetheart."],
        "change": ["{p} and I are engaged! We're telling everyone this week.",
                   "I'm getting married! {p} proposed and I said yes, so we're engaged.",
                   "{p} popped the question, so now I've got a fiancé.",
                   "Got engaged to {p} over the weekend, still can't believe it.",
                   "We've got engaged, {p} and I, the ring is gorgeous.",
                   "{p}'s not just my partner anymore, we're engaged.",
                   "Since getting engaged to {p} last month, we've been looking at venues.",
                   "Engaged! {p} asked and I said yes."],
    },
    "count_grows": {
        "old": ["{n_cap} {animals} live with us, it's basically a zoo.",
                "We've got {n} {animals}, and they all have opinions.",
                "Between the {n} {animals} and work, I'm always busy.",
                "I'm the proud owner of {n_digit} {animals}."],
        "other": ["I keep {n} {animals} myself.",
                  "We've only got {n} {animals}, but they're a handful."],
        "restate": ["All {n} of my {animals} want breakfast at six, every day.",
                    "The {animals} are fine, all {n} of them.",
                    "Cleaning up after {n} {animals} is a full-time job."],
        "change": ["We're up to {n1} {animals} now, a neighbour's one needed a home.",
                   "Another {animal} joined the family, that makes {n1}!",
                   "I went from {n} {animals} to {n1}, couldn't resist a rescue.",
                   "{n1_cap} {animals} now, we took in one more last weekend.",
                   "Um, so there's a {ordinal} {animal} in the house now.",
                   "I've got {n1_digit} {animals} as of Tuesday.",
                   "Since adopting another {animal}, I've had {n1} {animals} running around."],
    },
    "preference_flip": {
        "old": ["{a_cap} is my absolute favourite {dom}, no contest.",
                "If I had to pick one {dom}, it'd be {a} every time.",
                "I'm all about {a}, that's my favorite {dom}.",
                "{a_cap}, always. Best {dom} there is.",
                "My go-to {dom}? {a_cap}, easily."],
        "other": ["For me it's {a}, my favourite {dom} forever.",
                  "I'd choose {a} as my {dom}, no question."],
        "restate": ["You know me, {a} all the way.",
                    "{a_cap} is still my number one {dom}.",
                    "Still can't beat {a}, honestly."],
        "change": ["I've gone right off {a}, {b} is my favourite {dom} now.",
                   "These days I'd pick {b} over {a} any day.",
                   "{b_cap} has overtaken {a} as my favorite {dom}.",
                   "Not so into {a} anymore, I'm more of a {b} person now.",
                   "My favourite {dom} has changed: it's {b} now.",
                   "Since I got hooked on {b}, {a} just doesn't compare.",
                   "Um, I think {b} is my top {dom} now, honestly.",
                   "I used to love {a}, but now it's {b} for me."],
    },
    "date_postponed": {
        "old": ["The {event} is set for {d1}, invitations go out soon.",
                "We're holding the {event} on {d1_us}.",
                "Mark your calendar: {d1}, that's our {event}.",
                "{d1} is the date for our {event}."],
        "other": ["Our {event} is planned for {d1}.",
                  "We've picked {d1_us} for our {event}."],
        "restate": ["Been planning the menu for the {event} on {d1}.",
                    "Still {d1} for the {event}, nothing's changed."],
        "change": ["The {event} is now on {d2} instead of {d1}.",
                   "We had to move the {event} from {d1} to {d2}.",
                   "Change of plan: the {event}'s been rescheduled for {d2}.",
                   "Um, the {event} won't be on {d1} after all, it's {d2_us} now.",
                   "{d2} is the new date for the {event}.",
                   "We've delayed the {event} until {d2}, the caterer fell through.",
                   "The {event} got bumped to {d2}."],
    },
    "item_sold": {
        "old": ["I've had {item} for years, it's practically family.",
                "There's {item} in my garage that I adore.",
                "Did I mention I own {item}? Best purchase ever.",
                "Got {item} off a friend last spring, it's great."],
        "other": ["I own {item}, bought it secondhand.",
                  "I've got {item} myself, it hardly gets used."],
        "restate": ["Took the {key} out again at the weekend.",
                    "The {key}'s running fine, touch wood.",
                    "Gave the {key} a good clean on Saturday."],
        "change": ["I sold my {key}, the buyer picked it up yesterday.",
                   "Said goodbye to the {key}, someone from the village bought it.",
                   "The {key}'s been sold, it's kind of sad.",
                   "Since getting rid of the {key}, I've got so much more space.",
                   "Um, I don't have the {key} anymore, I sold it last month.",
                   "Found a buyer for the {key} at last, it's gone.",
                   "I parted with the {key}, got a decent price too.",
                   "Gave the {key} away to my cousin, I never used it."],
    },
    "correction": {
        "old": ["So, um, {stmt_a}.",
                "Fun fact: {stmt_a}.",
                "{stmt_a_cap}, in case you ever wondered."],
        "other": ["{stmt_a_cap}, for what it's worth.",
                  "Oh, {stmt_a}, since we're on the subject."],
        "restate": ["As I mentioned, {stmt_a}.",
                    "Yeah, {stmt_a}, like I told you."],
        "change": ["Wait, I told you {a} earlier, but that's wrong: {stmt_b}.",
                   "Let me correct myself: {stmt_b}, not {a}.",
                   "Oops, {a} was a mistake, {stmt_b}.",
                   "My bad, it's {b}, not {a}: {stmt_b}.",
                   "Scratch what I said before, {stmt_b}.",
                   "Um, correction, {stmt_b}, I mixed it up with something else.",
                   "I mixed things up: {stmt_b}, I don't know why I said {a}."],
    },
}

# A correction's statement of a value, by attribute: `{v}` the value, `{a_v}` with its article.
CORRECTION_STATEMENTS: dict[str, list[str]] = {
    "hometown": ["I was raised in {v}", "{v} is where I grew up", "my hometown is {v}",
                 "I'm originally from {v}"],
    "sister's job": ["my sister works as {a_v}", "my sister's {a_v}",
                     "my older sister is employed as {a_v}"],
    "birthday month": ["I was born in {v}", "my birthday falls in {v}",
                       "{v} is my birthday month"],
    "first car": ["the first car I ever owned was a {v}", "I learned to drive in my first car, "
                  "a {v}", "back in the day I drove a {v}, my very first car"],
}

# Words that name the new state where the base's single word does not reach the held-out
# wordings (an engagement said as "fiancé").
NEW_MATCH_EXTRA: dict[str, list[str]] = {"engaged": ["fiancé", "engagement"]}


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _month_first(day_month: str) -> str:
    """'30 September' as 'September 30'."""
    day, _, month = day_month.partition(" ")
    return f"{month} {day}" if month else day_month


def extras(values: dict[str, str]) -> dict[str, str]:
    """The derived placeholders of the held-out templates."""
    out: dict[str, str] = {}
    for key in ("a_role", "plan", "n", "n1", "a", "b", "key"):
        if key in values:
            out[f"{key}_cap"] = _cap(values[key])
    for key in ("n", "n1"):
        if key in values:
            out[f"{key}_digit"] = DIGITS.get(values[key], values[key])
    for key in ("d1", "d2"):
        if key in values:
            out[f"{key}_us"] = _month_first(values[key])
    return out


def texts(rng: random.Random, kind: str, values: dict[str, Any], control: bool,
          attribute: str | None = None) -> tuple[str, list[str], str]:
    """The held-out texts of one fact: its first statement (the `other` wording for a control),
    one restatement and the change, drawn with `rng` (the phrasing's own generator, so that a
    seed's values and sessions are those of the base phrasings)."""
    t = TEMPLATES[kind]
    v = {**values, **extras(values)}
    if kind == "correction":
        stmt = rng.choice(CORRECTION_STATEMENTS[attribute or ""])
        for side in ("a", "b"):
            s = stmt.format(v=values[side], a_v=_article(values[side]))
            v[f"stmt_{side}"], v[f"stmt_{side}_cap"] = s, _cap(s)
    old = rng.choice(t["other"] if control else t["old"]).format(**v)
    restate = rng.choice(t["restate"]).format(**v)
    change = rng.choice(t["change"]).format(**v)
    return old, [restate], change


# ---------------------------------------------------------------------------------------------
# Distractors: statements of the changing speaker that name another value of the same kind of
# attribute and change nothing of theirs (someone else's fact, a wish, a rejected option, a
# visit). An edit from one is a false edit. Their values come from pools of their own, never
# the generator's, so that they cannot be a scripted value.
# ---------------------------------------------------------------------------------------------

DISTRACTOR_VALUES: dict[str, list[str]] = {
    "city": ["Rotterdam", "Krakow", "Seville", "Wellington", "Montreal", "Bruges", "Oaxaca"],
    "employer": ["Copperfield Insurance", "Willow Dental", "Starling Airlines",
                 "Redwood Bakery Supply", "Pinecrest Hotel"],
    "name": ["Pickle", "Nutmeg", "Captain", "Juniper", "Socks", "Mango"],
    "person": ["Priya", "Tomas", "Lena", "Marco", "Hana", "Felix"],
    "count": ["seven", "eight", "nine", "eleven"],
    "plan": ["a ski week in Norway", "a yoga retreat in Bali", "a wine tour in Chile",
             "a sailing course in Greece"],
    "item": ["a vintage typewriter", "an electric scooter", "a kayak", "a drum kit"],
    "month": ["March", "August", "October", "December"],
    "role": ["dentist", "pilot", "carpenter", "florist"],
    "car": ["Skoda", "Subaru", "Peugeot", "Saab"],
    "day": ["3 March", "14 August", "21 November", "9 December"],
    "taste": ["sparkling water", "jazz radio", "Ethiopian food", "backgammon", "rugby"],
}

DISTRACTORS: dict[str, list[tuple[str, str]]] = {
    # kind -> (pool, template); {x} the distractor's value, the fact's own placeholders below
    "move": [("city", "My brother just moved to {x}, I'm helping him unpack this weekend."),
             ("city", "Someday I'd love to live in {x}, maybe when I retire."),
             ("city", "I was in {x} for a conference last week, lovely city.")],
    "job": [("employer", "My cousin got a job at {x}, she starts on Monday."),
            ("employer", "I had an interview at {x} years ago, didn't get it."),
            ("employer", "A recruiter from {x} keeps emailing me, I'm ignoring it.")],
    "plan_cancelled": [("plan", "My parents are off on {x} next month, lucky them."),
                       ("plan", "I looked at {x} too, but it was way too expensive.")],
    "pet_renamed": [("name", "My neighbour's {pet} is called {x}, cute little thing."),
                    ("name", "If I ever get another {pet}, I'll call it {x}.")],
    "breakup": [("person", "My friend {x} just broke up with her boyfriend, poor thing."),
                ("person", "{x} from work asked me out, but I said no.")],
    "engaged": [("person", "My friend {x} got engaged last week, we're all thrilled."),
                ("person", "My sister is dating someone called {x} now.")],
    "count_grows": [("count", "My aunt has {x} {animals}, can you imagine?"),
                    ("count", "The shelter had {x} {animals} waiting for homes, so sad.")],
    "preference_flip": [("taste", "My dad swears by {x}, but it's not for me."),
                        ("taste", "I tried {x} the other day, it was alright.")],
    "date_postponed": [("day", "We looked at {x} for the {event}, but the hall was booked."),
                       ("day", "My cousin's {event} was on {x} last year, it was fun.")],
    "item_sold": [("item", "My neighbour is selling {x}, tempting."),
                  ("item", "I almost bought {x} last year, glad I didn't.")],
    "correction": [],  # by attribute, below
}
CORRECTION_DISTRACTORS: dict[str, tuple[str, str]] = {
    "hometown": ("city", "My partner grew up in {x}, we visit every summer."),
    "sister's job": ("role", "My brother is {a_x}, he loves it."),
    "birthday month": ("month", "My mum's birthday is in {x}, I always forget."),
    "first car": ("car", "My dad's first car was a {x}, he still talks about it."),
}


def distractor(rng: random.Random, kind: str, attribute: str,
               avoid: set[str] = frozenset()) -> tuple[str, str] | None:
    """A distractor for a fact of `kind` and `attribute`: (its text, its value, never one
    named in a value of `avoid`, the conversation's scripted values), or None."""
    if kind == "correction":
        if attribute not in CORRECTION_DISTRACTORS:
            return None
        pool, template = CORRECTION_DISTRACTORS[attribute]
    else:
        if not DISTRACTORS.get(kind):
            return None
        pool, template = rng.choice(DISTRACTORS[kind])
    values = [x for x in DISTRACTOR_VALUES[pool] if not any(x in v for v in avoid)]
    if not values:
        return None
    x = rng.choice(values)
    v = {"x": x, "a_x": _article(x), "pet": attribute.split("'")[0],
         "animals": attribute.removeprefix("number of "),
         "event": attribute.removeprefix("date of the ")}
    return template.format(**v), x
