#!/usr/bin/env python3
"""Claims that state no fact, and item counts that count no thing, in a built store.

    python3 scripts/claim_hygiene.py BIN STORE [NAMESPACE ...] [--samples N]

BIN is the trajwiki binary, STORE a built store (a directory); the namespaces default to all of
the store's. Claims are read with `BIN export --what memory` (active claims only: the claim
records whose current status is `active`), speakers and refs from the store's SQLite file (read
only). Prints, per namespace and in total, the share of active claims that are requests,
invitations or chatter, a sample of each kind, and the junk counts on the wiki pages.

The rule (lexical, over the claim's text after its speaker prefix "Name: ", lower case, ’ as '):
S is the speaker of the claim's source message, A any other speaker of the namespace, NAME either
(a claim is written in the third person, so "you" reads A and "me" reads S). The body is cut into
clauses at ", ", " - ", " — ", "; ", "! ", ": ". The claim is counted when its first clause, or
its second when the first is a condition ("if …", "when …", "whenever …", "once …"), starts
(after "NAME ", "just", "so", "and", "but", "please", "really", "definitely") with one of:

- question: the claim ends with "?";
- request / invitation: "let's", "let us", "let NAME know", "let me know", "let NAME (see|hear|
  show|tell)", "would (you|A) (like|want|love|be up)", "do (you|A) want", "how about", "why don't",
  "feel free", "don't hesitate", "keep (me|S|us) (posted|updated|in the loop)", "hit me up",
  "count me in", "(you|A) (should|must|need to|have to|gotta|has to|ought to)", "we should",
  "S will let A know", or an imperative: "check out|check it|check this|try (it|this|that|one|
  some)|come (over|with|join|visit)|join (me|us|S)|tell (me|S|us)|send (me|S)|show (me|S)|
  give it a|go for it|take care|enjoy|have (fun|a (great|good|nice|blast|wonderful))|keep (it up|
  up|going|pushing|at it|rocking|shining|doing|on)|stay (strong|positive|safe|tuned)|don't (forget|
  give up|hesitate|worry|stop)|never give up|remember to|make sure|hang in there|look at";
- chatter: "can't wait", "cannot wait", "can not wait", "(S )?hope(s)? (you|A|it|that|things|
  everything|this|they|the|your|all|we)", "hopefully", "wish you", "good luck",
  "best of luck", "fingers crossed", "thank you", "thanks", "happy birthday", "congrats",
  "congratulations", "appreciate", "hi", "hey", "hello", "bye", "goodbye", "see you",
  "talk (soon|later)", "catch you".

A claim that reports such an act as a statement about the exchange — "S (invites|encourages|
asks|advises|suggests|thanks|congratulates|wishes|will see) A …", "S is eager …" — is counted
apart ("reported") and not in the share: it states what happened ("Tim congratulates John on
the new team", "Jon invites Gina to go to a dance class"), as LoCoMo's annotated observations do
("Maria congratulated John on finishing his degree"). Its count is printed beside the share.

Junk counts: the "N word …" entries of the pages' "Items and counts" sections (each entry once
per namespace) that are a count of one (a "one" is an article or a pronoun far more often than a
count: "one arm", "one another") or whose last word (the head: "3 small dogs" counts dogs) is no
noun: a function word, an adjective, adverb or verb form of a closed list ("small", "new",
"obviously", "gave"), a word ending in -ly, -ing or -ed, or a speaker's name.
"""

from __future__ import annotations

import collections
import json
import random
import re
import sqlite3
import subprocess
import sys

CLAUSE = re.compile(r",\s+|\s+[-—–]+\s+|;\s+|!\s+|:\s+|\.\s+")
CONDITION = ("if ", "when ", "whenever ", "once ", "in case ")
LEAD = ("just ", "so ", "and ", "but ", "please ", "really ", "definitely ", "also ", "oh ")


def alt(words):
    return "(?:" + "|".join(re.escape(w) for w in words) + ")"


