"""Hostile input: generated arguments for every MCP tool must never crash the server or leave a partial write.

Two ways in:

* In memory: the real server object from ``build_server`` behind the MCP SDK's in-memory transport,
  driven by the SDK client (``Client(server, mode="legacy")``: an initialize handshake, then one
  JSON-RPC ``tools/call`` per case, validated by the SDK on both sides). Hypothesis generates, per
  tool, calls that mix valid arguments with hostile ones: wrong JSON types, missing and extra
  fields, huge strings, NUL characters, lone surrogates, FTS5 syntax, SQL-looking text, negative
  and enormous numbers, bools for numbers, unknown ids and names, deeply nested lists and objects.
* Over stdio: the installed ``yourmemory`` command in a subprocess, fed raw JSON-RPC lines, for
  what no SDK client can send: invalid UTF-8, ``\\ud800`` escapes, nesting 10,000 deep, raw NUL
  bytes, NaN and Infinity, truncated and malformed messages.

Invariants checked for every case:

* the call is answered and the server keeps serving the next one;
* an error is a clear message: no traceback, not a bare "Error executing tool X", and it names the
  field (the offending one where the cause is unambiguous);
* a rejected call leaves the database exactly as it was (every table, hashed row by row);
* a call whose arguments break the documented contract is rejected, one that keeps it is not;
* an accepted call returns well-formed structured content (the SDK client checks it against the
  tool's output schema, and the text block must be the same JSON); a read-only tool writes nothing.

Every in-memory case starts from the same seeded database (restored with SQLite's backup API), so
a failure replays and shrinks deterministically.

The default run does a few hundred cases. ``YOURMEMORY_LONG_TESTS=1`` adds the long run
(``-m long``): >= 10,000 generated cases; ``YOURMEMORY_HOSTILE_EXAMPLES`` sets the examples per
tool of that run (default 600), ``YOURMEMORY_HOSTILE_SHORT_EXAMPLES`` those of the default run.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import re
import shutil
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import installed_entry_point
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import yourmemory
from yourmemory import YourMemory, build_server

LONG = os.environ.get("YOURMEMORY_LONG_TESTS") == "1"
SHORT_EXAMPLES = int(os.environ.get("YOURMEMORY_HOSTILE_SHORT_EXAMPLES", "14"))
LONG_EXAMPLES = int(os.environ.get("YOURMEMORY_HOSTILE_EXAMPLES", "600"))
STDIO_SHORT_EXAMPLES = 10
STDIO_LONG_EXAMPLES = 300
LONG_TOTAL = 10_000
CALL_LIMIT_S = 120          # a hang guard, not a timing assertion
long_only = pytest.mark.skipif(not LONG, reason="long run: set YOURMEMORY_LONG_TESTS=1")
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.large_base_example, HealthCheck.function_scoped_fixture]

USER = "ada"
MAX_CONTENT = yourmemory.MAX_CONTENT_CHARS
MAX_QUERY = yourmemory.MAX_QUERY_CHARS
MAX_NAME = yourmemory.MAX_NAME_CHARS
MAX_USER = 128
MAX_TOP_K = yourmemory.MAX_TOP_K
READ_ONLY_TOOLS = {"read_graph", "search_nodes", "open_nodes", "find_similar_errors", "get_lesson_recommendations"}
CASES: Counter = Counter()  # tool (or "stdio") -> cases run in this session


# ============================================================================
# Hostile values
# ============================================================================

STATEMENTS = [
    "The build uses Bazel", "Ada prefers green tea in the afternoon", "The office moved to Berlin in 2024",
    "Deploys happen on Friday mornings", "The API allows 100 requests per minute",
    "The CI runner has 4 GB of memory", "Backups are kept for 30 days", "The staging database is MySQL 8",
]
QUESTIONS = ["Which database do we use?", "Where does the deploy script live?", "what is the port"]
FTS_SYNTAX = [
    '"foo" NEAR/2 bar*', "AND OR NOT (", "^", "foo*", '"unterminated', "NEAR(a b, 3)", "{content}: x",
    "content: deploy", "-minus +plus", "a OR b AND NOT c", ")(", "*", '"" ""', "NOT", "col:val", "'", '"',
    "memory_fts MATCH 'x'", "deploy^ script",
]
SQL_LIKE = [
    "'); DROP TABLE memories;--", "1; DELETE FROM entities", "' OR '1'='1", "Robert'); DROP TABLE students;--",
    "%' UNION SELECT key_hash FROM agents --", "/* c */ SELECT 1", "%_%", "json_each('[1]')",
    "PRAGMA user_version = 99", "x'00'", "?1 ?2 :name @p $v", "); ATTACH DATABASE '/tmp/x' AS x;--",
]
ODD_TEXT = [
    "\u202eevil right-to-left", "zero\u200bwidth", "e\u0301\u0301\u0301 combining", "\U0001F600 emoji \U0001F9E0",
    "tab\tnew\nline\r\n", "\u2028line separator", "\x01\x02\x7f control", "\ufeffBOM first",
    "\uffff noncharacter", "\U0001D573\U0001D58A\U0001D591", "\ufdfa", "\U0010FFFF last code point",
    "\\u0000 escaped-looking", "\\ud800 escaped-looking", "ym_" + "A" * 43,
]
SURROGATES = ["\ud800", "\udfff", "\udc00", "\ud83d"]
HUGE_SIZES = [1, 2, 1_000, 1_000_000]  # characters over a limit


def _deep(depth: int, kind: str, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


# The SDK client serializes a request with pydantic, whose depth limit is about 250 levels; deeper
# nesting is sent over stdio below.
deep_values = st.builds(_deep, st.integers(2, 150), st.sampled_from(["list", "dict"]))
WRONG_TYPES = [None, True, False, 0, -1, 1.5, "text", "", [], {}, ["x"], {"k": "v"}, [[["x"]]]]


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "list" if isinstance(value, list) else "dict"


def wrong_types(*allowed: str):
    return st.one_of(st.sampled_from([v for v in WRONG_TYPES if json_type(v) not in allowed]), deep_values)


# ============================================================================
# Generated arguments: value + which paths break the contract + whether a valid value may still fail
# ============================================================================


@dataclass
class Gen:
    """A generated value. ``bad``: paths (relative) whose values break the documented contract, so the
    call must be rejected. ``risky``: the value keeps the contract but may still be refused for a
    reason the generator cannot know (an unknown id, a question, a name already taken, a key's rights)."""
    value: Any
    bad: list = field(default_factory=list)
    risky: bool = False


def _at(prefix, gen: Gen) -> Gen:
    return Gen(gen.value, [(prefix, *p) for p in gen.bad], gen.risky)


class Kind:
    nullable = False

    def valid(self):
        raise NotImplementedError

    def hostile(self):
        raise NotImplementedError

    def wrong(self, *allowed):
        return wrong_types(*allowed).map(lambda v: Gen(v, [] if (v is None and self.nullable) else [()]))


class Text(Kind):
    """A string with a length limit; NUL characters and lone surrogates are never valid, nor is a blank
    string unless ``blank_ok``. ``question`` marks text that store_memory refuses if it reads as a question."""

    def __init__(self, limit: int, *, blank_ok: bool = False, nullable: bool = False, question: bool = False,
                 pool=STATEMENTS, user: bool = False, empty_ok: bool = False):
        self.limit, self.blank_ok, self.nullable, self.question = limit, blank_ok, nullable, question
        self.pool, self.user, self.empty_ok = pool, user, empty_ok  # empty_ok: "" is valid, "  " is not

    def judge(self, text: str) -> Gen:
        bad = ("\x00" in text or any("\ud800" <= c <= "\udfff" for c in text) or len(text) > self.limit
               or (not self.blank_ok and not text.strip() and not (self.empty_ok and text == ""))
               or (self.user and any(ord(c) < 32 for c in text)))
        return Gen(text, [()] if bad else [], risky=self.question and not bad)

    def valid(self):
        plain = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=40)
        plain = plain.filter(lambda s: s.strip())
        return st.one_of(st.sampled_from(self.pool).map(lambda s: Gen(s)),
                         plain.map(lambda s: Gen(s, risky=self.question)))

    def hostile(self):
        limit = self.limit
        fill = st.sampled_from(["a", "word ", "\u00e9", "\U0001F600", " "])
        huge = st.builds(lambda n, c: (c * (limit + n))[: limit + n], st.sampled_from(HUGE_SIZES), fill)
        at_limit = st.builds(lambda c: (c * limit)[:limit], st.sampled_from(["a", "x"]))
        spliced = st.builds(lambda base, odd, where: base[:where] + odd + base[where:],
                            st.sampled_from(STATEMENTS), st.sampled_from(["\x00"] + SURROGATES),
                            st.integers(0, 10))
        texts = st.one_of(
            st.sampled_from(["", " ", "   \t\n", "\x00", "\u3000\u2003", " " * (limit + 1)] + SURROGATES),
            spliced, huge, at_limit,
            st.sampled_from(FTS_SYNTAX + SQL_LIKE + ODD_TEXT + QUESTIONS),
            st.text(min_size=0, max_size=30),  # anything but surrogates: NUL, controls, blanks
        )
        return st.one_of(texts.map(self.judge), self.wrong("str"))


