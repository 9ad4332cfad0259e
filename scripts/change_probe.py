#!/usr/bin/env python3
"""The change probe: conversations with scripted fact changes, and a scorer of the claim edits
(REVISE / DEPRECATE) that a trajwiki build makes of them.

usage:
  change_probe.py generate --seed N --out DIR [--namespace NS]
      Writes DIR/conversation.jsonl (the JSONL message format of `trajwiki ingest`) and
      DIR/script.json (the scripted changes, the same-attribute facts of the other speaker and
      the same-value restatements). Deterministic for a seed.
  change_probe.py score --bin TRAJWIKI --store S --namespace NS --script script.json [--json]
      Reads the memory of NS (`trajwiki export --what memory`; message refs from the store's
      SQLite `messages` table) and scores its REVISE / DEPRECATE ops against the script:
      precision = ops that make a scripted edit / all REVISE+DEPRECATE ops, recall = scripted
      edits made / scripted edits, and `trajwiki history CLAIM --as-of T` before and after each
      change. Prints one row per kind of change, the totals and examples of missed and false ops.
  change_probe.py run --bin TRAJWIKI [--seeds 1,2,3] [--min-precision P] [--min-recall R]
                      [--require-as-of] [--keep DIR] [--json]
      Generates each seed's conversation, ingests and builds it into a fresh store (the offline
      `hashing` model: the probe measures construction, not retrieval), scores it and prints the
      table and the totals over all seeds. Exit 1 when a floor is not met.

Exit codes: 0 fine, 1 a floor not met, 2 bad input (a missing file, a field missing from the
script, a failing trajwiki command), each with a message naming what and where.

An expected edit is found when an op of the expected kind has the change message among its
sources and its target claim cites the message that stated the old value (or a restatement of
it). A REVISE or DEPRECATE op that makes no scripted edit is a false edit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


class ProbeError(Exception):
    """Bad input or a failing command: the message names what and where (exit 2)."""


# ---------------------------------------------------------------------------------------------
# The kinds of change: templates of the old statement, of a same-value restatement and of the
# change, each with several phrasings (some of the changes do not repeat the old verb).
# ---------------------------------------------------------------------------------------------

CITIES = ["Bergen", "Lisbon", "Denver", "Glasgow", "Kyoto", "Austin", "Porto", "Tucson",
          "Valencia", "Halifax", "Dublin", "Ghent", "Perth", "Boise", "Tallinn", "Malmo"]
ROLES = ["nurse", "accountant", "graphic designer", "pharmacist", "electrician", "teacher",
         "software tester", "baker", "paramedic", "librarian"]
EMPLOYERS = ["Riverside Hospital", "Northwind Logistics", "Greenleaf Bakery", "Summit Bank",
             "Bluebird Studio", "Harbor Clinic", "Oakridge School", "Maple Software",
             "Crescent Pharmacy", "Lakeside Library"]
PLANS = [("a trip to Japan", "the trip to Japan", "Japan"),
         ("a road trip along the coast", "the road trip", "road trip"),
         ("a pottery course", "the pottery course", "pottery course"),
         ("a week of camping in the mountains", "the camping week", "camping"),
         ("a cooking class in Italy", "the cooking class", "cooking class"),
         ("a cycling tour of the Alps", "the cycling tour", "cycling tour"),
         ("a surfing holiday in Portugal", "the surfing holiday", "surfing holiday")]
PET_NAMES = ["Max", "Buddy", "Pepper", "Milo", "Biscuit", "Luna", "Rocky", "Ziggy", "Hazel",
             "Noodle", "Waffles", "Bruno", "Olive", "Toffee"]
PETS = ["dog", "cat", "rabbit", "puppy", "kitten"]
PARTNERS = ["Sam", "Alex", "Jordan", "Robin", "Casey", "Jamie", "Morgan", "Riley", "Quinn",
            "Avery"]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six"]
ORDINALS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth"]
ANIMALS = [("cat", "cats"), ("chicken", "chickens"), ("guinea pig", "guinea pigs"),
           ("goat", "goats"), ("parrot", "parrots"), ("tortoise", "tortoises")]
FAVORITES = [("drink", ["coffee", "green tea", "hot chocolate", "lemonade"]),
             ("season", ["autumn", "spring", "winter", "summer"]),
             ("cuisine", ["Thai food", "Mexican food", "Italian food", "Korean food"]),
             ("board game", ["chess", "Scrabble", "Catan", "Monopoly"]),
             ("sport to watch", ["tennis", "basketball", "cricket", "ice hockey"])]
EVENTS = ["wedding", "housewarming party", "graduation party", "book launch", "art exhibition",
          "family reunion"]
ITEMS = [("a red Honda", "Honda"), ("an old upright piano", "piano"), ("a blue Vespa", "Vespa"),
         ("a small sailboat", "sailboat"), ("a camper van", "camper van"),
         ("a vintage record player", "record player"), ("a rowing machine", "rowing machine")]
# Corrections: (attribute, the statement of a value, its values).
CORRECTIONS = [("hometown", "I grew up in {v}", CITIES),
               ("sister's job", "my sister is {a_v}", ROLES),
               ("birthday month", "my birthday is in {v}", MONTHS),
               ("first car", "my first car was a {v}", ["Ford", "Toyota", "Volvo", "Fiat", "Mazda"])]


@dataclass
class Kind:
    """One kind of change: its expected op and the phrasings of its turns."""

    name: str
    op: str  # "REVISE" or "DEPRECATE"
    old: list[str]
    restate: list[str]
    change: list[str]


KINDS: dict[str, Kind] = {k.name: k for k in [
    Kind("move", "REVISE",
         old=["I live in {old} these days, right by the river.",
              "I've been living in {old} for about four years now.",
              "Home for me is {old}, in a flat above a bakery."],
         restate=["{old} is lovely this time of year, I'm glad I live here.",
                  "Still living in {old}, still loving the little coffee shops."],
         change=["Big news: I moved to {new} last week!",
                 "I finally packed up everything and relocated to {new}.",
                 "We're settled in {new} now, the move went fine.",
                 "I don't live in {old} anymore, my new place is in {new}."]),
    Kind("job", "REVISE",
         old=["I work as {a_role} at {emp}.",
              "I'm {a_role} at {emp}, it keeps me busy.",
              "My job as {a_role} at {emp} is pretty demanding."],
         restate=["Another long shift at {emp} today, being {a_role} is tiring.",
                  "I'm still {a_role} at {emp}, nothing new there."],
         change=["I started a new job at {new_emp} last Monday, as {a_new_role}.",
                 "I left {emp}, I'm now {a_new_role} at {new_emp}.",
                 "Guess what, {new_emp} hired me as {a_new_role}! First week done.",
                 "These days I work for {new_emp} instead, as {a_new_role}."]),
    Kind("plan_cancelled", "DEPRECATE",
         old=["I'm planning {plan} next spring.",
              "I've booked {plan} for the summer, can't wait!",
              "Next year I'm doing {plan}, it's all arranged."],
         restate=["I keep reading guides for {plan_the}, it's going to be great.",
                  "Still on for {plan_the}, I've started saving for it."],
         change=["I had to cancel {plan_the}, work got in the way.",
                 "{plan_the_cap} is off, we called it off yesterday.",
                 "Sadly I'm not doing {plan_the} after all.",
                 "Scrap {plan_the}, I changed my mind about it."]),
    Kind("pet_renamed", "REVISE",
         old=["Our {pet} {old} keeps stealing socks.",
              "I have a {pet} called {old}, the sweetest thing.",
              "{old}, my {pet}, learned a new trick this week."],
         restate=["{old} the {pet} says hi, by the way.",
                  "My {pet} {old} slept on my laptop again."],
         change=["We renamed the {pet}, it's {new} now.",
                 "The {pet} has a new name: {new}. {old} never suited it.",
                 "We call the {pet} {new} these days, {old} didn't stick.",
                 "From now on my {pet} goes by {new}."]),
    Kind("breakup", "DEPRECATE",
         old=["I'm dating {p}, we met at a climbing gym.",
              "My partner {p} cooked dinner for me last night.",
              "{p} and I have been seeing each other for a few months."],
         restate=["{p} and I went to a concert together, dating {p} is fun.",
                  "I'm still with {p}, things are good."],
         change=["{p} and I broke up last month.",
                 "I'm single again, it's over with {p}.",
                 "{p} and I split up, it was for the best.",
                 "We ended things, {p} and me."]),
    Kind("engaged", "REVISE",
         old=["I'm dating {p}, we met at a book club.",
              "My partner {p} surprised me with flowers.",
              "{p} and I have been going out since the spring."],
         restate=["I'm still with {p}, we just got back from a weekend away.",
                  "Dating {p} has been the best part of my year."],
         change=["{p} proposed on the beach and now we're engaged!",
                 "{p} and I got engaged on the weekend!",
                 "Guess what, I'm engaged to {p}!",
                 "We're engaged, {p} and me, since Saturday."]),
    Kind("count_grows", "REVISE",
         old=["I have {n} {animals}.",
              "We keep {n} {animals} at home, they rule the house.",
              "My {n} {animals} woke me up at five again."],
         restate=["Feeding my {n} {animals} takes forever in the morning.",
                  "Yes, still {n} {animals}, all healthy."],
         change=["We adopted a {ordinal} {animal}, so now I have {n1} {animals}!",
                 "Now I have {n1} {animals}, another one joined last week.",
                 "Our family grew: {n1} {animals} at home now.",
                 "We adopted a {ordinal} {animal} on Saturday."]),
    Kind("preference_flip", "REVISE",
         old=["My favorite {dom} is {a}.",
              "Nothing beats {a}, it's my favorite {dom}.",
              "I'm a big {a} fan, always my go-to {dom}."],
         restate=["Like I said, {a} is my favorite {dom}.",
                  "Still {a} for me, my favorite {dom} by far."],
         change=["Honestly I prefer {b} now, I've gone off {a}.",
                 "My new favorite {dom} is {b}.",
                 "I've switched to {b}, {a} doesn't do it for me anymore.",
                 "These days {b} is my top {dom}."]),
    Kind("date_postponed", "REVISE",
         old=["Our {event} is on {d1}.",
              "We set the {event} for {d1}, save the date!",
              "The {event} will be on {d1}."],
         restate=["Only a few weeks until the {event} on {d1}.",
                  "Everything is ready for the {event} on {d1}."],
         change=["We postponed the {event} to {d2}.",
                 "The {event} moved to {d2}, the venue had a problem.",
                 "New date for the {event}: {d2}.",
                 "We pushed the {event} back to {d2}."]),
    Kind("item_sold", "DEPRECATE",
         old=["I still have {item} from my student days.",
              "I bought {item} a couple of years ago and I love it.",
              "I own {item}, it needs a service again."],
         restate=["I spent Sunday fixing up my {key}.",
                  "My {key} is still going strong."],
         change=["I sold the {key} last weekend.",
                 "The {key} is gone, a neighbour bought it.",
                 "I finally let the {key} go, got a fair price.",
                 "No more {key} for me, I sold it online."]),
    Kind("correction", "REVISE",
         old=["{stmt_a_cap}.",
              "{stmt_a_cap}, just so you know.",
              "By the way, {stmt_a}."],
         restate=["Like I said, {stmt_a}."],
         change=["Actually, I got that wrong last time: {stmt_b}, not {a}.",
                 "Sorry, I misspoke earlier, {stmt_b}.",
                 "Quick correction: it's {b}, not {a}. {stmt_b_cap}.",
                 "I said {a} before, but that was a slip: {stmt_b}."]),
]}

REACTIONS = ["Oh wow, good for you!", "That's great news!", "Huh, I had no idea.",
             "Really? I didn't see that coming!", "Nice, thanks for telling me.",
             "Haha, that's so you.", "Interesting, tell me more sometime.", "Wow, okay!"]
GREETINGS = ["Hey {other}! How have you been?", "Hi {other}, long time no talk!",
             "Good morning {other}! Got a minute?", "Hey {other}, how's your week going?"]
GREETING_REPLIES = ["Hey {me}! Pretty good, busy week.", "Hi! All good here, thanks for asking.",
                    "Hi {me}! Tired but happy.", "Hey! Just got home, perfect timing."]
QUESTIONS = ["How was your weekend?", "Did you watch anything good lately?",
             "What are you up to this weekend?", "How's your family doing?",
             "Did you try that recipe I sent you?", "Any fun plans for the holidays?"]
ANSWERS = ["Pretty quiet, mostly reading and cleaning.", "Not much, a long walk and a nap.",
           "A documentary about octopuses, it was fascinating.",
           "Just family stuff, nothing exciting.", "I tried it, it turned out a bit salty!",
           "Haven't decided yet, maybe something low-key."]
STORIES = ["Last Saturday I baked bread with my niece, it came out flat but tasty.",
           "I went to a street market yesterday and found an old map of the harbour.",
           "My neighbour's kid taught me a card trick this morning.",
           "I spent the evening sketching the view from the balcony.",
           "I tried a new running route along the canal, my legs are dead.",
           "We played board games until midnight on Friday.",
           "A heron landed right next to me at the lake, I got a great photo.",
           "I finally finished that thousand-piece puzzle.",
           "My cousin visited and we made dumplings from scratch.",
           "I watched the sunrise from the hill behind the station.",
           "I helped a friend paint her kitchen, there's paint in my hair still.",
           "The library had a book sale, I came home with six novels.",
           "I fixed the wobbly chair with a bit of glue and patience.",
           "We had a picnic in the park and a dog stole a sandwich."]
FOLLOW_UPS = ["That sounds lovely!", "Haha, classic.", "You have to show me sometime.",
              "I'm jealous, that sounds fun.", "That made me smile.", "Sounds like a good day."]
GOODBYES = ["Talk soon, take care!", "I have to run, catch you later!",
            "Great catching up, bye for now!"]
GOODBYE_REPLIES = ["Bye! Say hi to everyone.", "Take care, talk soon!", "See you!"]
SPEAKER_PAIRS = [("Ann", "Ben"), ("Maya", "Leo"), ("Nora", "Theo"), ("Iris", "Omar"),
                 ("Clara", "Hugo"), ("Eva", "Dan")]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _date_text(day: dt.date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]}"


def _date_matches(day: dt.date) -> list[str]:
    return [f"{day.day} {MONTHS[day.month - 1]}", f"{MONTHS[day.month - 1]} {day.day}",
            f"-{day.month:02d}-{day.day:02d}"]


# ---------------------------------------------------------------------------------------------
# generate
# ---------------------------------------------------------------------------------------------


@dataclass
class Fact:
    """One scripted slot of a speaker: its values and the texts of its turns."""

    kind: str
    subject: str
    attribute: str
    old_value: str
    new_value: str | None  # None: a withdrawal, or a control that never changes
    old_text: str
    restate_texts: list[str]
    change_text: str | None
    new_match: list[str] = field(default_factory=list)
    old_match: list[str] = field(default_factory=list)


def _pick_two(rng: random.Random, values: list[str], avoid: Iterable[str] = ()) -> list[str]:
    pool = [v for v in values if v not in set(avoid)]
    return rng.sample(pool, 2)


def _fact(rng: random.Random, kind: Kind, subject: str, used: set[str], changing: bool,
          prefer: str | None) -> tuple[Fact, str | None]:
    """A fact of `kind` for `subject` with fresh values (not in `used`): changing or a control.
    `prefer`: the attribute of the other speaker's fact of this kind, taken again where the kind
    allows (same attribute, other value); returned for the next one."""
    old_tpl, restate_tpl, change_tpl = (rng.choice(kind.old), rng.sample(kind.restate, 1),
                                        rng.choice(kind.change))
    v: dict[str, str] = {}
    name = kind.name
    key: str | None = None
    if name == "move":
        v["old"], v["new"] = _pick_two(rng, CITIES, used)
        attr, old, new, om, nm = "home city", v["old"], v["new"], [v["old"]], [v["new"]]
    elif name == "job":
        v["role"], v["new_role"] = rng.sample(ROLES, 2)
        v["emp"], v["new_emp"] = _pick_two(rng, EMPLOYERS, used)
        v["a_role"], v["a_new_role"] = _article(v["role"]), _article(v["new_role"])
        attr = "job"
        old, new = f"{v['role']} at {v['emp']}", f"{v['new_role']} at {v['new_emp']}"
        om, nm = [v["emp"]], [v["new_emp"]]
    elif name == "plan_cancelled":
        plan, plan_the, key = rng.choice([p for p in PLANS if p[2] not in used])
        v.update(plan=plan, plan_the=plan_the, plan_the_cap=_cap(plan_the))
        attr, old, new, om, nm = f"plan: {key}", plan, None, [key], []
    elif name == "pet_renamed":
        v["old"], v["new"] = _pick_two(rng, PET_NAMES, used)
        v["pet"] = rng.choice(PETS)
        attr, old, new = f"{v['pet']}'s name", v["old"], v["new"]
        om, nm = [v["old"]], [v["new"]]
    elif name in ("breakup", "engaged"):
        v["p"] = rng.choice([p for p in PARTNERS if p not in used])
        attr, old = "relationship", f"dating {v['p']}"
        new = None if name == "breakup" else f"engaged to {v['p']}"
        om, nm = [v["p"]], ([] if new is None else ["engaged"])
    elif name == "count_grows":
        choices = [a for a in ANIMALS if a[1] == prefer] or ANIMALS
        (animal, animals) = rng.choice(choices)
        n = rng.choice([k for k in (2, 3, 4) if NUMBERS[k] not in used])
        v.update(animal=animal, animals=animals, n=NUMBERS[n], n1=NUMBERS[n + 1],
                 ordinal=ORDINALS[n + 1])
        attr, old, new = f"number of {animals}", f"{NUMBERS[n]} {animals}", f"{NUMBERS[n + 1]} {animals}"
        om, nm = [animals], [NUMBERS[n + 1], ORDINALS[n + 1], str(n + 1)]
        used.update([NUMBERS[n], NUMBERS[n + 1]])
        key = animals
    elif name == "preference_flip":
        choices = [f for f in FAVORITES if f[0] == prefer
                   and len([x for x in f[1] if x not in used]) >= 2] or FAVORITES
        dom, values = rng.choice(choices)
        v["dom"] = dom
        v["a"], v["b"] = _pick_two(rng, values, used)
        attr, old, new, om, nm = f"favorite {dom}", v["a"], v["b"], [v["a"]], [v["b"]]
        key = dom
    elif name == "date_postponed":
        raise AssertionError("date_postponed facts are made by _event_fact")
    elif name == "item_sold":
        item, key = rng.choice([i for i in ITEMS if i[1] not in used])
        v.update(item=item, key=key)
        attr, old, new, om, nm = f"owns: {key}", item, None, [key], []
    elif name == "correction":
        attribute, stmt, values = rng.choice([c for c in CORRECTIONS if c[0] == prefer]
                                             or CORRECTIONS)
        v["a"], v["b"] = _pick_two(rng, values, used)
        v.update(stmt_a=stmt.format(v=v["a"], a_v=_article(v["a"])),
                 stmt_b=stmt.format(v=v["b"], a_v=_article(v["b"])))
        v.update(stmt_a_cap=_cap(v["stmt_a"]), stmt_b_cap=_cap(v["stmt_b"]))
        attr, old, new, om, nm = attribute, v["a"], v["b"], [v["a"]], [v["b"]]
        key = attribute
    else:
        raise AssertionError(f"unknown kind {name}")
    for value in v.values():
        used.add(value)
    used.add(attr.split(": ")[-1])
    fact = Fact(kind=name, subject=subject, attribute=attr, old_value=old,
                new_value=new if changing else None,
                old_text=old_tpl.format(**v), restate_texts=[t.format(**v) for t in restate_tpl],
                change_text=change_tpl.format(**v) if changing else None,
                new_match=nm if changing else [], old_match=om)
    return fact, key


@dataclass
class Turn:
    """A scripted message: who says it, what, and its role in the script."""

    speaker: str
    text: str
    role: str  # "old", "restate", "change"
    fact: int


def _session_plan(rng: random.Random, n_sessions: int, n_facts: int,
                  changing: list[bool], kinds: list[str]) -> list[tuple[int, list[int], int | None]]:
    """For each fact: the session of its old statement, of its restatements and of its change."""
    plan = []
    for i in range(n_facts):
        if kinds[i] == "correction":
            a = rng.randint(1, n_sessions - 2)
            c = a + rng.randint(1, 2)
        else:
            a = rng.randint(1, n_sessions - 3)
            c = rng.randint(a + 1, n_sessions)
        restate: list[int] = []
        if c - a >= 2 and rng.random() < 0.5:
            restate = [rng.randint(a + 1, c - 1)]
        if not changing[i]:
            # A control: stated, maybe restated later, never changed.
            restate = [rng.randint(a + 1, n_sessions)] if rng.random() < 0.5 else []
            plan.append((a, restate, None))
        else:
            plan.append((a, restate, c))
    return plan


def generate(seed: int, namespace: str | None = None) -> tuple[list[dict], dict]:
    """The messages and the script of seed `seed` (deterministic)."""
    rng = random.Random(seed)
    speakers = list(rng.choice(SPEAKER_PAIRS))
    ns = namespace or f"probe-{seed}"
    n_sessions = rng.randint(12, 20)
    facts: list[Fact] = []
    used: set[str] = set()
    slots: set[tuple[str, str]] = set()
    first = rng.randint(0, 1)
    start = dt.datetime(2023, 1, 2, 9, 0) + dt.timedelta(days=rng.randint(0, 200))
    session_start: list[dt.datetime] = []
    t = start
    for _ in range(n_sessions):
        session_start.append(t.replace(hour=rng.randint(8, 19), minute=rng.choice([0, 15, 30, 45])))
        t = t + dt.timedelta(days=rng.randint(4, 21))
    for k, kind in enumerate(KINDS.values()):
        changer = speakers[(first + k) % 2]
        other = speakers[(first + k + 1) % 2]
        both = rng.random() < 0.4
        prefer: str | None = None
        for subject, changing in ((changer, True), (other, both)):
            slot_kind = "relationship" if kind.name in ("breakup", "engaged") else kind.name
            if kind.name == "breakup" and subject == other:
                continue  # the other speaker's relationship is the engaged one
            if (subject, slot_kind) in slots and slot_kind == "relationship":
                continue
            if kind.name == "date_postponed":
                facts.append(_event_fact(rng, kind, subject, used, changing))
            else:
                fact, prefer = _fact(rng, kind, subject, used, changing, prefer)
                facts.append(fact)
            if slot_kind == "relationship":
                slots.add((subject, slot_kind))
    kinds = [f.kind for f in facts]
    plan = _session_plan(rng, n_sessions, len(facts),
                         [f.change_text is not None for f in facts], kinds)
    by_session: dict[int, list[Turn]] = defaultdict(list)
    for i, (f, (a, restate, c)) in enumerate(zip(facts, plan)):
        by_session[a].append(Turn(f.subject, f.old_text, "old", i))
        for s, text in zip(restate, f.restate_texts):
            by_session[s].append(Turn(f.subject, text, "restate", i))
        if c is not None and f.change_text is not None:
            by_session[c].append(Turn(f.subject, f.change_text, "change", i))
    messages: list[dict] = []
    refs: dict[tuple[int, str], list[tuple[str, str]]] = defaultdict(list)
    for s in range(1, n_sessions + 1):
        texts = _session_messages(rng, speakers, by_session[s])
        clock = session_start[s - 1]
        for seq, (speaker, text, turn) in enumerate(texts, start=1):
            clock += dt.timedelta(minutes=rng.randint(1, 3))
            ref = f"D{s}:{seq}"
            stamp = clock.strftime(TIME_FORMAT)
            messages.append({"namespace": ns, "session": s, "seq": seq, "speaker": speaker,
                             "text": text, "timestamp": stamp, "ref": ref})
            if turn is not None:
                refs[(turn.fact, turn.role)].append((ref, stamp))
    session_end = {m["session"]: m["timestamp"] for m in messages}
    script = {"seed": seed, "namespace": ns, "speakers": speakers, "sessions": n_sessions,
              "conversation": "conversation.jsonl", "changes": [], "controls": []}
    for i, (f, (a, _restate, c)) in enumerate(zip(facts, plan)):
        old_ref, old_ts = refs[(i, "old")][0]
        restated = refs.get((i, "restate"), [])
        entry: dict[str, Any] = {
            "kind": f.kind, "subject": f.subject, "attribute": f.attribute,
            "old_value": f.old_value, "old_ref": old_ref, "old_timestamp": old_ts,
            "old_text": f.old_text, "old_match": f.old_match,
            "restatement_refs": [r for r, _ in restated],
            "restatement_timestamps": [ts for _, ts in restated],
        }
        if c is None or f.change_text is None:
            script["controls"].append(entry)
            continue
        change_ref, change_ts = refs[(i, "change")][0]
        before = session_start[c - 1] - dt.timedelta(hours=12)
        after = dt.datetime.strptime(session_end[c], TIME_FORMAT) + dt.timedelta(hours=1)
        entry.update({
            "new_value": f.new_value, "new_match": f.new_match,
            "op": KINDS[f.kind].op, "change_ref": change_ref, "change_timestamp": change_ts,
            "change_text": f.change_text,
            "as_of_before": before.strftime(TIME_FORMAT),
            "as_of_after": after.strftime(TIME_FORMAT),
        })
        script["changes"].append(entry)
    return messages, script


def _event_fact(rng: random.Random, kind: Kind, subject: str, used: set[str],
                changing: bool) -> Fact:
    """A dated event (postponed when `changing`); its dates are set far enough ahead."""
    event = rng.choice([e for e in EVENTS if e not in used])
    used.add(event)
    d1 = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(60, 250))
    d2 = d1 + dt.timedelta(days=rng.randint(14, 60))
    v = {"event": event, "d1": _date_text(d1), "d2": _date_text(d2)}
    return Fact(kind=kind.name, subject=subject, attribute=f"date of the {event}",
                old_value=v["d1"], new_value=v["d2"] if changing else None,
                old_text=rng.choice(kind.old).format(**v),
                restate_texts=[t.format(**v) for t in rng.sample(kind.restate, 1)],
                change_text=rng.choice(kind.change).format(**v) if changing else None,
                new_match=_date_matches(d2) if changing else [], old_match=_date_matches(d1))


def _session_messages(rng: random.Random, speakers: list[str],
                      turns: list[Turn]) -> list[tuple[str, str, Turn | None]]:
    """A session: a greeting, chatter with the scripted turns spread through it, a goodbye."""
    opener = rng.randint(0, 1)
    me, other = speakers[opener], speakers[1 - opener]
    out: list[tuple[str, str, Turn | None]] = [
        (me, rng.choice(GREETINGS).format(other=other), None),
        (other, rng.choice(GREETING_REPLIES).format(me=me), None),
    ]
    blocks: list[list[tuple[str, str, Turn | None]]] = []
    for turn in turns:
        listener = speakers[1 - speakers.index(turn.speaker)]
        block = [(turn.speaker, turn.text, turn)]
        if rng.random() < 0.7:
            block.append((listener, rng.choice(REACTIONS), None))
        blocks.append(block)
    for _ in range(rng.randint(2, 5)):
        a = rng.randint(0, 1)
        asker, teller = speakers[a], speakers[1 - a]
        if rng.random() < 0.5:
            blocks.append([(asker, rng.choice(QUESTIONS), None),
                           (teller, rng.choice(ANSWERS), None)])
        else:
            blocks.append([(teller, rng.choice(STORIES), None),
                           (asker, rng.choice(FOLLOW_UPS), None)])
    rng.shuffle(blocks)
    for block in blocks:
        out.extend(block)
    closer = rng.randint(0, 1)
    out.append((speakers[closer], rng.choice(GOODBYES), None))
    out.append((speakers[1 - closer], rng.choice(GOODBYE_REPLIES), None))
    return out


def write_generated(seed: int, out: Path, namespace: str | None = None) -> tuple[Path, Path]:
    """Writes DIR/conversation.jsonl and DIR/script.json for `seed`; returns their paths."""
    messages, script = generate(seed, namespace)
    try:
        out.mkdir(parents=True, exist_ok=True)
        conv = out / "conversation.jsonl"
        conv.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
        path = out / "script.json"
        path.write_text(json.dumps(script, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise ProbeError(f"--out {str(out)!r}: cannot write the conversation: {e}") from e
    return conv, path


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description="Conversations with scripted fact changes, and a scorer of trajwiki's "
                    "REVISE / DEPRECATE ops against them.")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write DIR/conversation.jsonl and DIR/script.json")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--namespace", help="the namespace of the messages (default probe-SEED)")
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            conv, script = write_generated(args.seed, args.out, args.namespace)
            print(f"wrote {conv} and {script}")
            return 0
    except ProbeError as e:
        print(f"change_probe: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