def patterns(speaker: str, others: list[str]):
    s = re.escape(speaker)
    a = alt(others) if others else "(?!x)x"
    name = f"(?:{s}|{a})"
    request = [
        r"let'?s\b",
        r"let us\b",
        rf"let (?:me|us|{name}) knows?\b",
        rf"let (?:me|{name}) (?:see|hear|show|tell)\b",
        rf"would (?:you|{a}) (?:like|want|love|be up)\b",
        rf"do (?:you|{a}) want\b",
        r"how about\b",
        r"why don'?t\b",
        r"feel free\b",
        r"don'?t hesitate\b",
        rf"keep (?:me|us|{s}) (?:posted|updated|in the loop)\b",
        r"hit me up\b",
        r"count me in\b",
        rf"(?:you|{a}) (?:really |definitely |totally |just )?(?:should|must|need to|needs to|have to|has to|gotta|ought to)\b",
        r"we should\b",
        rf"{s} (?:will|'ll) (?:definitely |totally |surely )?let (?:you|{a}) knows?\b",
        r"(?:check out|check it|check this|check these|check their|try (?:it|this|that|one|some)|"
        r"come (?:over|with|join|visit|see)|join (?:me|us|" + s + r")|tell (?:me|us|" + s + r")|"
        r"send (?:me|" + s + r")|show (?:me|" + s + r")|give it a|go for it|take care|enjoy\b|"
        r"have (?:fun|a (?:great|good|nice|blast|wonderful))|"
        r"keep (?:it up|up|going|pushing|at it|rocking|shining|doing|on)|"
        r"stay (?:strong|positive|safe|tuned)|don'?t (?:forget|give up|hesitate|worry|stop)|"
        r"never give up|remember to|make sure|hang in there|look at)\b",
    ]
    chatter = [
        r"(?:can'?t|cannot|can not) wait\b",
        rf"(?:{name} )?(?:really )?hopes? (?:you|{a}|it|that|things|everything|this|they|the|your|all|we)\b",
        r"hopefully\b",
        r"wish you\b",
        r"good luck\b",
        r"best of luck\b",
        r"fingers crossed\b",
        rf"thank (?:you|{a})\b",
        r"thanks\b",
        r"happy birthday\b",
        r"congrats\b",
        r"congratulations\b",
        r"appreciate\b",
        r"(?:hi|hey|hello|bye|goodbye)\b",
        r"see you\b",
        r"talk (?:soon|later)\b",
        r"catch you\b",
    ]
    subject = rf"(?:{name} )?"
    interjection = {r"thanks\b", r"congrats\b", r"congratulations\b", r"appreciate\b"}
    reported = re.compile(
        rf"{s} (?:invites|encourages|asks|advises|suggests|thanks|congratulates|wishes|will see|"
        r"is eager)\b"
    )
    return (
        [re.compile(subject + p) for p in request],
        [re.compile(p if p in interjection else subject + p) for p in chatter],
        reported,
    )


def body_of(text: str) -> str:
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) <= 40 else text


def clause_starts(body: str):
    clauses = [c.strip() for c in CLAUSE.split(body) if c.strip()]
    if not clauses:
        return []
    out = [clauses[0]]
    if clauses[0].startswith(CONDITION) and len(clauses) > 1:
        out.append(clauses[1])
    fixed = []
    for c in out:
        changed = True
        while changed:
            changed = False
            for lead in LEAD:
                if c.startswith(lead):
                    c = c[len(lead):]
                    changed = True
        fixed.append(c)
    return fixed


def kind(text: str, speaker: str, others: list[str]):
    """'question', 'request', 'chatter', 'reported' or None for one claim text."""
    t = text.replace("’", "'").strip()
    if t.rstrip("\"') ").endswith("?"):
        return "question"
    low = body_of(t).lower()
    request, chatter, reported = patterns(speaker.lower(), [o.lower() for o in others])
    if reported.match(low):
        return "reported"
    for c in clause_starts(low):
        if any(p.match(c) for p in request):
            return "request"
        if any(p.match(c) for p in chatter):
            return "chatter"
    return None