class Choice(Kind):
    """One of a fixed set of strings (a Literal in the schema)."""

    def __init__(self, values, *, nullable: bool = False, risky=()):
        self.values, self.nullable, self.risky = list(values), nullable, set(risky)

    def valid(self):
        return st.sampled_from(self.values).map(lambda v: Gen(v, risky=v in self.risky))

    def hostile(self):
        near = [v.upper() for v in self.values] + [v + " " for v in self.values] + ["", "opinion", "\x00"]
        return st.one_of(st.sampled_from(near + SQL_LIKE[:3]).map(lambda v: Gen(v, [] if v in self.values else [()])),
                         self.wrong("str"))


class Integer(Kind):
    """A strict JSON integer in [lo, hi] (hi None: no upper bound); bools and floats are not integers."""

    def __init__(self, lo: int, hi: int | None = None, *, nullable: bool = False):
        self.lo, self.hi, self.nullable = lo, hi, nullable

    def judge(self, value: Any) -> Gen:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= self.lo and (
            self.hi is None or value <= self.hi)
        return Gen(value, [] if ok or (value is None and self.nullable) else [()])

    def valid(self):
        return st.integers(self.lo, self.hi if self.hi is not None else self.lo + 50).map(self.judge)

    def hostile(self):
        edges = [self.lo - 1, -1, 0, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -(10**30), 10**4000]
        if self.hi is not None:
            edges += [self.hi, self.hi + 1]
        numbers = st.one_of(st.sampled_from(edges), st.integers(), st.integers(min_value=2**62),
                            st.sampled_from([1.0, 0.5, -0.0, 1e300, -1e300, 5e-324, 100.0]))
        return st.one_of(numbers.map(self.judge), self.wrong("int", "float"))


class Fraction(Kind):
    """A JSON number in [0, 1] (importance); an integer 0 or 1 is a number too, a bool is not."""

    def __init__(self, *, nullable: bool = False):
        self.nullable = nullable

    @staticmethod
    def judge(value: Any) -> Gen:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            ok = ok and 0.0 <= float(value) <= 1.0
        except OverflowError:
            ok = False
        return Gen(value, [] if ok else [()])

    def valid(self):
        return st.one_of(st.floats(0, 1), st.sampled_from([0, 1, 0.0, 1.0, -0.0])).map(self.judge)

    def hostile(self):
        # NaN and Infinity are not JSON: the SDK client sends them as null, so they go over stdio below.
        numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(),
                            st.sampled_from([1.0000001, -1e-9, 2, -1, 10**30, 10**4000, 5e-324, 1e308]))
        return st.one_of(numbers.map(self.judge), self.wrong("int", "float"))


class Boolean(Kind):
    def valid(self):
        return st.booleans().map(Gen)

    def hostile(self):
        return st.one_of(st.sampled_from([0, 1, "true", "false", 1.0]).map(lambda v: Gen(v, [()])),
                         self.wrong("bool"))


class Ref(Kind):
    """A name or id that must already exist: from the seeded data (maybe deleted meanwhile) or unknown."""

    def __init__(self, inner: Kind, known):
        self.inner, self.known = inner, known

    def valid(self):
        return st.one_of(st.sampled_from(self.known), self.inner.valid().map(lambda g: g.value)).map(
            lambda v: Gen(v, risky=True))

    def hostile(self):
        return self.inner.hostile().map(lambda g: Gen(g.value, g.bad, risky=not g.bad))


class ApiKey(Kind):
    """None (act as the user) or a key; any string that is not an active key must be refused."""
    nullable = True

    def __init__(self, keys: dict):
        self.keys = keys

    def valid(self):
        return st.one_of(st.just(Gen(None)), st.sampled_from(["full", "reader", "bob"]).map(
            lambda name: Gen(self.keys[name], risky=True)))

    def hostile(self):
        made_up = st.one_of(st.sampled_from(["", "ym_", "ym_not_a_key", "YM_", self.keys["revoked"],
                                             self.keys["full"] + " ", " " + self.keys["full"],
                                             self.keys["full"][:-1], self.keys["full"] + "\x00",
                                             self.keys["full"].upper(), "\ud800"] + SQL_LIKE),
                            st.text(max_size=60))
        return st.one_of(made_up.map(lambda v: Gen(v, [()])), self.wrong("str"))


