#!/usr/bin/env python3
"""The change probe: conversations with scripted fact changes, and a scorer of the claim edits
(REVISE / DEPRECATE) that a trajwiki build makes of them and of the context that `trajwiki
query` gives for a question about each changed fact.

usage:
  change_probe.py generate --seed N --out DIR [--namespace NS] [--phrasings base|heldout|dev]
      Writes DIR/conversation.jsonl (the JSONL message format of `trajwiki ingest`) and
      DIR/script.json (the scripted changes with a question about each, the same-attribute
      facts of the other speaker, the same-value restatements, the phrasings used and, held
      out only, the distractors). Deterministic for a seed. `--phrasings heldout` words the
      scripted turns with the held-out templates of change_probe_heldout.py (written apart from
      the base templates and from the engine's slot patterns; the same seed keeps its values and
      sessions) and adds distractors: statements naming another value of the same kind that
      change nothing ("my brother just moved to X"); an edit from one is false.
  change_probe.py score --bin TRAJWIKI --store S --namespace NS --script script.json [--json]
                        [--budgets 300,700 | --no-context] [--model hashing]
      Reads the memory of NS (`trajwiki export --what memory`; message refs from the store's
      SQLite `messages` table) and scores its REVISE / DEPRECATE ops against the script:
      precision = ops that make a scripted edit / all REVISE+DEPRECATE ops, recall = scripted
      edits made / scripted edits, and `trajwiki history CLAIM --as-of T` before and after each
      change. Then asks each change's question ("Where does Nora live now?") with `trajwiki
      query --questions FILE --budget B` at each budget and counts the current-fact contexts
      (below). Prints one row per kind of change, the totals and examples of missed and false
      ops, wrong as_of and wrong contexts.
  change_probe.py run --bin TRAJWIKI [--seeds 1,2,3] [--phrasings base|heldout|dev]
                      [--min-precision P] [--min-recall R] [--require-as-of] [--min-context F]
                      [--budgets 300,700 | --no-context] [--keep DIR] [--json]
      Generates each seed's conversation, ingests and builds it into a fresh store (the offline
      `hashing` model: the probe measures construction; the questions are asked with it too, so
      their retrieval is lexical), scores it and prints the table and the totals over all seeds.
      Exit 1 when a floor is not met (`--min-context`: the share of right contexts at every
      budget).

Exit codes: 0 fine, 1 a floor not met, 2 bad input (a missing file, a field missing from the
script, a failing trajwiki command, an unknown --phrasings), each with a message naming what and
where.

An expected edit is found when an op of the expected kind has the change message among its
sources and its target claim cites the message that stated the old value (or a restatement of
it). A REVISE or DEPRECATE op that makes no scripted edit is a false edit. The table also
counts the same-value restatements and those kept as a source of the first statement's claim
(a claim citing both) rather than made a claim of their own (reported, no floor).

A current-fact context is right when, of the changing speaker's message lines in it, one names
the new value and is not marked (a REVISE), or the withdrawal or an old statement marked
"(withdrawn later)" is there (a DEPRECATE); and every line of theirs naming the old value is
marked "(superseded by ...)" / "(withdrawn later)", is the change message itself, or names the
new value too ("we moved from Lisbon to Porto").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import change_probe_dev  # noqa: E402  (the development phrasings, for tuning the slot reader)
import change_probe_heldout  # noqa: E402  (the held-out phrasings, a file of their own)

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
               ("first car", "my first car was a {v}",
                ["Ford", "Toyota", "Volvo", "Fiat", "Mazda"])]


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
# Questions with the answers that fit them.
QUESTIONS = [("How was your weekend?", ["Pretty quiet, mostly reading and cleaning.",
                                        "Not much, a long walk and a nap."]),
             ("Did you watch anything good lately?",
              ["A documentary about octopuses, it was fascinating.",
               "Nothing yet, give me a tip!"]),
             ("What are you up to this weekend?", ["Haven't decided yet, maybe something low-key.",
                                                   "Just errands, nothing exciting."]),
             ("How's your family doing?", ["Everyone's well, thanks for asking!",
                                           "Good, a bit hectic with birthdays."]),
             ("Did you try that recipe I sent you?", ["I did, it turned out a bit salty!",
                                                      "Not yet, it's on my list."]),
             ("How did the week treat you?", ["Busy, but the good kind of busy.",
                                              "Long days, I'm glad it's over."]),
             ("Read anything good recently?", ["A mystery novel, I couldn't put it down.",
                                               "Only half a book, I keep falling asleep."]),
             ("How's the weather over there?", ["Grey and windy, as usual.",
                                                "Sunny for once, I went out at lunch."])]
# Small stories, composed (when, what, with whom, how it went) so that a conversation rarely
# tells one twice; events, never states that could change.
STORY_WHEN = ["Last Saturday", "Yesterday", "This morning", "On Sunday", "Last night",
              "Over the long weekend", "After work on Friday"]
STORY_WHAT = ["I baked bread", "I went to a street market", "I tried a new running route",
              "I sketched the view from a hill", "I played board games until midnight",
              "I finished a thousand-piece puzzle", "I made dumplings from scratch",
              "I watched the sunrise by the lake", "I painted a friend's kitchen",
              "I went to a book sale", "I fixed a wobbly chair", "I had a picnic in the park",
              "I went to a jazz night", "I visited a tiny museum about clocks",
              "I took a pottery taster session", "I went foraging for mushrooms",
              "I helped at a charity run", "I tried bouldering for the first time"]
STORY_WITH = ["with my niece", "with a friend from work", "on my own", "with my cousin",
              "with the neighbours", "with my mum", "with two old school friends"]
STORY_HOW = ["and it was more fun than I expected", "and I'm still tired",
             "and it rained the whole time", "and we laughed so much",
             "and I got a great photo", "and it went a bit wrong but in a funny way",
             "and I want to do it again soon", "and I lost track of time"]
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
          prefer: str | None,
          phr: random.Random | None = None) -> tuple[Fact, str | None]:
    """A fact of `kind` for `subject` with fresh values (not in `used`): changing or a control.
    `prefer`: the attribute of the other speaker's fact of this kind, taken again where the kind
    allows (same attribute, other value); returned for the next one. `phr`: the generator of the
    held-out phrasings (None: the base templates); `rng` is drawn from as for the base, so a
    seed's values and sessions do not depend on the phrasings."""
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
        attr = f"number of {animals}"
        old, new = f"{NUMBERS[n]} {animals}", f"{NUMBERS[n + 1]} {animals}"
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
    old_text, restate_texts = old_tpl.format(**v), [t.format(**v) for t in restate_tpl]
    change_text = change_tpl.format(**v)
    if phr is not None:
        old_text, restate_texts, change_text = _phrasing_module(phr).texts(
            phr, name, v, control=not changing, attribute=attr)
        nm = nm + _phrasing_module(phr).NEW_MATCH_EXTRA.get(name, [])
    fact = Fact(kind=name, subject=subject, attribute=attr, old_value=old,
                new_value=new if changing else None,
                old_text=old_text, restate_texts=restate_texts,
                change_text=change_text if changing else None,
                new_match=nm if changing else [], old_match=om)
    return fact, key


