"""Labelled retrieval-quality set for ctxslots: memory facts and queries.

    python benchmarks/_dataset.py          # verify every constraint, print a summary

Files (regenerate with ``python benchmarks/data/_make.py``):

- ``benchmarks/data/facts.jsonl``: one fact per line,
  ``{"id", "slot", "scope", "key", "value", "tags", "age_days"}``.
- ``benchmarks/data/queries.jsonl``: one query per line,
  ``{"id", "query", "scope", "relevant", "kind"}`` with kind ``paraphrase``
  (shares no content word with its relevant facts, see :func:`conflicts`),
  ``lexical`` or ``exact_token`` (paths, error strings, names, versions, ids).

A query with scope ``S`` is meant to be searched in scope ``S``: its relevant
facts are scoped ``S`` or global (scope ``None``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
FACTS_PATH = DATA / "facts.jsonl"
QUERIES_PATH = DATA / "queries.jsonl"

SLOTS = ("user", "project", "agent")
SCOPES = ("shop-api", "data-pipeline", "mobile-app")
KINDS = ("paraphrase", "lexical", "exact_token")

MIN_FACTS = 2000
MIN_QUERIES = 300
MIN_EXACT = 50

# NLTK's English stop-word list (the conservative one: fewer stop words means a
# stricter no-overlap rule for paraphrase queries).
STOP_WORDS = frozenset(
    """
    a about above after again against ain all am an and any are aren as at be
    because been before being below between both but by can couldn d did didn do
    does doesn doing don down during each few for from further had hadn has hasn
    have haven having he her here hers herself him himself his how i if in into is
    isn it its itself just ll m ma me mightn more most mustn my myself needn no nor
    not now o of off on once only or other our ours ourselves out over own re s same
    shan she should shouldn so some such t than that the their theirs them
    themselves then there these they this those through to too under until up ve
    very was wasn we were weren what when where which while who whom why will with
    won wouldn y you your yours yourself yourselves
    """.split()  # noqa: SIM905
)

_TOKEN = re.compile(r"[a-z0-9]+")


# --------------------------------------------------------------------------
# Porter stemmer (M. F. Porter, 1980), the original algorithm.
# --------------------------------------------------------------------------


def _cons(w: str, i: int) -> bool:
    c = w[i]
    if c in "aeiou":
        return False
    if c == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _m(stem: str) -> int:
    """Number of VC sequences in ``stem``."""
    n, i, L = 0, 0, len(stem)
    while i < L and _cons(stem, i):
        i += 1
    while i < L:
        while i < L and not _cons(stem, i):
            i += 1
        if i >= L:
            break
        while i < L and _cons(stem, i):
            i += 1
        n += 1
    return n


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    if len(w) < 3:
        return False
    return (
        _cons(w, len(w) - 3)
        and not _cons(w, len(w) - 2)
        and _cons(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


def _replace(w: str, rules, cond) -> str:
    for suf, rep in rules:
        if w.endswith(suf):
            stem = w[: len(w) - len(suf)]
            return stem + rep if cond(stem) else w
    return w


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def stem(word: str) -> str:
    """Porter-stem a lowercase token."""
    w = word
    if len(w) <= 2 or not w.isalpha():
        return w
    # step 1a
    if w.endswith(("sses", "ies")):
        w = w[:-2]
    elif w.endswith("ss"):
        pass
    elif w.endswith("s"):
        w = w[:-1]
    # step 1b
    flag = False
    if w.endswith("eed"):
        if _m(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, flag = w[:-2], True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, flag = w[:-3], True
    if flag:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _m(w) == 1 and _cvc(w):
            w += "e"
    # step 1c
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    # steps 2, 3
    w = _replace(w, _STEP2, lambda s: _m(s) > 0)
    w = _replace(w, _STEP3, lambda s: _m(s) > 0)
    # step 4
    for suf in sorted(_STEP4, key=len, reverse=True):
        if w.endswith(suf):
            s = w[: len(w) - len(suf)]
            if _m(s) > 1 and (suf != "ion" or s.endswith(("s", "t"))):
                w = s
            break
    # step 5
    if w.endswith("e"):
        s = w[:-1]
        if _m(s) > 1 or (_m(s) == 1 and not _cvc(s)):
            w = s
    if _m(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w


# --------------------------------------------------------------------------
# Content words and the paraphrase no-overlap rule
# --------------------------------------------------------------------------


def content_tokens(text: str) -> set[str]:
    """Lowercased alphanumeric tokens, stop words and 1-char tokens removed."""
    return {
        t for t in _TOKEN.findall(text.lower()) if len(t) >= 2 and t not in STOP_WORDS
    }


def _clash(a: str, b: str) -> bool:
    if a == b or stem(a) == stem(b):
        return True
    return len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5]


def fact_text(fact: dict) -> str:
    """Everything a store could index for a fact: value, key and tags."""
    return " ".join(
        [fact["value"], fact.get("key") or "", " ".join(fact.get("tags") or [])]
    )


def conflicts(query: str, fact: dict) -> list[tuple[str, str]]:
    """(query token, fact token) pairs that break the paraphrase rule.

    Two content tokens clash when they are equal, share a Porter stem, or both
    have at least five characters and share their first five.
    """
    q = content_tokens(query)
    f = content_tokens(fact_text(fact))
    return sorted((a, b) for a in q for b in f if _clash(a, b))


# --------------------------------------------------------------------------
# Loading and checking
# --------------------------------------------------------------------------


def _load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_facts() -> list[dict]:
    return _load(FACTS_PATH)


def load_queries() -> list[dict]:
    return _load(QUERIES_PATH)


def check(verbose: bool = True) -> dict:
    """Verify every constraint of the set; raise AssertionError listing all problems."""
    facts, queries = load_facts(), load_queries()
    errors: list[str] = []
    err = errors.append

    # facts
    by_id: dict[str, dict] = {}
    keys: Counter = Counter()
    values: Counter = Counter()
    for f in facts:
        fid = f.get("id")
        if set(f) != {"id", "slot", "scope", "key", "value", "tags", "age_days"}:
            err(f"{fid}: fields {sorted(f)}")
            continue
        if not isinstance(fid, str) or not re.fullmatch(r"f\d{4,}", fid):
            err(f"bad fact id {fid!r}")
        if fid in by_id:
            err(f"duplicate fact id {fid}")
        by_id[fid] = f
        if f["slot"] not in SLOTS:
            err(f"{fid}: slot {f['slot']!r}")
        if f["scope"] is not None and f["scope"] not in SCOPES:
            err(f"{fid}: scope {f['scope']!r}")
        if f["slot"] == "user" and f["scope"] is not None:
            err(f"{fid}: user facts are global")
        if f["slot"] == "project" and f["scope"] is None:
            err(f"{fid}: project facts need a scope")
        if f["key"] is not None:
            if not isinstance(f["key"], str) or not f["key"].strip():
                err(f"{fid}: key {f['key']!r}")
            keys[(f["slot"], f["scope"], f["key"])] += 1
        if not isinstance(f["value"], str) or not (10 <= len(f["value"]) <= 4096):
            err(f"{fid}: value length")
        values[f["value"]] += 1
        if not isinstance(f["tags"], list) or not all(
            isinstance(t, str) and t for t in f["tags"]
        ):
            err(f"{fid}: tags {f['tags']!r}")
        age = f["age_days"]
        if not isinstance(age, (int, float)) or not (0 <= age <= 400):
            err(f"{fid}: age_days {age!r}")
    for k, n in keys.items():
        if n > 1:
            err(f"key {k} used by {n} live facts")
    for v, n in values.items():
        if n > 1:
            err(f"value repeated {n}x: {v[:60]}")
    if len(facts) < MIN_FACTS:
        err(f"only {len(facts)} facts (< {MIN_FACTS})")

    # queries
    qids: set[str] = set()
    kinds: Counter = Counter()
    relevant_total = 0
    for q in queries:
        qid = q.get("id")
        if set(q) != {"id", "query", "scope", "relevant", "kind"}:
            err(f"{qid}: fields {sorted(q)}")
            continue
        if not isinstance(qid, str) or not re.fullmatch(r"q\d{3,}", qid):
            err(f"bad query id {qid!r}")
        if qid in qids:
            err(f"duplicate query id {qid}")
        qids.add(qid)
        kinds[q["kind"]] += 1
        if q["kind"] not in KINDS:
            err(f"{qid}: kind {q['kind']!r}")
        if q["scope"] is not None and q["scope"] not in SCOPES:
            err(f"{qid}: scope {q['scope']!r}")
        rel = q["relevant"]
        if (
            not isinstance(rel, list)
            or not (1 <= len(rel) <= 3)
            or len(set(rel)) != len(rel)
        ):
            err(f"{qid}: relevant {rel!r}")
            continue
        relevant_total += len(rel)
        if not content_tokens(q["query"]):
            err(f"{qid}: no content words")
        for fid in rel:
            f = by_id.get(fid)
            if f is None:
                err(f"{qid}: unknown fact {fid}")
                continue
            if f["scope"] is not None and f["scope"] != q["scope"]:
                err(f"{qid}: scope {q['scope']!r} but {fid} has scope {f['scope']!r}")
            if q["kind"] == "paraphrase":
                bad = conflicts(q["query"], f)
                if bad:
                    err(f"{qid}: paraphrase shares words with {fid}: {bad}")
            elif (
                q["kind"] == "lexical"
                and fid == rel[0]
                and not content_tokens(q["query"]) & content_tokens(fact_text(f))
            ):
                err(f"{qid}: lexical query shares no word with {fid}")
    n = len(queries)
    if n < MIN_QUERIES:
        err(f"only {n} queries (< {MIN_QUERIES})")
    if kinds["paraphrase"] * 3 < n:
        err(f"paraphrase {kinds['paraphrase']} < a third of {n}")
    if kinds["exact_token"] < MIN_EXACT:
        err(f"exact_token {kinds['exact_token']} < {MIN_EXACT}")

    if errors:
        raise AssertionError(f"{len(errors)} problems:\n" + "\n".join(errors[:200]))

    rel_ids = {fid for q in queries for fid in q["relevant"]}
    summary = {
        "facts": len(facts),
        "facts_by_slot": dict(Counter(f["slot"] for f in facts)),
        "facts_by_scope": dict(Counter(f["scope"] or "-" for f in facts)),
        "facts_with_key": sum(f["key"] is not None for f in facts),
        "relevant_facts": len(rel_ids),
        "queries": n,
        "queries_by_kind": dict(kinds),
        "queries_by_scope": dict(Counter(q["scope"] or "-" for q in queries)),
        "relevant_per_query": round(relevant_total / n, 2),
        "median_age_relevant": _median([by_id[i]["age_days"] for i in rel_ids]),
        "median_age_other": _median(
            [f["age_days"] for f in facts if f["id"] not in rel_ids]
        ),
    }
    if verbose:
        for k, v in summary.items():
            print(f"{k:22} {v}")
        print("OK")
    return summary


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return round(xs[len(xs) // 2], 1) if xs else 0.0


if __name__ == "__main__":
    try:
        check()
    except AssertionError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