class ListOf(Kind):
    def __init__(self, item: Kind, *, max_size: int = 3, long_ok: bool = False):
        self.item, self.max_size, self.long_ok = item, max_size, long_ok

    @staticmethod
    def collect(gens: list[Gen]) -> Gen:
        return Gen([g.value for g in gens], [p for i, g in enumerate(gens) for p in _at(i, g).bad],
                   any(g.risky for g in gens))

    def valid(self):
        return st.lists(self.item.valid(), max_size=self.max_size).map(self.collect)

    def hostile(self):
        def splice(valid: list[Gen], bad: Gen, where: int) -> Gen:
            where = min(where, len(valid))
            return self.collect(valid[:where] + [bad] + valid[where:])
        options = [
            self.wrong("list"),
            st.builds(splice, st.lists(self.item.valid(), max_size=self.max_size), self.item.hostile(),
                      st.integers(0, self.max_size)),
            st.integers(2, 150).map(lambda d: Gen([_deep(d, "list")], [(0,)])),
        ]
        if self.long_ok:  # many valid items at once
            options.append(st.builds(lambda g, n: self.collect([g] * n), self.item.valid(), st.integers(100, 2_000)))
        return st.one_of(*options)


class Obj(Kind):
    """A JSON object with required and optional keys (a TypedDict in the schema). An unknown key breaks
    the contract unless the object is ``open`` (lesson metadata keeps the client's own keys)."""

    def __init__(self, required: dict[str, Kind], optional: dict[str, Kind] | None = None, open: bool = False):
        self.required, self.optional, self.open = required, optional or {}, open

    def _build(self, draw, hostile_keys: set[str]) -> Gen:
        value, bad, risky = {}, [], False
        for key, kind in {**self.required, **self.optional}.items():
            if key in hostile_keys:
                if key in self.required and draw(st.integers(0, 4)) == 0:
                    bad.append((key,))  # missing
                    continue
                gen = draw(kind.hostile())
            elif key in self.optional and draw(st.booleans()):
                continue
            else:
                gen = draw(kind.valid())
            value[key] = gen.value
            bad += _at(key, gen).bad
            risky |= gen.risky
        return Gen(value, bad, risky)

    def valid(self):
        return st.composite(lambda draw: self._build(draw, set()))()

    def hostile(self):
        keys = sorted({**self.required, **self.optional})

        @st.composite
        def mutated(draw):
            gen = self._build(draw, draw(st.sets(st.sampled_from(keys), min_size=1, max_size=2)))
            if draw(st.integers(0, 5)) == 0:  # an unknown key, possibly hostile itself
                key = draw(st.sampled_from(["extra", "__proto__", "", "name ", "\x00"]))
                gen.value[key] = draw(st.one_of(st.sampled_from(WRONG_TYPES), deep_values))
                if not self.open and key not in {**self.required, **self.optional}:
                    gen.bad.append((key,))
            return gen
        return st.one_of(mutated(), self.wrong("dict"),
                         st.integers(2, 150).map(lambda d: Gen(_deep(d, "dict"), [(k,) for k in self.required])))


class Omittable(Kind):
    """An optional argument that is usually left out (None is its default)."""
    nullable = True

    def __init__(self, inner: Kind):
        self.inner = inner

    def valid(self):
        return st.one_of(st.just(Gen(None)), self.inner.valid().map(lambda g: Gen(g.value, g.bad, True)))

    def hostile(self):
        return self.inner.hostile().map(lambda g: Gen(g.value, g.bad, risky=not g.bad))


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**4000), max_value=10**4000),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
                        st.sampled_from(SQL_LIKE + FTS_SYNTAX + ["x\x00y", "\ud800", "a" * 20_000]))


class AnyObject(Kind):
    """dict[str, Any]: any JSON object is valid (the lesson metadata's environment)."""

    def valid(self):
        tree = st.recursive(JSON_LEAVES, lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)
        deep = st.integers(2, 120).map(lambda d: _deep(d, "dict"))
        pointed = st.sampled_from([{"os": "\ud800"}, {"path": ["ok", {"x": "C:\\\udfff"}]}, {"nul": "x\x00y"},
                                   {"big": 10**4000}, {"": None}, {"sql": SQL_LIKE[0]}, {"deep": _deep(120, "list")}])
        # A lone surrogate is not valid JSON text; whether to store or refuse it is the server's choice.
        return st.one_of(pointed, st.dictionaries(st.text(max_size=10), st.one_of(tree, deep), max_size=4)).map(
            lambda v: Gen(v, risky=True))

    def hostile(self):
        return self.wrong("dict")


# ============================================================================
# The seeded database and the tools' argument specs
# ============================================================================

SEED_MEMORIES = [
    "The deploy script lives in tools/deploy.sh", "Ada prefers dark roast coffee",
    "The staging server listens on port 8080", "The project database is Postgres 15",
    "The project database is Postgres 16",  # supersedes the one before
]
SEED_ENTITIES = [
    {"name": "Ada", "entityType": "person", "observations": ["likes dark roast coffee", "works remotely"]},
    {"name": "YourMemory", "entityType": "project", "observations": ["stores memories in SQLite"]},
    {"name": "SQLite", "entityType": "database", "observations": []},
]
SEED_RELATIONS = [{"from": "Ada", "to": "YourMemory", "relationType": "works_on"},
                  {"from": "YourMemory", "to": "SQLite", "relationType": "uses"}]
SEED_LESSONS = [
    {"name": "deploy-timeout", "entityType": "lesson", "observations": ["raise the deploy timeout to 10 minutes"],
     "errorPattern": {"type": "TimeoutError", "message": "deploy timed out after 300s", "context": "deploy.sh"},
     "metadata": {"severity": "high", "environment": {"os": "linux"}},
     "verificationSteps": [{"command": "./deploy.sh --dry-run", "expectedOutput": "ok",
                            "successIndicators": ["ok"]}]},
    {"name": "disk-full", "entityType": "lesson", "observations": ["clean the docker cache"],
     "errorPattern": {"type": "OSError", "message": "No space left on device", "context": "CI runner"},
     "verificationSteps": []},
]


@dataclass
class Seed:
    path: Path
    keys: dict
    memory_ids: list
    entity_names: list
    lesson_names: list


@pytest.fixture(scope="session")
def seed(tmp_path_factory, embedder) -> Seed:
    """One seeded database per session; every case starts from a copy of it."""
    return make_seed(tmp_path_factory.mktemp("hostile-seed") / "seed.db", embedder)