@dataclass
class Turn:
    """A scripted message: who says it, what, and its role in the script."""

    speaker: str
    text: str
    role: str  # "old", "restate", "change", "distractor"
    fact: int  # the index of its fact (of its distractor, for a distractor)


def _session_plan(rng: random.Random, n_sessions: int, n_facts: int,
                  changing: list[bool],
                  kinds: list[str]) -> list[tuple[int, list[int], int | None]]:
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


PHRASINGS = ("base", "heldout", "dev")


class _Phrasings(random.Random):
    """The generator of a phrasing set other than the base: a Random that knows its module."""

    def __init__(self, seed: str, module: Any):
        super().__init__(seed)
        self.module = module


def _phrasing_module(phr: random.Random) -> Any:
    return getattr(phr, "module", change_probe_heldout)


def generate(seed: int, namespace: str | None = None,
             phrasings: str = "base") -> tuple[list[dict], dict]:
    """The messages and the script of seed `seed` (deterministic) in `phrasings`: the base
    templates (`KINDS`) or the held-out ones (change_probe_heldout.py); the same seed gives the
    same values, sessions and chatter in both, only the scripted turns are worded otherwise."""
    if phrasings not in PHRASINGS:
        raise ProbeError(f"--phrasings {phrasings!r}: expected one of {', '.join(PHRASINGS)}")
    rng = random.Random(seed)
    phr = (_Phrasings(f"heldout-{seed}", change_probe_heldout) if phrasings == "heldout"
           else _Phrasings(f"dev-{seed}", change_probe_dev) if phrasings == "dev" else None)
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
                facts.append(_event_fact(rng, kind, subject, used, changing,
                                         session_start[-1].date(), phr))
            else:
                fact, prefer = _fact(rng, kind, subject, used, changing, prefer, phr)
                facts.append(fact)
            if slot_kind == "relationship":
                slots.add((subject, slot_kind))
    kinds = [f.kind for f in facts]
    plan = _session_plan(rng, n_sessions, len(facts),
                         [f.change_text is not None for f in facts], kinds)
    by_session: dict[int, list[Turn]] = defaultdict(list)
    distractors: list[dict[str, Any]] = []  # held-out only: see change_probe_heldout.py
    scripted = {v for f in facts for v in (f.old_value, f.new_value) if v}
    for i, (f, (a, restate, c)) in enumerate(zip(facts, plan)):
        by_session[a].append(Turn(f.subject, f.old_text, "old", i))
        for s, text in zip(restate, f.restate_texts):
            by_session[s].append(Turn(f.subject, text, "restate", i))
        if c is not None and f.change_text is not None:
            by_session[c].append(Turn(f.subject, f.change_text, "change", i))
            made = (_phrasing_module(phr).distractor(phr, f.kind, f.attribute, scripted)
                    if phr is not None and phr.random() < 0.6 else None)
            if made is not None:
                distractors.append({"kind": f.kind, "subject": f.subject,
                                    "attribute": f.attribute, "text": made[0],
                                    "value": made[1]})
                by_session[phr.randint(a, c)].append(
                    Turn(f.subject, made[0], "distractor", len(distractors) - 1))
    messages: list[dict] = []
    refs: dict[tuple[int, str], list[tuple[str, str]]] = defaultdict(list)
    told: set[str] = set()
    for s in range(1, n_sessions + 1):
        texts = _session_messages(rng, speakers, by_session[s], told)
        clock = session_start[s - 1]
        for seq, (speaker, text, turn) in enumerate(texts, start=1):
            clock += dt.timedelta(minutes=rng.randint(1, 3))
            ref = f"D{s}:{seq}"
            stamp = clock.strftime(TIME_FORMAT)
            messages.append({"namespace": ns, "session": s, "seq": seq, "speaker": speaker,
                             "text": text, "timestamp": stamp, "ref": ref})
            if turn is not None and turn.role == "distractor":
                distractors[turn.fact]["ref"] = ref
            elif turn is not None:
                refs[(turn.fact, turn.role)].append((ref, stamp))
    session_end = {m["session"]: m["timestamp"] for m in messages}
    script = {"seed": seed, "namespace": ns, "speakers": speakers, "sessions": n_sessions,
              "phrasings": phrasings, "conversation": "conversation.jsonl", "changes": [],
              "controls": [], "distractors": distractors}
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
            "question": question_for(entry),
        })
        script["changes"].append(entry)
    return messages, script


CORRECTION_QUESTIONS = {"hometown": "Where did {s} grow up?",
                        "sister's job": "What does {s}'s sister do for a living?",
                        "birthday month": "In which month is {s}'s birthday?",
                        "first car": "What was {s}'s first car?"}