NOT_NOUN = set(
    """a an the of to in on at for and or but is are was were be been it that this so just really
    too also very with my your our his her their me us them you i we they he she per else another
    enough other others more most less few many much some any all each every both same whole own
    small little big large huge tiny new old young younger older great good best better bad nice
    beautiful lovely special simple extra positive negative right left last next first second third
    different main whole quick long short white black red blue green yellow brown pink purple
    gorgeous amazing awesome wonderful fantastic happy sad cute sweet fun funny cool hot cold warm
    soon someday sometimes today tomorrow yesterday now then ago later again always never ever
    obviously actually really maybe almost about behind above around over under after before
    agree gave got made did said went came took had has have do does get give make take go see
    love loves like likes replied told thought know knew""".split()
)


def junk_count(entry: str, names: set[str]) -> bool:
    parts = entry.split()
    if len(parts) < 2 or not parts[0].isdigit():
        return False
    if parts[0] == "1":
        return True
    w = parts[-1].lower()
    return (
        w in NOT_NOUN
        or w in names
        or w.endswith(("ly", "ing", "ed"))
        or not w.isalpha()
    )


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    nsamples = 4
    if "--samples" in argv:
        nsamples = int(argv[argv.index("--samples") + 1])
        args.remove(str(nsamples))
    if len(args) < 2:
        print(__doc__)
        return 2
    binary, store, wanted = args[0], args[1], args[2:]
    db = sqlite3.connect(f"file:{store}/trajwiki.db?mode=ro", uri=True)
    spaces = wanted or [r[0] for r in db.execute("select id from namespaces order by id")]
    total = collections.Counter()
    junk_total = collections.Counter()
    rnd = random.Random(7)
    for ns in spaces:
        rows = db.execute(
            "select id, speaker, external_ref from messages where namespace=?", (ns,)
        ).fetchall()
        speaker_of = {i: s for i, s, _ in rows}
        ref_of = {i: r for i, _, r in rows}
        speakers = sorted({s for _, s, _ in rows})
        names = {s.lower() for s in speakers}
        out = subprocess.run(
            [binary, "export", "--store", store, "--namespace", ns, "--what", "memory"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found = collections.defaultdict(list)
        active = 0
        counts = set()
        for line in out.splitlines():
            r = json.loads(line)
            if r.get("record") == "claim" and r.get("current_status") == "active":
                v = r["value"]
                active += 1
                src = v["source_message_ids"][0] if v["source_message_ids"] else None
                sp = speaker_of.get(src, "")
                k = kind(v["text"], sp, [s for s in speakers if s != sp])
                if k:
                    found[k].append(f"{ref_of.get(src)}  {v['text']}")
            elif r.get("record") == "page":
                body = r["value"]["body"]
                if "## Items and counts" in body:
                    sec = body.split("## Items and counts", 1)[1].split("\n## ", 1)[0]
                    for l in sec.splitlines():
                        m = re.match(r"- (.+) ×\d+$", l.strip())
                        if m and re.match(r"\d+ ", m.group(1)):
                            counts.add(m.group(1))
        bad = sorted(c for c in counts if junk_count(c, names))
        n = sum(len(v) for k, v in found.items() if k != "reported")
        per = ", ".join(
            f"{k} {len(found[k])}" for k in ("request", "chatter", "question", "reported")
        )
        print(
            f"{ns}: {active} active claims, {n} requests/invitations/chatter "
            f"({n / max(1, active):.2%}: {per}); counts {len(counts)}, junk {len(bad)} "
            f"({len(bad) / max(1, len(counts)):.0%})"
        )
        for k in ("request", "chatter", "question", "reported"):
            for t in rnd.sample(found[k], min(nsamples, len(found[k]))):
                print(f"   {k}: {t}")
        if bad:
            print(f"   junk counts: {', '.join(bad[:12])}")
        total["active"] += active
        total["n"] += n
        for k, v in found.items():
            total[k] += len(v)
        junk_total["counts"] += len(counts)
        junk_total["junk"] += len(bad)
    print(
        f"ALL: {total['active']} active claims, {total['n']} requests/invitations/chatter "
        f"({total['n'] / max(1, total['active']):.2%}: request {total['request']}, chatter "
        f"{total['chatter']}, question {total['question']}; reported apart "
        f"{total['reported']}); counts {junk_total['counts']}, "
        f"junk {junk_total['junk']} ({junk_total['junk'] / max(1, junk_total['counts']):.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