def make_seed(path: Path, embedder) -> Seed:
    with YourMemory(path, user=USER, embedder=embedder) as memory:
        for text in SEED_MEMORIES:
            memory.store(text, 0.7)
        keys = {"full": memory.register_agent("bot")["api_key"],
                "reader": memory.register_agent("reader", can_read=["shared"], can_write=["private"])["api_key"],
                "revoked": memory.register_agent("gone")["api_key"],
                "bob": memory.register_agent("helper", user_id="bob")["api_key"]}
        memory.revoke_agent("gone")
        memory.store("The bot keeps its scratch notes in /tmp/bot", api_key=keys["full"], visibility="private")
        memory.graph.create_entities(SEED_ENTITIES)
        memory.graph.create_relations(SEED_RELATIONS)
        for lesson in SEED_LESSONS:
            memory.lessons.create_lesson(lesson)
        ids = [row[0] for row in memory.db.execute("SELECT id FROM memories ORDER BY id")]
    return Seed(path, keys, ids, [e["name"] for e in SEED_ENTITIES] + [l["name"] for l in SEED_LESSONS],
                [l["name"] for l in SEED_LESSONS])


def tool_specs(seed: Seed) -> dict[str, tuple[dict[str, Kind], set[str]]]:
    """Per tool: its arguments and which of them are required."""
    content = Text(MAX_CONTENT)
    name = Text(MAX_NAME, pool=[e["name"] for e in SEED_ENTITIES] + ["Postgres", "Bazel", "deploy"])
    known = Ref(name, seed.entity_names)
    observation = Text(MAX_CONTENT, pool=["likes dark roast coffee", "uses WAL mode", "runs on port 8080"])
    memory_id = Ref(Integer(1), seed.memory_ids)
    who = {"user_id": Omittable(Text(MAX_USER, nullable=True, user=True,
                                    pool=["ada", "ADA", " ada ", "bob", "team-42"])),
           "api_key": ApiKey(seed.keys)}
    relation = Obj({"from": known, "to": known, "relationType": name})
    loose_relation = Obj({"from": name, "to": name, "relationType": name})
    # An error's type is a name; its message and context are text, as a memory (real messages run long).
    error_text = Text(MAX_CONTENT, pool=["deploy timed out after 300s", "No space left on device", "CI runner"])
    error_pattern = Obj({"type": name, "message": error_text, "context": error_text},
                        {"stackTrace": Text(MAX_CONTENT)})
    lesson = Obj({
        "name": Ref(name, seed.lesson_names + ["Ada", "brand-new-lesson"]),
        "entityType": Choice(["lesson"]),
        "observations": ListOf(observation),
        "errorPattern": error_pattern,
        "verificationSteps": ListOf(Obj({"command": error_text, "expectedOutput": Text(MAX_CONTENT, empty_ok=True),
                                         "successIndicators": ListOf(observation)}), max_size=2),
    }, {"metadata": Obj({}, {"severity": Choice(yourmemory.SEVERITIES), "environment": AnyObject()}, open=True)})
    limit = Integer(1, MAX_TOP_K)
    return {
        "store_memory": ({"content": Text(MAX_CONTENT, question=True), "importance": Fraction(),
                          "category": Choice(yourmemory.CATEGORIES, nullable=True),
                          "visibility": Choice(["shared", "private"], risky={"private"}), **who}, {"content"}),
        "recall_memory": ({"query": Text(MAX_QUERY), "top_k": limit, **who}, {"query"}),
        "update_memory": ({"memory_id": memory_id, "new_content": content, "importance": Fraction(nullable=True),
                           **who}, {"memory_id", "new_content"}),
        "forget_memory": ({"memory_id": memory_id, **who}, {"memory_id"}),
        "restore_memory": ({"memory_id": memory_id, **who}, {"memory_id"}),
        "create_entities": ({"entities": ListOf(Obj({"name": name, "entityType": name,
                                                     "observations": ListOf(observation)})), **who}, {"entities"}),
        "create_relations": ({"relations": ListOf(relation), **who}, {"relations"}),
        "add_observations": ({"observations": ListOf(Obj({"entityName": known, "contents": ListOf(observation)})),
                              **who}, {"observations"}),
        "delete_entities": ({"entityNames": ListOf(name, max_size=4, long_ok=True), **who}, {"entityNames"}),
        "delete_observations": ({"deletions": ListOf(Obj({"entityName": name, "observations": ListOf(observation)})),
                                 **who}, {"deletions"}),
        "delete_relations": ({"relations": ListOf(loose_relation), **who}, {"relations"}),
        # offset and limit are SQLite integers: above 2**63 - 1 they are refused, naming the field
        "read_graph": ({"offset": Integer(0, 2**63 - 1), "limit": Integer(1, 2**63 - 1, nullable=True), **who},
                       set()),
        "search_nodes": ({"query": Text(MAX_QUERY, blank_ok=True, pool=["coffee", "Ada", "sqlite", ""]),
                          "limit": Integer(0, MAX_TOP_K), **who}, {"query"}),
        "open_nodes": ({"names": ListOf(name, max_size=4, long_ok=True), **who}, {"names"}),
        "create_lesson": ({"lesson": lesson, **who}, {"lesson"}),
        "update_lesson_success": ({"lessonName": Ref(name, seed.lesson_names), "success": Boolean(), **who},
                                  {"lessonName", "success"}),
        "find_similar_errors": ({"errorPattern": error_pattern, "limit": limit, **who}, {"errorPattern"}),
        "get_lesson_recommendations": ({"context": Text(MAX_QUERY, pool=["deploying to production", "disk full"]),
                                        "limit": limit, **who}, {"context"}),
    }


TOOLS = ["store_memory", "recall_memory", "update_memory", "forget_memory", "restore_memory", "create_entities",
         "create_relations", "add_observations", "delete_entities", "delete_observations", "delete_relations", "read_graph",
         "search_nodes", "open_nodes", "create_lesson", "update_lesson_success", "find_similar_errors",
         "get_lesson_recommendations"]


@dataclass
class Case:
    tool: str
    arguments: dict
    bad: list            # full paths that break the contract
    risky: bool
    params: list         # the tool's argument names

    def __repr__(self) -> str:  # hypothesis prints failing cases: keep megabyte strings out of it
        return describe(self)


def case_strategy(tool: str, seed: Seed):
    params, required = tool_specs(seed)[tool]

    @st.composite
    def case(draw):
        hostile = draw(st.sets(st.sampled_from(sorted(params)), max_size=3))
        arguments, bad, risky = {}, [], False
        for name, kind in params.items():
            if name in hostile:
                if name in required and draw(st.integers(0, 5)) == 0:
                    bad.append((name,))  # a required argument left out
                    continue
                gen = draw(kind.hostile())
            elif name not in required and draw(st.integers(0, 2)) > 0:
                continue  # optional arguments are mostly left to their defaults
            else:
                gen = draw(kind.valid())
            if gen.value is None and name not in required and draw(st.booleans()):
                continue
            arguments[name] = gen.value
            bad += _at(name, gen).bad
            risky |= gen.risky
        if draw(st.integers(0, 9)) == 0:  # an argument the tool does not have: refused, naming it
            unknown = draw(st.sampled_from(["extra", "userId", "apiKey", "__class__"]))
            arguments[unknown] = draw(st.sampled_from(WRONG_TYPES))
            bad.append((unknown,))
        return Case(tool, arguments, bad, risky, sorted(params))
    return case()