def question_for(change: dict[str, Any]) -> str:
    """A natural question about the current value of a scripted change's attribute."""
    s, attr, old = change["subject"], change["attribute"], change["old_value"]
    kind = change["kind"]
    if kind == "move":
        return f"Where does {s} live now?"
    if kind == "job":
        return f"Where does {s} work now?"
    if kind == "plan_cancelled":
        return f"Is {s} still planning {old}?"
    if kind == "pet_renamed":
        return f"What is {s}'s {attr.split(chr(39))[0]} called now?"
    if kind == "breakup":
        return f"Is {s} still {old}?"
    if kind == "engaged":
        return f"What is {s}'s relationship with {old.split()[-1]} now?"
    if kind == "count_grows":
        return f"How many {attr.removeprefix('number of ')} does {s} have now?"
    if kind == "preference_flip":
        return f"What is {s}'s {attr} now?"
    if kind == "date_postponed":
        return f"When is {s}'s {attr.removeprefix('date of the ')} now?"
    if kind == "item_sold":
        return f"Does {s} still have {old}?"
    if kind == "correction" and attr in CORRECTION_QUESTIONS:
        return CORRECTION_QUESTIONS[attr].format(s=s)
    return f"What is {s}'s {attr} now?"


def _event_fact(rng: random.Random, kind: Kind, subject: str, used: set[str],
                changing: bool, end: dt.date, phr: random.Random | None = None) -> Fact:
    """A dated event (postponed when `changing`), on a date after the conversation's `end`;
    `phr` as for `_fact`."""
    event = rng.choice([e for e in EVENTS if e not in used])
    used.add(event)
    d1 = end + dt.timedelta(days=rng.randint(20, 120))
    d2 = d1 + dt.timedelta(days=rng.randint(14, 60))
    v = {"event": event, "d1": _date_text(d1), "d2": _date_text(d2)}
    old_text = rng.choice(kind.old).format(**v)
    restate_texts = [t.format(**v) for t in rng.sample(kind.restate, 1)]
    change_text = rng.choice(kind.change).format(**v) if changing else None
    if phr is not None:
        old_text, restate_texts, change_text = _phrasing_module(phr).texts(
            phr, kind.name, v, control=not changing)
    return Fact(kind=kind.name, subject=subject, attribute=f"date of the {event}",
                old_value=v["d1"], new_value=v["d2"] if changing else None,
                old_text=old_text, restate_texts=restate_texts,
                change_text=change_text if changing else None,
                new_match=_date_matches(d2) if changing else [], old_match=_date_matches(d1))


def _story(rng: random.Random, told: set[str]) -> str:
    """A small story not told before in this conversation (if one is left after a few tries)."""
    for _ in range(20):
        text = (f"{rng.choice(STORY_WHEN)} {rng.choice(STORY_WHAT)} {rng.choice(STORY_WITH)}, "
                f"{rng.choice(STORY_HOW)}.")
        if text not in told:
            break
    told.add(text)
    return text


def _session_messages(rng: random.Random, speakers: list[str], turns: list[Turn],
                      told: set[str]) -> list[tuple[str, str, Turn | None]]:
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
            question, answers = rng.choice(QUESTIONS)
            blocks.append([(asker, question, None), (teller, rng.choice(answers), None)])
        else:
            blocks.append([(teller, _story(rng, told), None),
                           (asker, rng.choice(FOLLOW_UPS), None)])
    rng.shuffle(blocks)
    for block in blocks:
        out.extend(block)
    closer = rng.randint(0, 1)
    out.append((speakers[closer], rng.choice(GOODBYES), None))
    out.append((speakers[1 - closer], rng.choice(GOODBYE_REPLIES), None))
    return out