# ============================================================================
# The server under test and the invariants
# ============================================================================

def snapshot(conn) -> dict:
    """Row count and a content hash of every table (virtual tables are read through their shadow
    tables, which are listed too), plus the schema version: any write shows up here."""
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]
    state = {"user_version": conn.execute("PRAGMA user_version").fetchone()[0]}
    for table in tables:
        digests = []
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            cells = [hashlib.blake2b(c).hexdigest() if isinstance(c, bytes) else repr(c) for c in row]
            digests.append(hashlib.blake2b(repr(cells).encode("utf-8", "surrogatepass")).digest())
        state[table] = (len(digests), hashlib.blake2b(b"".join(sorted(digests))).hexdigest())
    return state


def diff(before: dict, after: dict) -> list[str]:
    """The tables that differ, with their row counts."""
    def rows(state):
        return state[0] if isinstance(state, tuple) else state
    return [f"{table} ({rows(before.get(table))} -> {rows(after.get(table))} rows)"
            for table in sorted(set(before) | set(after)) if before.get(table) != after.get(table)]


GENERIC = re.compile(r"^\s*Error executing tool [\w-]+\s*:?\s*$")
INTERNALS = ("Traceback", "OverflowError", "UnicodeEncodeError", "UnicodeDecodeError", "RecursionError",
             "sqlite3.", "OperationalError", "IntegrityError", "InterfaceError", "ProgrammingError",
             "KeyError", "AttributeError")


def names_field(text: str, path: tuple) -> bool:
    """The message names the argument (``content:``, a pydantic line ``content``, ``entities[0].name``,
    ``entities.0.name``) and, for a nested value, the key it sits under."""
    def named(word: str, top: bool) -> bool:
        before = r"(?:^|[\s:'\"(])" if top else r"[.\s\]'\"]"
        return re.search(before + re.escape(word) + r"(?=$|[.\[:\s'\"),])", text, re.MULTILINE) is not None
    keys = [p for p in path if isinstance(p, str)]
    return bool(keys) and named(keys[0], True) and (len(keys) == 1 or named(keys[-1], False))


def result_text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def describe(case: Case, limit: int = 300) -> str:
    def short(value):
        if isinstance(value, str) and len(value) > 60:
            return f"<str of {len(value):,} chars starting {value[:20]!r}>"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
            return f"<int of {len(str(abs(value))) if abs(value) < 10**4000 else '4,000+'} digits>"
        if isinstance(value, list):
            return [short(v) for v in value[:5]] + ([f"... {len(value)} items"] if len(value) > 5 else [])
        if isinstance(value, dict):
            return {k: short(v) for k, v in list(value.items())[:8]}
        return value
    try:
        shown = repr({k: short(v) for k, v in case.arguments.items()})
    except RecursionError:
        shown = "<too deep to print>"
    return f"{case.tool}({shown[:limit * 4]}) bad={case.bad} risky={case.risky}"


def check_answer(case: Case, result, before: dict, after) -> None:
    """The invariants for one answered call, all reported at once. ``after()`` snapshots the database."""
    text = result_text(result)
    problems = []
    if result.is_error:
        if not text.strip():
            problems.append("an error with no message")
        elif GENERIC.match(text):
            problems.append("a bare error with no reason")
        leaked = [word for word in INTERNALS if word in text]
        if leaked:
            problems.append(f"the error leaks internals {leaked}")
        changed = diff(before, after())
        if changed:
            problems.append(f"rejected, but the database changed: {changed}")
        if case.bad and not case.risky:
            if not any(names_field(text, path) for path in case.bad):
                problems.append(f"the error names none of the offending fields {case.bad}")
        else:
            # Any of the tool's arguments: a refusal may blame one left at its default (visibility for a
            # key that may not write shared memories).
            if not any(names_field(text, path) for path in [(n,) for n in case.params] + case.bad):
                problems.append("the error names no argument")
            if not (case.bad or case.risky):
                problems.append("a valid call was rejected")
    else:
        if case.bad:
            problems.append(f"accepted although {case.bad} break the contract")
        structured = result.structured_content
        if not isinstance(structured, dict):
            problems.append("no structured content")
        elif json.loads(text) != structured:
            problems.append("the text block is not the structured content")
        if case.tool in READ_ONLY_TOOLS:
            changed = diff(before, after())
            if changed:
                problems.append(f"the read-only tool changed the database: {changed}")
    assert not problems, f"{describe(case)}: {'; '.join(problems)}. The answer: {text[:500]!r}"


class InMemoryServer:
    """build_server(YourMemory(...)) behind the SDK's in-memory transport, on a copy of the seed."""

    def __init__(self, seed: Seed, directory: Path, embedder):
        from anyio.from_thread import start_blocking_portal
        from mcp import Client

        shutil.copy(seed.path, directory / "memory.db")
        self.memory = YourMemory(directory / "memory.db", user=USER, embedder=embedder)
        self.template = yourmemory.connect(seed.path)
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        client = Client(build_server(self.memory), mode="legacy", read_timeout_seconds=CALL_LIMIT_S)
        self._client_cm = self.portal.wrap_async_context_manager(client)
        self.client = self._client_cm.__enter__()

    def reset(self) -> None:
        with self.memory._lock:
            self.template.backup(self.memory.db)

    def snapshot(self) -> dict:
        with self.memory._lock:
            return snapshot(self.memory.db)

    def call(self, tool: str, arguments: dict | None):
        return self.portal.call(partial(self.client.call_tool, tool, arguments))

    def close(self) -> None:
        try:
            self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self.template.close()
            self.memory.close()


@pytest.fixture
def server(seed, tmp_path, embedder):
    # Quiet: an INFO line per rejected call, and a slow rich traceback per crash while hypothesis shrinks;
    # the failing case and the answer it got are in the assertion message.
    logger = logging.getLogger("mcp")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    harness = InMemoryServer(seed, tmp_path, embedder)
    yield harness
    harness.close()
    logger.setLevel(level)


def run_cases(server: InMemoryServer, seed: Seed, tool: str, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None, print_blob=True, suppress_health_check=HEALTH)
    @given(case=case_strategy(tool, seed))
    def one(case: Case) -> None:
        server.reset()
        before = server.snapshot()
        try:
            result = server.call(tool, case.arguments)
        except Exception as error:  # the transport or the client gave up: no answer came back
            raise AssertionError(f"{describe(case)}: no answer: {error!r}") from error
        CASES[tool] += 1
        check_answer(case, result, before, server.snapshot)

    one()
    # Still serving after the run, and still answering the plainest call correctly.
    server.reset()
    alive = server.call("read_graph", {"limit": 1})
    assert not alive.is_error and alive.structured_content["total"] == len(seed.entity_names), result_text(alive)


@pytest.mark.parametrize("tool", TOOLS)
def test_hostile_arguments_are_refused_cleanly_without_partial_writes(server, seed, tool):
    run_cases(server, seed, tool, SHORT_EXAMPLES)


@pytest.mark.long
@long_only
@pytest.mark.parametrize("tool", TOOLS)
def test_hostile_arguments_long_run(server, seed, tool):
    run_cases(server, seed, tool, LONG_EXAMPLES)


def test_unknown_and_hostile_tool_names_are_errors(server):
    for name in ["no_such_tool", "", "store_memory ", "STORE_MEMORY", "store_memory\x00", "a" * 10_000,
                 "../store_memory", "'); DROP TABLE memories;--", "\ud800"]:
        before = server.snapshot()
        result = server.call(name, {"content": "The build uses Bazel"})
        assert result.is_error, f"tool {name[:40]!r} was accepted"
        text = result_text(result)
        assert "Traceback" not in text and not GENERIC.match(text), text
        assert not diff(before, server.snapshot())
    assert not server.call("read_graph", None).is_error


def test_arguments_left_out_entirely(server, seed):
    """``arguments`` absent: tools with required arguments name them, the others run on defaults."""
    for tool in TOOLS:
        _, required = tool_specs(seed)[tool]
        before = server.snapshot()
        result = server.call(tool, None)
        text = result_text(result)
        if required:
            assert result.is_error, f"{tool} with no arguments was accepted"
            assert any(names_field(text, (name,)) for name in required), f"{tool}: {text[:300]!r}"
            assert not diff(before, server.snapshot())
        else:
            assert not result.is_error, f"{tool} with no arguments failed: {text[:300]!r}"


# ============================================================================
# Raw JSON-RPC over stdio: what an SDK client cannot send
# ============================================================================

class RawServer:
    """The installed entry point as a subprocess, spoken to in raw JSON-RPC lines."""

    def __init__(self, directory: Path):
        self.db, self.log = directory / "memory.db", directory / "server-stderr.log"
        env = {**os.environ, "YOURMEMORY_DB": str(self.db), "YOURMEMORY_USER": "tester",
               "YOURMEMORY_HOME": str(directory / "home")}
        for name in ("YOURMEMORY_SQLITE", "YOURMEMORY_DECAY_INTERVAL"):
            env.pop(name, None)
        self._stderr = open(self.log, "wb")
        self.process = subprocess.Popen([installed_entry_point()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr, env=env, cwd=directory)
        self.messages: queue.Queue = queue.Queue()
        self.unparsable: list[bytes] = []  # anything on stdout that is not one JSON message per line
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1000

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                self.unparsable.append(line[:300])
        self.messages.put(None)

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _next(self, until: float) -> dict | None:
        try:
            message = self.messages.get(timeout=max(0.01, until - time.monotonic()))
        except queue.Empty:
            return None
        if message is None:
            raise AssertionError(f"the server closed stdout (exit {self.process.poll()}): {self.stderr_tail()}")
        return message

    def request(self, method: str, params: dict | None = None) -> dict:
        ident = self.new_id()
        self.send(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                              **({"params": params} if params is not None else {})}).encode())
        until = time.monotonic() + CALL_LIMIT_S
        while time.monotonic() < until:
            message = self._next(until)
            if message is not None and message.get("id") == ident:
                return message
        raise AssertionError(f"no answer to {method} within {CALL_LIMIT_S}s: {self.stderr_tail()}")

    def exchange(self, line: bytes, ident: int | None, well_formed: bool) -> dict | None:
        """Send a hostile line, then a ping; return the hostile line's answer (with its id, or a null id
        when the id cannot be read), or None when none came.

        The server reads lines in order and answers a ping at once, so the answer to a line it cannot
        take as a request is due by the time the ping is answered (one second of grace). A well-formed
        request may run long (embedding), so it gets up to CALL_LIMIT_S.
        """
        ping = self.new_id()
        self.send(line)
        self.send(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode())
        wanted = (ident, None) if ident is not None else (None,)
        answer, pinged = None, False
        until = time.monotonic() + CALL_LIMIT_S
        while time.monotonic() < until and not (answer and pinged):
            message = self._next(until)
            if message is None:
                break
            if message.get("id") == ping and ("result" in message or "error" in message):
                pinged = True
                if not well_formed:
                    until = min(until, time.monotonic() + 1.0)
            elif "id" in message and message["id"] in wanted and ("result" in message or "error" in message):
                answer = message
        assert pinged, f"the server stopped answering (no reply to a ping): {self.stderr_tail()}"
        assert not self.unparsable, f"the server wrote non-JSON lines to stdout: {self.unparsable[:3]}"
        return answer

    def jobs_done(self) -> bool:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT count(*) FROM jobs").fetchone()[0] > 0
        except sqlite3.Error:
            return False
        finally:
            conn.close()

    def snapshot(self) -> dict:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return snapshot(conn)
        finally:
            conn.close()

    def stderr_tail(self) -> str:
        self._stderr.flush()
        return self.log.read_text(errors="replace")[-3000:]

    def close(self) -> int:
        self.process.stdin.close()
        try:
            return self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self._stderr.close()


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory):
    server = RawServer(tmp_path_factory.mktemp("hostile-stdio"))
    init = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "hostile", "version": "1"}})
    assert "result" in init, init
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    warm = server.request("tools/call", {"name": "store_memory", "arguments": {"content": "The build uses Bazel"}})
    assert not warm["result"].get("isError"), warm
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.jobs_done():
        time.sleep(0.2)  # the decay job runs once at start-up; it must not move the snapshots below
    yield server
    assert server.process.poll() is None, f"the server died: {server.stderr_tail()}"
    assert server.close() == 0, server.stderr_tail()


def tool_call(ident: int, tool: str, arguments: bytes) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            % (ident, tool.encode(), arguments))


def deep_raw(depth: int, kind: str) -> bytes:
    return (b"[" * depth + b"]" * depth) if kind == "list" else (b'{"k":' * depth + b"1" + b"}" * depth)