def write_generated(seed: int, out: Path, namespace: str | None = None,
                    phrasings: str = "base") -> tuple[Path, Path]:
    """Writes DIR/conversation.jsonl and DIR/script.json for `seed`; returns their paths."""
    messages, script = generate(seed, namespace, phrasings)
    try:
        out.mkdir(parents=True, exist_ok=True)
        conv = out / "conversation.jsonl"
        conv.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
        path = out / "script.json"
        path.write_text(json.dumps(script, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise ProbeError(f"--out {str(out)!r}: cannot write the conversation: {e}") from e
    return conv, path


# ---------------------------------------------------------------------------------------------
# score
# ---------------------------------------------------------------------------------------------

EDIT_OPS = ("REVISE", "DEPRECATE")
HELD = ("active", "needs_confirmation")  # a claim that holds (a plan may await confirmation)


@dataclass
class Memory:
    """The claims and ops of a namespace, their messages given as refs."""

    claims: dict[str, dict[str, Any]]  # id -> {"text", "refs", "status"}
    ops: list[dict[str, Any]]  # {"seq", "op", "target", "new_claim", "refs"}


History = Callable[[str, str], list[dict[str, Any]]]


def load_script(path: Path) -> dict[str, Any]:
    """The script at `path`, its fields checked (a missing one is named with its entry)."""
    try:
        script = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ProbeError(f"--script {str(path)!r}: cannot read it: {e}") from e
    except json.JSONDecodeError as e:
        raise ProbeError(f"--script {str(path)!r}: not JSON: {e}") from e
    if not isinstance(script, dict):
        raise ProbeError(f"--script {str(path)!r}: expected a JSON object")
    for key in ("changes", "controls"):
        if not isinstance(script.get(key), list):
            raise ProbeError(f"--script {str(path)!r}: field {key!r} missing or not a list")
    need = {"changes": ("kind", "subject", "attribute", "old_value", "old_ref", "op",
                        "change_ref", "as_of_before", "as_of_after", "restatement_refs",
                        "new_match", "old_match"),
            "controls": ("kind", "subject", "attribute", "old_value", "old_ref",
                         "restatement_refs")}
    for key, fields in need.items():
        for i, entry in enumerate(script[key]):
            if not isinstance(entry, dict):
                raise ProbeError(f"--script {str(path)!r}: {key}[{i}] is not an object")
            for f in fields:
                if f not in entry:
                    raise ProbeError(f"--script {str(path)!r}: {key}[{i}] has no field {f!r}")
            if key == "changes" and entry["op"] not in EDIT_OPS:
                raise ProbeError(f"--script {str(path)!r}: {key}[{i}].op is {entry['op']!r}, "
                                 f"expected one of {', '.join(EDIT_OPS)}")
    return script


def _run(cmd: list[str], what: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise ProbeError(f"{what}: cannot run {cmd[0]!r}: {e}") from e
    if done.returncode != 0:
        raise ProbeError(f"{what}: `{' '.join(cmd)}` exited {done.returncode}: "
                         f"{done.stderr.strip()[-800:]}")
    return done.stdout


def message_refs(store: Path, namespace: str) -> dict[str, str]:
    """Message id -> its external ref (else the id), from the store's SQLite `messages` table."""
    db_path = store / "trajwiki.db"
    if not db_path.is_file():
        raise ProbeError(f"--store {str(store)!r}: no SQLite store there ({db_path} is missing)")
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            rows = db.execute("select id, external_ref from messages where namespace = ?",
                              (namespace,)).fetchall()
        finally:
            db.close()
    except sqlite3.Error as e:
        raise ProbeError(f"--store {str(store)!r}: cannot read the messages of {db_path}: "
                         f"{e}") from e
    if not rows:
        raise ProbeError(f"--namespace {namespace!r}: no messages in the store {str(store)!r}")
    return {i: r or i for i, r in rows}


def parse_memory(lines: Iterable[str], refs: dict[str, str]) -> Memory:
    """The claims and ops of `trajwiki export --what memory` output."""
    claims: dict[str, dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            value = rec["value"]
            if rec["record"] == "claim":
                claims[value["id"]] = {
                    "text": value["text"],
                    "refs": {refs.get(m, m) for m in value["source_message_ids"]},
                    "status": rec.get("current_status") or value["status"]}
            elif rec["record"] == "claim_op":
                ops.append({"seq": value["seq"], "op": value["op"],
                            "target": value.get("target"), "new_claim": value.get("new_claim"),
                            "refs": {refs.get(m, m) for m in value["source_message_ids"]}})
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ProbeError(f"the memory export, line {n}: not a claim or op record as "
                             f"expected ({type(e).__name__}: {e})") from e
    return Memory(claims, ops)


def read_memory(binary: str, store: Path, namespace: str) -> Memory:
    """The memory of `namespace` in `store`, read with `trajwiki export --what memory`."""
    refs = message_refs(store, namespace)
    out = _run([binary, "export", "--store", str(store), "--namespace", namespace,
                "--what", "memory"], "reading the memory")
    return parse_memory(out.splitlines(), refs)


def cli_history(binary: str, store: Path) -> History:
    """`trajwiki history CLAIM --as-of T --json` as a function."""
    def history(claim: str, as_of: str) -> list[dict[str, Any]]:
        out = _run([binary, "history", "--store", str(store), claim, "--as-of", as_of, "--json"],
                   f"the history of {claim} as of {as_of}")
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            raise ProbeError(f"the history of {claim} as of {as_of}: not JSON: {e}") from e
    return history


def _status(entries: list[dict[str, Any]], claim: str) -> str | None:
    """The status of `claim` at the end of a history's entries (None: not in it)."""
    status = None
    for e in entries:
        if e.get("claim") == claim:
            status = e.get("status")
        elif e.get("target") == claim:
            status = e.get("target_status")
    return status


def _matches(text: str, needles: list[str]) -> bool:
    low = text.lower()
    return any(n.lower() in low for n in needles)


def _old_refs(change: dict[str, Any]) -> set[str]:
    return {change["old_ref"], *change["restatement_refs"]}


def _old_claim(change: dict[str, Any], memory: Memory, op: dict[str, Any] | None) -> str | None:
    """The claim that held the old value: the found op's target, else a claim citing the old
    statement (one naming the old value first), else one citing a restatement."""
    if op is not None:
        return op["target"]
    ranked = sorted((not _matches(v["text"], change["old_match"]),
                     change["old_ref"] not in v["refs"], c)
                    for c, v in memory.claims.items() if v["refs"] & _old_refs(change))
    return ranked[0][2] if ranked else None


def _stale_claims(change: dict[str, Any], memory: Memory, old: str) -> list[str]:
    """The other claims that hold the old value: they cite its statement or a restatement, name
    the old value and do not cite the change."""
    return sorted(c for c, v in memory.claims.items()
                  if c != old and v["refs"] & _old_refs(change)
                  and change["change_ref"] not in v["refs"]
                  and _matches(v["text"], change["old_match"]))


def check_as_of(change: dict[str, Any], memory: Memory, op: dict[str, Any] | None,
                history: History) -> str | None:
    """None when `history --as-of` gives the old value before the change and the new one (or
    none) after it: the old claim held before, and after it every claim holding the old value
    deprecated and, for a REVISE, a held revision naming the new value; else what was wrong."""
    old = _old_claim(change, memory, op)
    if old is None:
        return "no claim cites the old statement"
    before = _status(history(old, change["as_of_before"]), old)
    if before not in HELD:
        return f"before ({change['as_of_before']}) the old claim {old} is {before or 'absent'}"
    after_entries = history(old, change["as_of_after"])
    after = _status(after_entries, old)
    if after != "deprecated":
        return f"after ({change['as_of_after']}) the old claim {old} is {after or 'absent'}"
    if change["op"] == "REVISE":
        news = [e for e in after_entries if e.get("op") == "REVISE" and e.get("target") == old]
        if not any(e.get("status") in HELD and _matches(e.get("text") or "", change["new_match"])
                   for e in news):
            texts = "; ".join(repr(e.get("text")) for e in news) or "none"
            return (f"after ({change['as_of_after']}) no held claim revising {old} names "
                    f"{change['new_match'][0]!r} (revisions: {texts})")
    for other in _stale_claims(change, memory, old):
        status = _status(history(other, change["as_of_after"]), other)
        if status != "deprecated":
            return (f"after ({change['as_of_after']}) {other} "
                    f"{memory.claims[other]['text']!r} still holds the old value ({status})")
    return None


# ---------------------------------------------------------------------------------------------
# The current-fact context: a question about each change's attribute, asked of `trajwiki query`
# ---------------------------------------------------------------------------------------------

DEFAULT_BUDGETS = (300, 700)
Ask = Callable[[list[str], int], list[str]]  # (questions, budget) -> their contexts, in order

# A message line of the context: "D5:15 Leo: I live in Austin. (superseded by D12:7)".
_CONTEXT_LINE = re.compile(r"^(\S+) ([^:]+?): (.*)$")
# What the context appends to a superseded or withdrawn message (render.rs push_superseded).
_CONTEXT_MARK = re.compile(r"\s*\((?:superseded by [^)]*|withdrawn later|deprecated[^)]*)\)")
# A resolved time expression: ["last week" = the week before 13 June 2023].
_CONTEXT_NOTE = re.compile(r'\s*\["[^"]*" = [^\]]*\]')


@dataclass
class ContextLine:
    ref: str
    speaker: str
    text: str  # without its time notes and marks
    marked: bool  # superseded or withdrawn


def parse_context(context: str) -> list[ContextLine]:
    """The message lines of a context (session headings and other lines left out)."""
    lines = []
    for raw in context.splitlines():
        m = _CONTEXT_LINE.match(raw.strip())
        if not m or raw.startswith("#"):
            continue
        text = _CONTEXT_NOTE.sub("", m.group(3))
        marked = bool(_CONTEXT_MARK.search(text))
        lines.append(ContextLine(m.group(1), m.group(2), _CONTEXT_MARK.sub("", text), marked))
    return lines


def _mentions(text: str, needles: list[str]) -> bool:
    """Whether `text` names one of `needles` as a word (a capitalised needle, a name, only as
    written: "May" is not "maybe")."""
    for n in needles:
        if not n:
            continue
        pre = r"(?<!\d)" if n[0].isdigit() else r"(?<![A-Za-z])" if n[0].isalpha() else ""
        post = r"(?!\d)" if n[-1].isdigit() else r"(?![A-Za-z])" if n[-1].isalpha() else ""
        flags = 0 if n[0].isupper() else re.IGNORECASE
        if re.search(pre + re.escape(n) + post, text, flags):
            return True
    return False


def _context_needles(change: dict[str, Any]) -> tuple[Callable[[str], bool],
                                                     Callable[[str], bool]]:
    """Whether a context line names the old value, and the new one. A count's new value is its
    number next to the animals ("five cats", "a fifth cat", "makes five"), not any "five"; its
    old value is the old number in a line about the animals ("all four of my cats")."""
    old, new = list(change["old_match"]), list(change["new_match"])
    if change["kind"] == "count_grows" and len(new) == 3 and old:
        animals = old[0]
        word, ordinal, digit = new
        new = [f"{word} {animals}", f"{digit} {animals}", f"{ordinal} {animals[:-1]}",
               f"makes {word}", f"to {word}"]
        number = str(change["old_value"]).split()[0]
        numbers = [number, change_probe_heldout.DIGITS.get(number, number)]
        return ((lambda text: _mentions(text, [animals, animals[:-1]])
                 and _mentions(text, numbers)),
                lambda text: _mentions(text, new))
    return (lambda text: _mentions(text, old)), (lambda text: _mentions(text, new))


def check_context(change: dict[str, Any], context: str) -> str | None:
    """None when the context answers the current value: of the subject's lines, one names the
    new value unmarked (a REVISE), or the withdrawal or a marked old statement is there (a
    DEPRECATE); and every line naming the old value is marked superseded or withdrawn, is the
    change message itself or names the new value too. Else what is wrong."""
    names_old, names_new = _context_needles(change)
    lines = [ln for ln in parse_context(context) if ln.speaker == change["subject"]]
    stale = [ln for ln in lines if not ln.marked and ln.ref != change["change_ref"]
             and names_old(ln.text) and not names_new(ln.text)]
    problems = []
    if change["op"] == "REVISE":
        if not any(not ln.marked and names_new(ln.text) for ln in lines):
            problems.append(f"the new value {change.get('new_value')!r} is absent")
    elif not any(ln.ref == change["change_ref"] or (ln.marked and names_old(ln.text))
                 for ln in lines):
        problems.append("neither the withdrawal nor a marked old statement is there")
    if stale:
        problems.append("the old value unmarked: "
                        + "; ".join(f"{ln.ref} {ln.text!r}" for ln in stale))
    return "; ".join(problems) or None


def cli_ask(binary: str, store: Path, namespace: str, model: str = "hashing") -> Ask:
    """`trajwiki query --questions FILE --budget B --json` as a function."""
    def ask(questions: list[str], budget: int) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="change-probe-q-") as tmp:
            path = Path(tmp) / "questions.txt"
            path.write_text("".join(q + "\n" for q in questions), encoding="utf-8")
            out = _run([binary, "query", "--store", str(store), "--namespace", namespace,
                        "--model", model, "--budget", str(budget), "--questions", str(path),
                        "--read-only", "-q"], f"the questions at budget {budget}")
        contexts = []
        for n, line in enumerate(out.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                contexts.append(json.loads(line)["context"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ProbeError(f"the questions at budget {budget}, answer line {n}: not the "
                                 f"JSON of `query --json` ({type(e).__name__}: {e})") from e
        if len(contexts) != len(questions):
            raise ProbeError(f"the questions at budget {budget}: {len(questions)} asked, "
                             f"{len(contexts)} answers")
        return contexts
    return ask


@dataclass
class Score:
    """The scores of one conversation or of several (added up)."""

    rows: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    ops: int = 0
    correct_ops: int = 0
    missed: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)
    as_of_wrong: list[str] = field(default_factory=list)
    unmerged: list[str] = field(default_factory=list)
    # budget -> {"asked", "right"}; budget -> the wrong contexts, said in words
    context: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    context_wrong: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    # budget -> what was wrong: "new absent", "old unmarked" (one context may count in both)
    context_why: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, other: "Score") -> None:
        for kind, row in other.rows.items():
            self.rows[kind].update(row)
        self.ops += other.ops
        self.correct_ops += other.correct_ops
        self.missed += other.missed
        self.false += other.false
        self.as_of_wrong += other.as_of_wrong
        self.unmerged += other.unmerged
        for budget, counts in other.context.items():
            self.context[budget].update(counts)
        for budget, items in other.context_wrong.items():
            self.context_wrong[budget] += items
        for budget, counts in other.context_why.items():
            self.context_why[budget].update(counts)

    def total(self, key: str) -> int:
        return sum(row[key] for row in self.rows.values())

    @property
    def precision(self) -> float:
        """Ops making a scripted edit / all edit ops (0 when there are none)."""
        return self.correct_ops / self.ops if self.ops else 0.0

    @property
    def recall(self) -> float:
        expected = self.total("expected")
        return self.total("found") / expected if expected else 0.0

    def context_share(self, budget: int) -> float:
        """Right current-fact contexts / questions asked at `budget` (0 when none asked)."""
        counts = self.context.get(budget, Counter())
        return counts["right"] / counts["asked"] if counts["asked"] else 0.0


def _is_edit(op: dict[str, Any], change: dict[str, Any], memory: Memory) -> bool:
    target = memory.claims.get(op["target"] or "", {"refs": set()})
    return (op["op"] == change["op"] and change["change_ref"] in op["refs"]
            and bool(target["refs"] & _old_refs(change)))


def _describe_false(op: dict[str, Any], script: dict[str, Any], memory: Memory) -> tuple[str, str]:
    """The kind a false op is counted under and why it is false."""
    target = memory.claims.get(op["target"] or "", {"refs": set(), "text": None})
    for ch in script["changes"]:
        if ch["change_ref"] in op["refs"]:
            if target["refs"] & _old_refs(ch):
                return ch["kind"], f"{op['op']} where {ch['op']} was expected"
            for ctl in script["controls"]:
                if target["refs"] & _old_refs(ctl):
                    return ch["kind"], (f"the change edits {ctl['subject']}'s {ctl['attribute']}, "
                                        f"which never changed")
            return ch["kind"], "the change edits a claim that does not cite the old statement"
    for entry in script.get("distractors", []):
        if entry.get("ref") in op["refs"] or entry.get("ref") in target["refs"]:
            return entry["kind"], ("a distractor (another's fact, a wish, a rejected option) "
                                   "edits or is edited")
    for key in ("changes", "controls"):
        for entry in script[key]:
            if target["refs"] & _old_refs(entry) or op["refs"] & _old_refs(entry):
                why = ("a restatement or another fact edits it" if key == "changes"
                       else "edits a fact that never changed (control)")
                return entry["kind"], why
    return "(chatter)", "an edit between chatter claims"


def _count_restatements(script: dict[str, Any], memory: Memory, result: Score,
                        label: str) -> None:
    """Per kind: same-value restatements, and those kept as a source of the claim of the first
    statement (a claim citing both) rather than as a claim of their own. A claim's sources are its
    record's and those of the ADD ops that name it again (a restatement adds its message to the
    held claim by an op; the record is never rewritten)."""
    sources: dict[str, set[str]] = {cid: set(c["refs"]) for cid, c in memory.claims.items()}
    for op in memory.ops:
        if op["op"] == "ADD" and op["new_claim"] in sources:
            sources[op["new_claim"]] |= op["refs"]
    for entry in script["changes"] + script["controls"]:
        for ref in entry["restatement_refs"]:
            row = result.rows[entry["kind"]]
            row["restated"] += 1
            if any({entry["old_ref"], ref} <= refs for refs in sources.values()):
                row["merged"] += 1
            else:
                result.unmerged.append(f"{label}{entry['kind']} {entry['subject']} "
                                       f"{entry['old_ref']} "
                                       f"restated at {ref}")


def score_context(script: dict[str, Any], ask: Ask, budgets: Iterable[int], result: Score,
                  label: str = "") -> None:
    """Asks each change's question (the script's, else `question_for`) at each budget and
    counts the contexts that give the current value (`check_context`)."""
    changes = script["changes"]
    questions = [ch.get("question") or question_for(ch) for ch in changes]
    for budget in budgets:
        contexts = ask(questions, budget) if changes else []
        for ch, question, context in zip(changes, questions, contexts):
            result.context[budget]["asked"] += 1
            wrong = check_context(ch, context)
            if wrong is None:
                result.context[budget]["right"] += 1
                result.rows[ch["kind"]][f"ctx{budget}"] += 1
            else:
                result.context_why[budget].update(
                    ["old unmarked"] * ("old value unmarked" in wrong)
                    + ["new absent"] * ("absent" in wrong or "neither" in wrong))
                result.context_wrong[budget].append(
                    f"{label}{ch['kind']} {ch['subject']} {ch['old_ref']}->{ch['change_ref']} "
                    f"{question!r} @{budget}: {wrong}")


def score(script: dict[str, Any], memory: Memory, history: History, label: str = "",
          ask: Ask | None = None, budgets: Iterable[int] = DEFAULT_BUDGETS) -> Score:
    """Scores the REVISE / DEPRECATE ops of `memory` against `script` (see the docstring) and,
    given `ask`, the current-fact contexts at each of `budgets`."""
    result = Score()
    edits = [op for op in memory.ops if op["op"] in EDIT_OPS]
    result.ops = len(edits)
    correct: set[int] = set()
    for ch in script["changes"]:
        row = result.rows[ch["kind"]]
        row["expected"] += 1
        hits = [op for op in edits if _is_edit(op, ch, memory)]
        correct.update(op["seq"] for op in hits)
        what = (f"{label}{ch['kind']} {ch['subject']} {ch['old_ref']}->{ch['change_ref']} "
                f"{ch['old_value']!r} -> {ch.get('new_value')!r}")
        if hits:
            row["found"] += 1
        else:
            row["missed"] += 1
            near = [op for op in edits if ch["change_ref"] in op["refs"]]
            seen = "; ".join(f"{op['op']} of "
                             f"{memory.claims.get(op['target'] or '', {}).get('text')!r}"
                             for op in near) or "no edit from the change message"
            result.missed.append(f"{what}: {seen}")
        wrong = check_as_of(ch, memory, hits[0] if hits else None, history)
        if wrong is None:
            row["as_of_ok"] += 1
        else:
            result.as_of_wrong.append(f"{what}: {wrong}")
    result.correct_ops = len(correct)
    _count_restatements(script, memory, result, label)
    if ask is not None:
        score_context(script, ask, budgets, result, label)
    for op in edits:
        if op["seq"] in correct:
            continue
        kind, why = _describe_false(op, script, memory)
        result.rows[kind]["false"] += 1
        target = memory.claims.get(op["target"] or "", {}).get("text")
        new = memory.claims.get(op["new_claim"] or "", {}).get("text")
        refs = ",".join(sorted(op["refs"]))
        result.false.append(f"{label}{op['op']} #{op['seq']} [{refs}] {target!r} -> {new!r}: {why}")
    return result


def format_score(result: Score, examples: int = 5) -> str:
    """The table (one row per kind, then the totals) and a few examples."""
    budgets = sorted(result.context)
    lines = [f"{'kind':<18}{'expected':>9}{'found':>7}{'missed':>8}{'false':>7}{'as_of ok':>10}"
             f"{'restated: merged':>18}" + "".join(f"{'ctx@' + str(b):>10}" for b in budgets)]
    order = ([k for k in KINDS if k in result.rows]
             + sorted(k for k in result.rows if k not in KINDS))
    keys = ("expected", "found", "missed", "false", "as_of_ok", "restated", "merged",
            *(f"ctx{b}" for b in budgets))
    for kind in order + ["total"]:
        row = result.rows[kind] if kind != "total" else Counter(
            {k: result.total(k) for k in keys})
        lines.append(f"{kind:<18}{row['expected']:>9}{row['found']:>7}{row['missed']:>8}"
                     f"{row['false']:>7}{row['as_of_ok']:>6}/{row['expected']:<3}"
                     f"{row['restated']:>12}: {row['merged']:<3}"
                     + "".join(f"{row[f'ctx{b}']:>6}/{row['expected']:<3}" if row['expected']
                               else f"{'':>10}" for b in budgets))
    expected = result.total("expected")
    lines.append(f"precision {result.precision:.3f} ({result.correct_ops} of {result.ops} "
                 f"REVISE/DEPRECATE ops make a scripted edit), recall {result.recall:.3f} "
                 f"({result.total('found')} of {expected} scripted edits), as_of right for "
                 f"{result.total('as_of_ok')} of {expected} changes; same-value restatements "
                 f"kept as a source of the first statement's claim: {result.total('merged')} of "
                 f"{result.total('restated')}")
    if budgets:
        lines.append("current-fact contexts right (the new value there, the old one absent or "
                     "marked): " + ", ".join(
                         f"{result.context_share(b):.3f} at {b} tokens "
                         f"({result.context[b]['right']} of {result.context[b]['asked']}; "
                         f"new value absent {result.context_why[b]['new absent']}, old value "
                         f"unmarked {result.context_why[b]['old unmarked']})"
                         for b in budgets))
    for title, items in (("missed", result.missed), ("false", result.false),
                         ("as_of wrong", result.as_of_wrong),
                         ("restatements not kept as a source", result.unmerged),
                         *((f"wrong contexts at {b} tokens", result.context_wrong[b])
                           for b in budgets)):
        if items:
            lines.append(f"{title} ({len(items)}, first {min(examples, len(items))}):")
            lines += [f"  {x}" for x in items[:examples]]
    return "\n".join(lines)


def score_json(result: Score) -> dict[str, Any]:
    """The scores as JSON."""
    return {"precision": result.precision, "recall": result.recall, "ops": result.ops,
            "correct_ops": result.correct_ops,
            "expected": result.total("expected"), "found": result.total("found"),
            "as_of_ok": result.total("as_of_ok"),
            "kinds": {k: dict(v) for k, v in sorted(result.rows.items())},
            "restated": result.total("restated"), "merged": result.total("merged"),
            "missed": result.missed, "false": result.false, "as_of_wrong": result.as_of_wrong,
            "unmerged": result.unmerged,
            "context": {str(b): {"asked": c["asked"], "right": c["right"],
                                 "share": result.context_share(b),
                                 "new_absent": result.context_why[b]["new absent"],
                                 "old_unmarked": result.context_why[b]["old unmarked"]}
                        for b, c in sorted(result.context.items())},
            "context_wrong": {str(b): items for b, items in sorted(result.context_wrong.items())}}


def score_store(binary: str, store: Path, namespace: str, script: dict[str, Any],
                label: str = "", budgets: Iterable[int] = DEFAULT_BUDGETS,
                model: str = "hashing") -> Score:
    """Scores the memory of `namespace` in `store` against `script`, and the contexts of
    `trajwiki query` at `budgets` (none: no context measure)."""
    memory = read_memory(binary, store, namespace)
    budgets = list(budgets)
    ask = cli_ask(binary, store, namespace, model) if budgets else None
    return score(script, memory, cli_history(binary, store), label, ask, budgets)


# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------

# The environment of a build that would take the language-model path or another model: the probe
# measures the deterministic construction with the offline hashing model.
BUILD_ENV_DROPPED = ("TRAJWIKI_LLM_BASE_URL", "TRAJWIKI_LLM_MODEL", "TRAJWIKI_LLM_API_KEY",
                     "TRAJWIKI_MODEL")


def parse_seeds(text: str) -> list[int]:
    """`1,2,3` (or `1-5`) as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                seeds += range(int(lo), int(hi) + 1)
            else:
                seeds.append(int(part))
        except ValueError:
            raise ProbeError(f"--seeds {text!r}: {part!r} is not a seed (an integer) "
                             f"or a range like 1-5") from None
    if not seeds:
        raise ProbeError(f"--seeds {text!r}: no seeds")
    return seeds


def parse_budgets(text: str) -> list[int]:
    """`300,700` as a list of context budgets (whitespace tokens)."""
    budgets: list[int] = []
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise ProbeError(f"--budgets {text!r}: {part.strip()!r} is not a budget (a positive "
                             f"integer, whitespace tokens)")
        budgets.append(value)
    return budgets


def build_store(binary: str, conversation: Path, store: Path) -> None:
    """Ingests and builds `conversation` into the (new) store at `store` with the hashing model."""
    env = {k: v for k, v in os.environ.items() if k not in BUILD_ENV_DROPPED}
    cmd = [binary, "ingest", "--store", str(store), "--build", "--flush", "--model", "hashing",
           str(conversation)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    except OSError as e:
        raise ProbeError(f"--bin {binary!r}: cannot run it: {e}") from e
    if done.returncode != 0:
        raise ProbeError(f"`{' '.join(cmd)}` exited {done.returncode}: "
                         f"{done.stderr.strip()[-800:]}")


def run(binary: str, seeds: list[int], keep: Path | None, log: Callable[[str], None],
        phrasings: str = "base", budgets: Iterable[int] = DEFAULT_BUDGETS) -> Score:
    """Generates (in `phrasings`), builds and scores each seed; the scores added up."""
    budgets = list(budgets)
    if shutil.which(binary) is None and not Path(binary).is_file():
        raise ProbeError(f"--bin {binary!r}: no such program")
    total = Score()
    with tempfile.TemporaryDirectory(prefix="change-probe-") as tmp:
        root = keep if keep is not None else Path(tmp)
        for seed in seeds:
            work = root / f"seed-{seed}"
            if (work / "store").exists():
                raise ProbeError(f"--keep {str(root)!r}: {work / 'store'} exists already; "
                                 f"give an empty folder")
            conv, script_path = write_generated(seed, work, phrasings=phrasings)
            script = load_script(script_path)
            build_store(binary, conv, work / "store")
            result = score_store(binary, work / "store", script["namespace"], script,
                                 label=f"seed {seed}: ", budgets=budgets)
            contexts = "".join(f", context right at {b} {result.context[b]['right']}/"
                               f"{result.context[b]['asked']}" for b in budgets)
            log(f"seed {seed}: {result.total('expected')} changes, {result.ops} edit ops, "
                f"precision {result.precision:.3f}, recall {result.recall:.3f}, "
                f"as_of right {result.total('as_of_ok')}/{result.total('expected')}{contexts}")
            total.add(result)
    return total


def floors_met(result: Score, min_precision: float | None, min_recall: float | None,
               require_as_of: bool, min_context: float | None = None) -> list[str]:
    """The floors not met, said in words (empty: all met); `min_context` holds at every budget
    measured."""
    failed = []
    if min_context is not None:
        if not result.context:
            failed.append("--min-context given but no context measured")
        for b in sorted(result.context):
            if result.context_share(b) < min_context:
                failed.append(f"current-fact contexts at {b} tokens "
                              f"{result.context_share(b):.3f} < {min_context}")
    if min_precision is not None and result.precision < min_precision:
        failed.append(f"precision {result.precision:.3f} < {min_precision}")
    if min_recall is not None and result.recall < min_recall:
        failed.append(f"recall {result.recall:.3f} < {min_recall}")
    expected = result.total("expected")
    if require_as_of and result.total("as_of_ok") < expected:
        failed.append(f"as_of right for {result.total('as_of_ok')} of {expected} changes only")
    return failed


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1")
    return value


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
    g.add_argument("--phrasings", default="base",
                   help="base (the templates in this file), heldout (change_probe_heldout.py) or dev "
                        "(change_probe_dev.py)")
    sc = sub.add_parser("score", help="score a built store against a script")
    sc.add_argument("--bin", required=True, help="the trajwiki binary")
    sc.add_argument("--store", type=Path, required=True)
    sc.add_argument("--namespace", required=True)
    sc.add_argument("--script", type=Path, required=True)
    sc.add_argument("--json", action="store_true", help="print the scores as JSON")
    sc.add_argument("--budgets", default="300,700",
                    help="context budgets of the current-fact questions (default 300,700)")
    sc.add_argument("--no-context", action="store_true", help="ask no current-fact questions")
    sc.add_argument("--model", default="hashing",
                    help="the embedding model the store was built with (default hashing)")
    r = sub.add_parser("run", help="generate, build and score seeds")
    r.add_argument("--bin", required=True, help="the trajwiki binary")
    r.add_argument("--seeds", default="1,2,3", help="seeds: 1,2,3 or 1-5 (default 1,2,3)")
    r.add_argument("--min-precision", type=_fraction)
    r.add_argument("--min-recall", type=_fraction)
    r.add_argument("--require-as-of", action="store_true",
                   help="fail unless history --as-of is right for every change")
    r.add_argument("--min-context", type=_fraction,
                   help="floor of the share of right current-fact contexts, at every budget")
    r.add_argument("--phrasings", default="base",
                   help="base (the templates in this file), heldout (change_probe_heldout.py) or dev "
                        "(change_probe_dev.py)")
    r.add_argument("--budgets", default="300,700",
                   help="context budgets of the current-fact questions (default 300,700)")
    r.add_argument("--no-context", action="store_true", help="ask no current-fact questions")
    r.add_argument("--keep", type=Path, help="keep the conversations and stores in this folder")
    r.add_argument("--json", action="store_true", help="print the scores as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            conv, script = write_generated(args.seed, args.out, args.namespace, args.phrasings)
            print(f"wrote {conv} and {script}")
            return 0
        if args.command == "score":
            script = load_script(args.script)
            budgets = [] if args.no_context else parse_budgets(args.budgets)
            result = score_store(args.bin, args.store, args.namespace, script, budgets=budgets,
                                 model=args.model)
            print(json.dumps(score_json(result), indent=1) if args.json else format_score(result))
            return 0
        if args.phrasings not in PHRASINGS:
            raise ProbeError(f"--phrasings {args.phrasings!r}: expected one of "
                             f"{', '.join(PHRASINGS)}")
        if args.no_context and args.min_context is not None:
            raise ProbeError("--min-context with --no-context: no context is measured")
        budgets = [] if args.no_context else parse_budgets(args.budgets)
        result = run(args.bin, parse_seeds(args.seeds), args.keep,
                     (lambda line: print(line, file=sys.stderr)) if args.json else print,
                     args.phrasings, budgets)
        print(json.dumps(score_json(result), indent=1) if args.json else format_score(result))
        failed = floors_met(result, args.min_precision, args.min_recall, args.require_as_of,
                            args.min_context)
        if failed:
            print(f"change_probe: floors not met: {'; '.join(failed)}", file=sys.stderr)
            return 1
        return 0
    except ProbeError as e:
        print(f"change_probe: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