# (label, tool, raw arguments, the field a tool error must name or None)
RAW_CASES = [
    ("invalid UTF-8 inside a string", "store_memory", b'{"content":"The build uses \xff\xfe Bazel"}', "content"),
    ("overlong UTF-8 for a slash", "store_memory", b'{"content":"tools\xc0\xafdeploy.sh is the script"}', "content"),
    ("UTF-8-encoded surrogate bytes", "store_memory", b'{"content":"The build \xed\xa0\x80 uses Bazel"}', "content"),
    ("truncated UTF-8 sequence", "create_entities",
     b'{"entities":[{"name":"Caf\xc3","entityType":"place","observations":[]}]}', "entities"),
    ("lone high surrogate escape", "store_memory", b'{"content":"The build \\ud800 uses Bazel"}', "content"),
    ("lone low surrogate escape", "store_memory", b'{"content":"The build \\udc00 uses Bazel"}', "content"),
    ("high surrogate escape then a letter", "recall_memory", b'{"query":"\\ud83d\\u0041"}', "query"),
    ("surrogate escape in a name", "create_entities",
     b'{"entities":[{"name":"\\udfff","entityType":"t","observations":[]}]}', "entities"),
    ("surrogate escape in user_id", "read_graph", b'{"user_id":"\\ud800"}', "user_id"),
    ("raw NUL byte in a string", "store_memory", b'{"content":"The build \x00 uses Bazel"}', "content"),
    ("raw control byte in a string", "recall_memory", b'{"query":"deploy\x01script"}', "query"),
    ("escaped NUL in content", "store_memory", b'{"content":"The build \\u0000 uses Bazel"}', "content"),
    ("escaped NUL in an entity name", "create_entities",
     b'{"entities":[{"name":"A\\u0000B","entityType":"t","observations":[]}]}', "entities"),
    ("arrays nested 10,000 deep", "create_entities", b'{"entities":' + deep_raw(10_000, "list") + b"}", "entities"),
    ("objects nested 10,000 deep", "create_lesson", b'{"lesson":' + deep_raw(10_000, "dict") + b"}", "lesson"),
    ("arrays nested 150 deep", "open_nodes", b'{"names":' + deep_raw(150, "list") + b"}", "names"),
    ("5 MB content", "store_memory", b'{"content":"' + b"a" * 5_000_000 + b'"}', "content"),
    ("5 MB query", "search_nodes", b'{"query":"' + b"deploy " * 700_000 + b'"}', "query"),
    ("NaN importance", "store_memory", b'{"content":"The sky is blue","importance":NaN}', "importance"),
    ("Infinity importance", "update_memory",
     b'{"memory_id":1,"new_content":"The sky is blue","importance":Infinity}', "importance"),
    ("1e400 importance", "store_memory", b'{"content":"The sky is blue","importance":1e400}', "importance"),
    ("-Infinity top_k", "recall_memory", b'{"query":"sky","top_k":-Infinity}', "top_k"),
    ("float top_k", "recall_memory", b'{"query":"sky","top_k":1e2}', "top_k"),
    ("400-digit memory_id", "forget_memory", b'{"memory_id":' + b"9" * 400 + b"}", "memory_id"),
    ("5,000-digit memory_id", "forget_memory", b'{"memory_id":' + b"9" * 5_000 + b"}", "memory_id"),
    ("30-digit offset", "read_graph", b'{"offset":' + b"9" * 30 + b"}", "offset"),
    ("2**63 limit", "read_graph", b'{"limit":9223372036854775808}', "limit"),
    ("negative zero memory_id", "forget_memory", b'{"memory_id":-0}', "memory_id"),
    ("success as a string", "update_lesson_success", b'{"lessonName":"x","success":"true"}', "success"),
    ("arguments is a list", "store_memory", b'["The build uses Bazel"]', None),
    ("arguments is a string", "store_memory", b'"The build uses Bazel"', None),
    ("truncated message", "store_memory", b'{"content":"The build uses', None),
]
# Whole lines: (label, line with %d where the request id goes, if it has one)
RAW_LINES = [
    ("garbage bytes", b"\xff\xfe\xfd"),
    ("not an object", b"42"),
    ("empty object", b"{}"),
    ("batch", b'[{"jsonrpc":"2.0","id":%d,"method":"ping"}]'),
    ("params is a list", b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":[1,2]}'),
    ("wrong jsonrpc version", b'{"jsonrpc":"1.0","id":%d,"method":"ping"}'),
    ("id is an object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}'),
    ("byte-order mark first", b'\xef\xbb\xbf{"jsonrpc":"2.0","id":%d,"method":"ping"}'),
    ("unknown method", b'{"jsonrpc":"2.0","id":%d,"method":"memories/drop","params":{}}'),
    ("unknown tool", b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"drop_all","arguments":{}}}'),
    ("tool name is a number", b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":5}}'),
]


def expect_error(server: RawServer, label: str, line: bytes, ident: int | None, well_formed: bool,
                 field_name: str | None = None) -> None:
    """The line is answered with an error (JSON-RPC error, or a tool result with isError naming the
    field), the server still answers a ping, and the database is as it was."""
    before = server.snapshot()
    answer = server.exchange(line, ident, well_formed)
    assert answer is not None, (
        f"{label}: no answer at all (JSON-RPC 2.0 wants an error response, with a null id when the id "
        "cannot be read)")
    assert server.process.poll() is None, f"{label}: the server died: {server.stderr_tail()}"
    changed = diff(before, server.snapshot())
    if "error" in answer:
        assert isinstance(answer["error"].get("code"), int) and answer["error"].get("message"), answer
        assert not changed, f"{label}: a JSON-RPC error, but the database changed: {changed}"
        return
    result = answer.get("result") or {}
    text = "\n".join(block.get("text", "") for block in result.get("content", []))
    assert result.get("isError"), f"{label}: accepted: {text[:300]!r}"
    assert "Traceback" not in text and not GENERIC.match(text), f"{label}: unclear error {text[:300]!r}"
    if field_name:
        assert names_field(text, (field_name,)), f"{label}: the error does not name {field_name!r}: {text[:300]!r}"
    assert not changed, f"{label}: rejected ({text[:200]!r}) but the database changed: {changed}"


@pytest.mark.parametrize("label,tool,arguments,field_name", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_raw_stdio_hostile_arguments_are_answered_with_errors(raw_server, label, tool, arguments, field_name):
    ident = raw_server.new_id()
    line = tool_call(ident, tool, arguments)
    expect_error(raw_server, label, line, ident, well_formed_request(line), field_name)
    CASES["stdio"] += 1


@pytest.mark.parametrize("label,line", RAW_LINES, ids=[c[0] for c in RAW_LINES])
def test_raw_stdio_malformed_messages_are_answered_with_errors(raw_server, label, line):
    ident = raw_server.new_id() if b"%d" in line else None
    line = line % ident if ident is not None else line
    expect_error(raw_server, label, line, ident, well_formed_request(line))
    CASES["stdio"] += 1


def test_raw_stdio_surrogate_pairs_and_unicode_are_stored_as_sent(raw_server):
    """The control: a correct escape pair, raw UTF-8 and right-to-left text go through unchanged."""
    content = "Ada's mood board uses the \U0001F600 emoji and caf\u00e9 \u202eRTL text"
    escaped = json.dumps(content).encode()  # ASCII, with \\ud83d\\ude00 as an escape pair
    raw = json.dumps(content, ensure_ascii=False).encode()
    for arguments in (b'{"content":' + escaped + b"}", b'{"content":' + raw + b"}"):
        ident = raw_server.new_id()
        answer = raw_server.exchange(tool_call(ident, "store_memory", arguments), ident, True)
        assert answer and "result" in answer and not answer["result"].get("isError"), answer
    found = raw_server.request("tools/call", {"name": "recall_memory", "arguments": {"query": "mood board emoji"}})
    assert any(m["content"] == content for m in found["result"]["structuredContent"]["memories"]), found


# Corruptions spliced into an otherwise valid call: every one must be refused.
STRING_CORRUPTIONS = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xe2\x82",
                      b"\x00", b"\x1f", b"\\ud800", b"\\udfff", b"\\ud83d\\u0041", b"\\u0000"]
NUMBER_CORRUPTIONS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999", b"+1", b"0x10", b"01", b".5",
                      b"1.", b"true", b"null", b'"1"', b"[1]"]
RAW_BASES = [  # (tool, arguments with a string marker S and a number marker N)
    ("store_memory", {"content": "S", "importance": "N"}),
    ("recall_memory", {"query": "S", "top_k": "N"}),
    ("update_memory", {"memory_id": "N", "new_content": "S"}),
    ("create_entities", {"entities": [{"name": "S", "entityType": "project", "observations": ["uses SQLite"]}]}),
    ("search_nodes", {"query": "S", "limit": "N"}),
    ("find_similar_errors", {"errorPattern": {"type": "S", "message": "timed out", "context": "deploy"},
                             "limit": "N"}),
    ("get_lesson_recommendations", {"context": "S", "limit": "N"}),
    ("read_graph", {"user_id": "S", "offset": "N"}),
]


def well_formed_request(line: bytes) -> bool:
    """Whether a strict parser takes the line as a JSON-RPC request (so its answer may take long):
    UTF-8 decoded leniently as the SDK does, no lone surrogate, nesting within 200 levels.
    Only sets how long to wait for the answer; every line must be answered either way."""
    text = line.decode("utf-8", "replace")
    depth = peak = 0
    for char in text:  # brackets inside strings count too: an over-estimate only shortens the wait
        depth += char in "[{"
        depth -= char in "]}"
        peak = max(peak, depth)
    try:
        message = json.loads(text)
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        return False
    return (peak < 200 and isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str) and isinstance(message.get("params", {}), dict)
            and isinstance(message.get("id"), (int, str)) and not isinstance(message.get("id"), bool))


@st.composite
def raw_corruptions(draw):
    tool, template = draw(st.sampled_from(RAW_BASES))
    encoded = json.dumps(template).encode()
    # Only corruptions the template has a placeholder for: a call without a number cannot have one corrupted.
    hows = ["truncate"] + (["string"] if b'"S"' in encoded else []) + (["number", "nest"] if b'"N"' in encoded else [])
    how = draw(st.sampled_from(hows))
    if how == "string":
        text = draw(st.sampled_from([b"The build uses Bazel", b"deploy", b"Ada"]))
        where = draw(st.integers(0, len(text)))
        value = b'"' + text[:where] + draw(st.sampled_from(STRING_CORRUPTIONS)) + text[where:] + b'"'
        return tool, encoded.replace(b'"S"', value).replace(b'"N"', b"1"), how
    encoded = encoded.replace(b'"S"', b'"The build uses Bazel"')
    if how == "number":  # not a number, not JSON, or not an integer/number of the range: all refusals
        return tool, encoded.replace(b'"N"', draw(st.sampled_from(NUMBER_CORRUPTIONS))), how
    if how == "nest":
        depth = draw(st.sampled_from([2, 50, 199, 300, 10_000]))
        return tool, encoded.replace(b'"N"', b"[" * depth + b"1" + b"]" * depth), how
    encoded = encoded.replace(b'"N"', b"1")
    return tool, encoded[: draw(st.integers(1, len(encoded) - 1))], how


def run_raw_corruptions(raw_server: RawServer, examples: int) -> None:
    # No shrinking: a case is a single corruption already, and an unanswered one costs a wait.
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=HEALTH,
              phases=[Phase.explicit, Phase.generate])
    @given(case=raw_corruptions())
    def one(case):
        tool, arguments, how = case
        ident = raw_server.new_id()
        line = tool_call(ident, tool, arguments)
        expect_error(raw_server, f"{how} corruption: {line[:200]!r}", line, ident, well_formed_request(line))
        CASES["stdio"] += 1

    one()


def test_raw_stdio_corrupted_calls_are_refused(raw_server):
    run_raw_corruptions(raw_server, STDIO_SHORT_EXAMPLES)


@pytest.mark.long
@long_only
def test_raw_stdio_corrupted_calls_long_run(raw_server):
    run_raw_corruptions(raw_server, STDIO_LONG_EXAMPLES)


@pytest.mark.long
@long_only
def test_long_run_reached_ten_thousand_cases():
    """Runs last in this file: the long run as a whole generated at least 10,000 cases."""
    total = sum(CASES.values())
    print(f"hostile cases run: {total:,} ({dict(CASES)})")
    assert total >= LONG_TOTAL, f"only {total:,} hostile cases ran: {dict(CASES)}"


@pytest.mark.parametrize("count", [0, -1, 1.5, "2", True, None, 10**6])
def test_a_bad_thread_count_is_refused_naming_it_and_changes_nothing(count):
    before = yourmemory.openblas_threads()
    with pytest.raises(yourmemory.InvalidInput) as refused:
        yourmemory.set_openblas_threads(count)
    assert refused.value.field == "count" and "whole number of threads" in str(refused.value)
    assert yourmemory.openblas_threads() == before


@pytest.mark.parametrize("arguments, field", [
    (("not a pipeline",), "pipeline"), ((None,), "pipeline"), ((), "on"),
])
def test_bad_arguments_to_the_parse_steps_switch_are_refused_naming_them(arguments, field):
    pipeline = yourmemory.nlp()
    steps = {name: dict(vars(pipeline.get_pipe(name))) for name in ("tok2vec", "attribute_ruler")}
    with pytest.raises(yourmemory.InvalidInput) as refused:
        yourmemory.use_faster_parse_steps(*(arguments or (pipeline,)), **({} if arguments else {"on": "yes"}))
    assert refused.value.field == field
    assert {name: dict(vars(pipeline.get_pipe(name))) for name in steps} == steps  # nothing switched
