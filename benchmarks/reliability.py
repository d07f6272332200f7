"""Reliability: many server processes on one database, and kill -9 at random moments.

    python benchmarks/reliability.py                  # both parts at full size (about 10-20 minutes on 2 CPUs)
    python benchmarks/reliability.py stress --processes 4 --writes 500
    python benchmarks/reliability.py open --open-processes 8 --open-rounds 100
    python benchmarks/reliability.py crash --write-trials 70 --server-trials 20 --migration-trials 12 --prune-trials 12

stress: N real `yourmemory` server processes (the installed entry point, stdio, driven by the mcp SDK
client) share one database file while each server's decay job runs every 0.5 s. Every client does a
seeded, mixed sequence of writes (store, update, forget, create_entities, add_observations,
create_relations, delete_observations, create_lesson, update_lesson_success), a few deliberate
rejections (forgetting a forgotten memory) and reads (recall_memory, search_nodes). Afterwards the
database is read directly: every acknowledged write must be present exactly once with the right
content, nothing unacknowledged may appear, no client may have seen any error (a "database is locked"
least of all), the harness's own cross-checks and `yourmemory doctor` must be clean.

open: 8 processes open one database at the same instant, as MCP clients launching their servers
together do, both a new file and a version-1 file with data to upgrade; all must open, and the
file must end at the current version with its data intact.

crash: trials of SIGKILL at a random moment
  write     a forked child writes through the library (the same mixed operations) and reports each
            operation before it starts and after it returned; trials are chained, so a database is
            killed again and again and must keep every write acknowledged in any earlier trial.
            The child embeds with a deterministic stand-in (a topic vector plus hashed noise, so
            same-topic memories link as real ones do), not the model: these trials are about storage,
            and the model's 1-2 s load per process would leave room for few trials. Real vectors are
            covered by the server trials and the stress part.
  server    the real entry point with the real model, driven over stdio JSON-RPC, killed mid-stream.
  migration a database at every older schema version (1: memories only; 2: plus the knowledge graph;
            3 and later: plus lessons),
            written as that version wrote it, is opened by a child running the
            current code and killed during the upgrade (half the trials stretch each migration
            statement by a few ms so kills land inside the migration transactions).
  prune     a database with thousands of faded memories (a library clock 400+ days on) is pruned by a
            child, which is killed mid-prune; the outcome must be all of the prune or none of it.
After every kill: the file opens with the current code, PRAGMA integrity_check is ok, `yourmemory
doctor` exits 0, every acknowledged write is present, and the operation in flight at the kill is
applied entirely or not at all.

Writes a summary to benchmarks/results/reliability.json and prints the figures.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(HERE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import yourmemory  # noqa: E402
from yourmemory import YourMemory, YourMemoryError  # noqa: E402

DAY = 86400.0
WRITE_OPS = ("store", "update", "forget", "create_entities", "add_observations", "create_relations",
             "delete_observations", "create_lesson", "update_lesson_success")
READ_OPS = ("recall", "search_nodes")
PROBE_OPS = ("forget_gone",)          # a deliberate, expected rejection
LOCK_WORDS = ("locked", "busy")
CALL_LIMIT_S = 180                    # one MCP call; a hang guard (the busy timeout is 15 s)
SEED_MARK = "Archive note"            # pre-seeded stress memories start with this


# ============================================================================
# Content: distinct per write, so a store is always a new memory
# ============================================================================

PEOPLE = ("Amara", "Bjorn", "Chidi", "Dagny", "Emeka", "Farah", "Goran", "Hiroko", "Ines", "Jonas", "Kavya",
          "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Soren", "Tamsin")
# Past-tense verbs whose lemma holds no single value (not in EXCLUSIVE_PREDICATES / CHANGE_VERBS),
# so no store is ever taken for a contradiction of another.
VERBS = ("inspected", "repaired", "photographed", "catalogued", "sketched", "polished", "measured", "labelled",
         "cleaned", "weighed", "mapped", "repainted", "archived", "sanded", "oiled", "tuned")
ADJECTIVES = ("blue", "rusty", "narrow", "heavy", "wooden", "copper", "hollow", "ancient", "bright", "curved",
              "tall", "striped")
TOPICS = ("lighthouse", "bridge", "telescope", "greenhouse", "locomotive", "harp", "windmill", "canoe",
          "observatory", "clocktower", "aqueduct", "sawmill", "carousel", "glacier", "beehive", "organ")
PLACES = ("the north pier", "the old quarry", "the river bend", "the market square", "the hill fort",
          "the salt marsh", "the east gate", "the orchard", "the ferry landing", "the chapel yard")
WHEN = ("at dawn", "on Tuesday", "before the storm", "after lunch", "during the fair", "at midnight",
        "in early spring", "on the last day of term", "after the flood", "during the eclipse")


def token(tag: str, kind: str, n: int) -> str:
    """A word found in exactly one content: z<tag><kind><n>z (no token is a substring of another)."""
    return f"z{tag}{kind}{n}z"


def sentence(rng: random.Random, tok: str) -> str:
    return (f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {rng.choice(TOPICS)} "
            f"near {rng.choice(PLACES)} {rng.choice(WHEN)}, reference {tok}.")


def observation(rng: random.Random, tok: str) -> str:
    return f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} its {rng.choice(TOPICS)} parts {rng.choice(WHEN)}, note {tok}."


class StandInEmbedder:
    """Deterministic unit vectors for the forked crash children (see the module docstring).

    Texts naming the same topic word have cosine about 0.55 (so they link, >= 0.4, but are never
    compared as contradictions, < 0.6, nor merged as duplicates, < 0.92); other texts about 0.
    """

    def __init__(self):
        import numpy as np
        basis = np.random.default_rng(20261130).standard_normal((len(TOPICS) + 1, yourmemory.EMBEDDING_DIM))
        self.basis = basis / np.linalg.norm(basis, axis=1, keepdims=True)

    def load(self):
        return self

    def embed(self, texts):
        import numpy as np
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, yourmemory.EMBEDDING_DIM))

    def embed_one(self, text):
        return self._vector(text)

    def _vector(self, text: str):
        import numpy as np
        lowered = text.lower()
        topic = next((i for i, word in enumerate(TOPICS) if word in lowered), len(TOPICS))
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
        noise = np.random.default_rng(seed).standard_normal(yourmemory.EMBEDDING_DIM)
        vector = self.basis[topic] + 0.9 * noise / np.linalg.norm(noise)
        return (vector / np.linalg.norm(vector)).astype(np.float32)


# ============================================================================
# The expected state: what the acknowledged writes say must be in the database
# ============================================================================

class Model:
    """Acknowledged writes, and the state they imply. Owners are worker numbers (crash trials: 0)."""

    def __init__(self):
        self.memories: dict[int, dict] = {}        # live id -> {"content", "history": [old texts], "owner", "gen"}
        self.gone: dict[int, dict] = {}            # generation (the store's log index) -> {"id", "contents", "owner"}
        self.reused: dict[int, str] = {}           # ids handed out again to a store after a forget
        self.entities: dict[str, dict] = {}        # name -> {"type", "observations": [...], "owner", "lesson"}
        self.deleted: set[tuple[str, str]] = set()  # (entity, observation) deleted by an acknowledged write
        self.relations: set[tuple[str, str, str]] = set()
        self.lessons: dict[str, dict] = {}         # name -> {"pattern", "uses", "successes", "owner"}
        self.log: list[tuple[dict, dict]] = []     # acknowledged writes: (op, summary), in order

    # -- choosing -----------------------------------------------------------------

    def own_memories(self, owner):
        return [i for i, m in self.memories.items() if m["owner"] == owner]

    def own_gone(self, owner):
        return sorted({m["id"] for m in self.gone.values() if m["owner"] == owner})

    def live(self, gen: int) -> bool:
        return gen not in self.gone

    def own_entities(self, owner):
        return [n for n, e in self.entities.items() if e["owner"] == owner and not e["lesson"]]

    def own_observations(self, owner):
        return [(n, o) for n in self.own_entities(owner) for o in self.entities[n]["observations"]]

    # -- applying -----------------------------------------------------------------

    def apply(self, op: dict, summary: dict) -> None:
        """Record an acknowledged (or, after a kill, found-applied) write."""
        kind, owner = op["op"], op["owner"]
        if kind in READ_OPS or (kind in PROBE_OPS and op["id"] not in self.memories):
            return
        self.log.append((op, summary))
        if kind == "store":
            if summary.get("action") == "store":
                op["gen"] = len(self.log) - 1
                if any(g["id"] == summary["id"] for g in self.gone.values()):
                    self.reused[summary["id"]] = (f"memory id {summary['id']} was forgotten, then handed out "
                                                  f"again to {op_label(op)}")
                self.memories[summary["id"]] = {"content": op["content"], "history": [], "owner": owner,
                                                "gen": op["gen"]}
        elif kind == "update":
            memory = self.memories[op["id"]]
            op["gen"] = memory["gen"]
            memory["history"].append(memory["content"])
            memory["content"] = op["content"]
        elif kind in ("forget", "forget_gone"):  # a "forget_gone" that succeeded deleted whatever held the id
            memory = self.memories.pop(op["id"])
            op["gen"] = memory["gen"]
            self.gone[memory["gen"]] = {"id": op["id"], "contents": memory["history"] + [memory["content"]],
                                        "owner": memory["owner"]}
        elif kind == "create_entities":
            for name in summary["created"]:
                self.entities[name] = {"type": op["type"], "observations": list(op["observations"]),
                                       "owner": owner, "lesson": False}
        elif kind == "add_observations":
            self.entities[op["name"]]["observations"] += summary["added"]
        elif kind == "delete_observations":
            self.entities[op["name"]]["observations"].remove(op["text"])
            self.deleted.add((op["name"], op["text"]))
        elif kind == "create_relations":
            if summary["created"]:
                self.relations.add((op["from"], op["to"], op["type"]))
        elif kind == "create_lesson":
            lesson = op["lesson"]
            self.entities[lesson["name"]] = {"type": "lesson", "observations": list(lesson["observations"]),
                                             "owner": owner, "lesson": True}
            self.lessons[lesson["name"]] = {"pattern": lesson["errorPattern"], "uses": 0, "successes": 0,
                                            "owner": owner}
        elif kind == "update_lesson_success":
            self.lessons[op["name"]]["uses"] += 1
            self.lessons[op["name"]]["successes"] += int(op["success"])


WRITE_WEIGHTS = {"store": 28, "update": 12, "forget": 8, "create_entities": 10, "add_observations": 12,
                 "create_relations": 8, "delete_observations": 5, "create_lesson": 6, "update_lesson_success": 8,
                 "forget_gone": 3}


def next_write(rng: random.Random, model: Model, owner: int, tag: str, n: int, shared_pool: bool) -> dict:
    """One write (or deliberate rejection), chosen by ``rng`` from what ``owner`` may touch.

    Workers touch only their own memories and observations; relations and lesson uses may take any
    acknowledged entity or lesson when ``shared_pool`` (the stress test), which makes the servers
    update the same rows.
    """
    kind = rng.choices(list(WRITE_WEIGHTS), weights=list(WRITE_WEIGHTS.values()))[0]
    mine = model.own_memories(owner)
    entities = [x for x in model.entities if shared_pool or model.entities[x]["owner"] == owner]
    plain = [x for x in entities if not model.entities[x]["lesson"]]
    lessons = [x for x in model.lessons if shared_pool or model.lessons[x]["owner"] == owner]
    if kind in ("update", "forget") and not mine:
        kind = "store"
    if kind == "forget_gone" and not model.own_gone(owner):
        kind = "store"
    if kind == "add_observations" and not model.own_entities(owner):
        kind = "create_entities"
    if kind == "delete_observations" and not model.own_observations(owner):
        kind = "add_observations" if model.own_entities(owner) else "create_entities"
    if kind == "create_relations" and len(plain) < 2:
        kind = "create_entities"
    if kind == "update_lesson_success" and not lessons:
        kind = "create_lesson"
    op = {"op": kind, "owner": owner, "n": n}
    if kind == "store":
        op.update(content=sentence(rng, token(tag, "s", n)), importance=round(rng.uniform(0.5, 0.95), 2))
    elif kind == "update":
        op.update(id=rng.choice(mine), content=sentence(rng, token(tag, "u", n)))
    elif kind == "forget":
        op.update(id=rng.choice(mine))
    elif kind == "forget_gone":
        op.update(id=rng.choice(model.own_gone(owner)))
    elif kind == "create_entities":
        tok = token(tag, "e", n)
        op.update(name=f"{rng.choice(TOPICS).title()} {tok}", type=rng.choice(("site", "machine", "team")),
                  observations=[observation(rng, f"{tok}o{k}") for k in range(rng.randint(1, 2))])
    elif kind == "add_observations":
        op.update(name=rng.choice(model.own_entities(owner)), text=observation(rng, token(tag, "o", n)))
    elif kind == "delete_observations":
        op["name"], op["text"] = rng.choice(model.own_observations(owner))
    elif kind == "create_relations":
        source, target = rng.sample(plain, 2)
        op.update({"from": source, "to": target, "type": f"feeds {token(tag, 'r', n)}"})
    elif kind == "create_lesson":
        tok, topic = token(tag, "l", n), rng.choice(TOPICS)
        op["lesson"] = {
            "name": f"lesson {tok}", "entityType": "lesson",
            "observations": [f"Restarting the {topic} controller cleared the stall, note {tok}."],
            "errorPattern": {"type": f"{topic.title()}Stall", "message": f"{topic} controller stalled at step {n}, "
                             f"trace {tok}", "context": f"{topic} pipeline"},
            "verificationSteps": [{"command": f"check-{topic} --status", "expectedOutput": "running",
                                   "successIndicators": ["running"]}]}
    elif kind == "update_lesson_success":
        op.update(name=rng.choice(lessons), success=rng.random() < 0.6)
    return op


def next_read(rng: random.Random, model: Model, owner: int) -> dict | None:
    """A read whose answer is known: recall a memory by its own text, search an entity by its name."""
    mine, entities = model.own_memories(owner), model.own_entities(owner)
    if mine and (not entities or rng.random() < 0.7):
        memory_id = rng.choice(mine)
        return {"op": "recall", "owner": owner, "query": model.memories[memory_id]["content"], "expect": memory_id}
    if entities:
        name = rng.choice(entities)
        return {"op": "search_nodes", "owner": owner, "query": name, "expect": name}
    return None


async def recall_miss_detail(session, op: dict, result: dict) -> str:
    """What a recall that missed its own memory returned, and where that memory ranks among 50 (a second
    recall, which reinforces too: the run has failed already). A failure here is reported, not raised."""
    import anyio
    try:
        with anyio.fail_after(CALL_LIMIT_S):
            wide = await session.call_tool("recall_memory", {"query": op["query"], "top_k": 50})
        ranked = json.loads("\n".join(b.text for b in wide.content if getattr(b, "text", None)))["memories"]
        rank = next((i for i, m in enumerate(ranked) if m["id"] == op["expect"]), None)
        shown = [{k: m.get(k) for k in ("id", "score", "similarity", "bm25", "strength", "via", "content")}
                 for m in result["memories"] + ([ranked[rank]] if rank is not None else [])]
        return f"; rank among 50: {rank}; returned, then the memory itself: {json.dumps(shown)}"
    except Exception as error:  # noqa: BLE001 - the miss itself must still be reported
        return f"; (the second recall, for detail, failed: {error!r})"


def contested_op(owner: int, k: int) -> dict:
    """Every worker tries to create the same entity; exactly one creation may be acknowledged."""
    return {"op": "create_entities", "owner": owner, "n": -k, "name": f"Contested {k}", "type": "shared",
            "observations": [f"Claimed by worker {owner} for round {k}."], "contested": True}


# -- performing an op: library call or MCP tool call ---------------------------------

def tool_call(op: dict) -> tuple[str, dict]:
    """The MCP tool and arguments for ``op``."""
    kind = op["op"]
    if kind == "store":
        return "store_memory", {"content": op["content"], "importance": op["importance"]}
    if kind == "update":
        return "update_memory", {"memory_id": op["id"], "new_content": op["content"]}
    if kind in ("forget", "forget_gone"):
        return "forget_memory", {"memory_id": op["id"]}
    if kind == "create_entities":
        return "create_entities", {"entities": [{"name": op["name"], "entityType": op["type"],
                                                 "observations": op["observations"]}]}
    if kind == "add_observations":
        return "add_observations", {"observations": [{"entityName": op["name"], "contents": [op["text"]]}]}
    if kind == "delete_observations":
        return "delete_observations", {"deletions": [{"entityName": op["name"], "observations": [op["text"]]}]}
    if kind == "create_relations":
        return "create_relations", {"relations": [{"from": op["from"], "to": op["to"], "relationType": op["type"]}]}
    if kind == "create_lesson":
        return "create_lesson", {"lesson": op["lesson"]}
    if kind == "update_lesson_success":
        return "update_lesson_success", {"lessonName": op["name"], "success": op["success"]}
    if kind == "recall":
        return "recall_memory", {"query": op["query"], "top_k": 5}
    if kind == "search_nodes":
        return "search_nodes", {"query": op["query"]}
    raise ValueError(kind)


def library_call(memory: YourMemory, op: dict) -> dict:
    """Perform ``op`` through the library; returns what the matching tool would return."""
    name, args = tool_call(op)
    if name == "store_memory":
        return memory.store(args["content"], args["importance"])
    if name == "update_memory":
        return memory.update(args["memory_id"], args["new_content"])
    if name == "forget_memory":
        return memory.forget(args["memory_id"])
    if name == "recall_memory":
        return memory.recall(args["query"], args["top_k"])
    if name == "create_lesson":
        return memory.lessons.create_lesson(args["lesson"])
    if name == "update_lesson_success":
        return memory.lessons.update_lesson_success(args["lessonName"], args["success"])
    if name == "search_nodes":
        return memory.graph.search_nodes(args["query"])
    return getattr(memory.graph, name)(*args.values())


def summarize(op: dict, result: dict) -> dict:
    """The part of a result the model needs (small: it travels through a pipe in one write)."""
    kind = op["op"]
    if kind == "store":
        return {"action": result["action"], "id": result["id"]}
    if kind == "update":
        return {"id": result["id"], "content": result["memory"]["content"]}
    if kind in ("forget", "forget_gone"):
        return {"id": result["id"]}
    if kind == "create_entities":
        return {"created": [e["name"] for e in result["entities"]]}
    if kind == "add_observations":
        return {"added": [text for r in result["results"] for text in r["addedObservations"]]}
    if kind == "create_relations":
        return {"created": len(result["relations"])}
    if kind == "create_lesson":
        return {"name": result["name"]}
    if kind == "update_lesson_success":
        return {"frequency": result["metadata"]["frequency"]}
    if kind == "recall":
        return {"ids": [m["id"] for m in result["memories"]]}
    if kind == "search_nodes":
        return {"names": [e["name"] for e in result["entities"]]}
    return {}


def result_problems(op: dict, summary: dict) -> list[str]:
    """What an acknowledged answer must say, given contents that are distinct by construction."""
    kind, where = op["op"], f"worker {op['owner']} op {op.get('n')} {op['op']}"
    if kind == "store" and summary["action"] != "store":
        return [f"{where}: a distinct content was answered {summary['action']!r}, not 'store': {summary}"]
    if kind == "update" and (summary["id"] != op["id"] or summary["content"] != op["content"]):
        return [f"{where}: the update answered {summary}"]
    if kind == "create_entities" and not op.get("contested") and summary["created"] != [op["name"]]:
        return [f"{where}: a new entity {op['name']!r} was not created: {summary}"]
    if kind == "create_entities" and op.get("contested") and summary["created"] not in ([], [op["name"]]):
        return [f"{where}: contested creation answered {summary}"]
    if kind == "add_observations" and summary["added"] != [op["text"]]:
        return [f"{where}: a new observation was not added: {summary}"]
    if kind == "create_relations" and summary["created"] != 1:
        return [f"{where}: a new relation was not created: {summary}"]
    if kind == "create_lesson" and summary["name"] != op["lesson"]["name"]:
        return [f"{where}: the lesson answered {summary}"]
    if kind == "recall" and op["expect"] not in summary["ids"]:
        return [f"{where}: recalling memory {op['expect']} by its own text did not return it (got {summary['ids']})"]
    if kind == "search_nodes" and op["expect"] not in summary["names"]:
        return [f"{where}: searching entity {op['expect']!r} by its name did not find it"]
    if kind == "forget_gone":
        return [f"{where}: forgetting the already forgotten memory {op['id']} again (a client's retry) succeeded "
                f"and deleted memory {op['id']} (the id had been handed out again): {summary}"]
    return []


def rejection_expected(op: dict, message: str) -> bool:
    return op["op"] == "forget_gone" and f"no memory {op['id']}" in message


# ============================================================================
# Checking a database against the model
# ============================================================================

def snapshot(conn, user: str) -> dict:
    """Everything the checks read, in one pass."""
    rows = {i: {"content": c, "status": s, "source": src} for i, c, s, src in conn.execute(
        "SELECT id, content, status, source FROM memories WHERE user_id = ?", (user,))}
    history: dict[int, list[str]] = {}
    for memory_id, content in conn.execute(
            "SELECT memory_id, content FROM memory_history WHERE reason = 'updated' ORDER BY id"):
        history.setdefault(memory_id, []).append(content)
    entities = {n: {"id": i, "type": t} for i, n, t in conn.execute(
        "SELECT id, name, entity_type FROM entities WHERE user_id = ?", (user,))}
    observations = {(n, c): m for n, c, m in conn.execute(
        """SELECT e.name, o.content, o.memory_id FROM observations AS o JOIN entities AS e ON e.id = o.entity_id
           WHERE e.user_id = ?""", (user,))}
    relations = set(conn.execute(
        """SELECT f.name, t.name, r.relation_type FROM relations AS r JOIN entities AS f ON f.id = r.from_id
           JOIN entities AS t ON t.id = r.to_id WHERE f.user_id = ?""", (user,)).fetchall())
    lessons = {n: {"frequency": f, "rate": r, "type": et, "message": em, "context": ec, "pattern_memory": p}
               for n, f, r, et, em, ec, p in conn.execute(
                   """SELECT e.name, l.frequency, l.success_rate, l.error_type, l.error_message, l.error_context,
                             l.pattern_memory_id FROM lessons AS l JOIN entities AS e ON e.id = l.entity_id
                      WHERE e.user_id = ?""", (user,))}
    vectors = dict(conn.execute("SELECT memory_id, active FROM memory_vectors").fetchall())
    return {"rows": rows, "history": history, "entities": entities, "observations": observations,
            "relations": relations, "lessons": lessons, "vectors": vectors}


def fts_ids(conn, word: str) -> set[int]:
    return {row[0] for row in conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (f'"{word}"',))}


def content_token(content: str) -> str:
    return next(w.strip(".,") for w in content.split() if w.startswith("z") and w.strip(".,").endswith("z"))


def verify(conn, model: Model, user: str, *, seeded: bool = False) -> dict:
    """Compare the database with the model: per acknowledged write, and as whole sets (no phantoms).

    Returns {"acknowledged", "present", "problems"}; ``present`` counts the acknowledged writes whose
    effect is in the database (a later acknowledged write of the same item is taken into account:
    an updated memory keeps the stored text in its history, a forgotten one must be gone).
    """
    db = snapshot(conn, user)
    rows, history, problems = db["rows"], db["history"], []
    by_content = Counter(r["content"] for r in rows.values())

    def memory_ok(memory_id: int, gen: int, content: str) -> bool:
        if not model.live(gen):  # forgotten later: none of its texts may remain
            return not any(by_content[c] for c in model.gone[gen]["contents"])
        row = rows.get(memory_id)
        return row is not None and (row["content"] == content or content in history.get(memory_id, []))

    def observation_ok(name: str, text: str) -> bool:
        if (name, text) in model.deleted and text not in model.entities.get(name, {}).get("observations", []):
            return (name, text) not in db["observations"]
        return (name, text) in db["observations"]

    def lesson_ok(name: str) -> bool:
        found, wanted = db["lessons"].get(name), model.lessons[name]
        if found is None or db["entities"].get(name, {}).get("type") != "lesson":
            return False
        rate = wanted["successes"] / wanted["uses"] if wanted["uses"] else 0.0
        return (found["frequency"] == wanted["uses"] and abs(found["rate"] - rate) < 1e-9
                and (found["type"], found["message"], found["context"]) == (
                    wanted["pattern"]["type"], wanted["pattern"]["message"], wanted["pattern"]["context"])
                and found["pattern_memory"] in rows)

    present = 0
    for op, summary in model.log:
        kind = op["op"]
        if kind == "store":
            ok = summary["action"] != "store" or memory_ok(summary["id"], op["gen"], op["content"])
        elif kind == "update":
            ok = memory_ok(op["id"], op["gen"], op["content"])
        elif kind in ("forget", "forget_gone"):
            ok = not any(by_content[c] for c in model.gone[op["gen"]]["contents"])
        elif kind == "create_entities":
            ok = all(db["entities"].get(n, {}).get("type") == op["type"] for n in summary["created"]) and all(
                observation_ok(n, text) for n in summary["created"] for text in op["observations"])
        elif kind == "add_observations":
            ok = all(observation_ok(op["name"], text) for text in summary["added"])
        elif kind == "delete_observations":
            ok = (op["name"], op["text"]) not in db["observations"] or op["text"] in model.entities[op["name"]][
                "observations"]
        elif kind == "create_relations":
            ok = (op["from"], op["to"], op["type"]) in db["relations"]
        elif kind in ("create_lesson", "update_lesson_success"):
            ok = lesson_ok(op["lesson"]["name"] if kind == "create_lesson" else op["name"])
        else:
            ok = True
        present += ok
        if not ok:
            problems.append(f"acknowledged write missing or wrong: {op_label(op)} -> {summary}")

    # Memories, as a whole: exactly the live ones, each once, active, indexed, with its exact history.
    own = {i for i, r in rows.items()
           if r["source"] == "memory" and not (seeded and r["content"].startswith(SEED_MARK))}
    gone_ids = {g["id"] for g in model.gone.values()}
    for memory_id in sorted(own - set(model.memories)):
        state = "forgotten by an acknowledged write" if memory_id in gone_ids else "never acknowledged"
        problems.append(f"phantom memory {memory_id} ({state}): {rows[memory_id]['content']!r}")
    for memory_id, wanted in model.memories.items():
        row = rows.get(memory_id)
        if row is None:
            problems.append(f"memory {memory_id} is missing: {wanted['content']!r}")
            continue
        if row["content"] != wanted["content"]:
            problems.append(f"memory {memory_id} reads {row['content']!r}, expected {wanted['content']!r}")
        if row["status"] != "active":
            problems.append(f"memory {memory_id} is {row['status']}, expected active")
        if by_content[wanted["content"]] != 1:
            problems.append(f"memory text stored {by_content[wanted['content']]} times: {wanted['content']!r}")
        if history.get(memory_id, []) != wanted["history"]:
            problems.append(f"memory {memory_id} history {history.get(memory_id, [])} != {wanted['history']}")
        if db["vectors"].get(memory_id) != 1:
            problems.append(f"memory {memory_id}: vector active flag {db['vectors'].get(memory_id)}, expected 1")
        found = fts_ids(conn, content_token(wanted["content"]))
        if found != {memory_id}:
            problems.append(f"memory {memory_id}: the full-text index finds its word in {sorted(found)}")
    reused = {}
    for gone in model.gone.values():
        for content in gone["contents"]:
            if by_content[content]:
                problems.append(f"forgotten memory {gone['id']} still has a row reading {content!r}")
        holder = rows.get(gone["id"])
        if holder is not None and holder["content"] not in gone["contents"]:
            reused[gone["id"]] = (f"memory id {gone['id']} was forgotten, then handed out again to a "
                                  f"{holder['source']} memory: {holder['content']!r}")
        elif holder is None and (gone["id"] in db["vectors"] or gone["id"] in history):
            problems.append(f"forgotten memory {gone['id']} left a vector or history behind")

    # The knowledge graph, as a whole.
    for name in sorted(set(db["entities"]) - set(model.entities)):
        if not name.startswith(SEED_MARK):
            problems.append(f"phantom entity {name!r}")
    for name, wanted in model.entities.items():
        found = db["entities"].get(name)
        if found is None:
            problems.append(f"entity {name!r} is missing")
        elif found["type"] != wanted["type"]:
            problems.append(f"entity {name!r} has type {found['type']!r}, expected {wanted['type']!r}")
    wanted_observations = {(n, o) for n, e in model.entities.items() for o in e["observations"]}
    found_observations = {k for k in db["observations"] if k[0] in model.entities}
    for name, text in sorted(found_observations - wanted_observations):
        problems.append(f"phantom observation of {name!r}: {text!r}")
    for name, text in sorted(wanted_observations - found_observations):
        problems.append(f"observation of {name!r} is missing: {text!r}")
    for (name, text), memory_id in db["observations"].items():
        if (name, text) not in wanted_observations:
            continue
        label_text = text if model.entities[name]["lesson"] else f"{name}: {text}"
        row = rows.get(memory_id)
        if row is None or row["content"] != label_text or row["source"] != "observation":
            problems.append(f"observation {text!r} of {name!r}: its memory {memory_id} is {row}")
        elif by_content[label_text] != 1:
            problems.append(f"observation memory text stored {by_content[label_text]} times: {label_text!r}")
    for relation in sorted(db["relations"] - model.relations):
        problems.append(f"phantom relation {relation}")
    for relation in sorted(model.relations - db["relations"]):
        problems.append(f"relation {relation} is missing")
    for name in sorted(set(db["lessons"]) - set(model.lessons)):
        problems.append(f"phantom lesson {name!r}")
    for name in model.lessons:
        if not lesson_ok(name):
            problems.append(f"lesson {name!r} reads {db['lessons'].get(name)}, expected {model.lessons[name]}")
    return {"acknowledged": len(model.log), "present": present, "problems": problems,
            "ids_reused": [text for _, text in sorted({**reused, **model.reused}.items())]}


def op_label(op: dict) -> str:
    keys = [k for k in ("id", "name", "content", "text", "from", "to", "type", "success") if k in op]
    if "lesson" in op:
        return f"worker {op['owner']} #{op.get('n')} create_lesson {op['lesson']['name']!r}"
    return f"worker {op['owner']} #{op.get('n')} {op['op']} " + " ".join(f"{k}={op[k]!r}" for k in keys)


def cross_checks(conn) -> list[str]:
    """Invariants beyond `yourmemory doctor`: the graph's memories, lesson patterns, edges, BM25 lengths."""
    problems = []
    for entity, text, memory_id, source in conn.execute(
            """SELECT o.entity_id, o.content, o.memory_id, m.source FROM observations AS o
               LEFT JOIN memories AS m ON m.id = o.memory_id WHERE m.id IS NULL OR m.source != 'observation'"""):
        problems.append(f"observation {text!r} of entity {entity} has no graph memory (memory_id {memory_id}, "
                        f"source {source})")
    for entity, memory_id in conn.execute(
            """SELECT l.entity_id, l.pattern_memory_id FROM lessons AS l LEFT JOIN memories AS m
               ON m.id = l.pattern_memory_id WHERE m.id IS NULL OR m.source != 'observation'"""):
        problems.append(f"lesson entity {entity} has no error-pattern memory ({memory_id})")
    for (entity,) in conn.execute(
            """SELECT l.entity_id FROM lessons AS l JOIN entities AS e ON e.id = l.entity_id
               WHERE e.entity_type != 'lesson'"""):
        problems.append(f"lesson entity {entity} is not of type 'lesson'")
    for memory_id, count in conn.execute(
            """SELECT memory_id, count(*) FROM (SELECT memory_id FROM observations UNION ALL
               SELECT pattern_memory_id FROM lessons) WHERE memory_id IS NOT NULL
               GROUP BY memory_id HAVING count(*) > 1"""):
        problems.append(f"graph memory {memory_id} is shared by {count} observations or lessons")
    for (node,) in conn.execute("SELECT source_id FROM memory_edges WHERE source_id = target_id"):
        problems.append(f"memory {node} links to itself")
    for (node, count) in conn.execute(
            "SELECT source_id, count(*) FROM memory_edges GROUP BY source_id HAVING count(*) > ?",
            (yourmemory.EDGE_FANOUT,)):
        problems.append(f"memory {node} has {count} outgoing edges, above the fan-out of {yourmemory.EDGE_FANOUT}")
    for memory_id, content, tokens in conn.execute("SELECT id, content, token_count FROM memories"):
        actual = len(yourmemory.fts_terms(conn, content))
        if actual != tokens:
            problems.append(f"memory {memory_id}: token_count {tokens}, but the text has {actual} FTS tokens")
    return problems


def doctor(db: Path, env: dict | None = None) -> dict:
    """`yourmemory --db DB doctor --json`, through the installed entry point."""
    completed = subprocess.run([entry_point(), "--db", str(db), "doctor", "--json"], capture_output=True, text=True,
                               env=env or child_env(db), timeout=300)
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        report = {"ok": False,
                  "problems": [f"unreadable output: {completed.stdout[-500:]!r} {completed.stderr[-500:]!r}"]}
    return {"rc": completed.returncode, "problems": report.get("problems", []), "counts": report.get("counts", {})}


def integrity(path: Path) -> list[str]:
    """PRAGMA integrity_check through a bare connection (no migration, no journal change)."""
    conn = yourmemory.open_raw(path)
    try:
        return [line for (line,) in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def entry_point() -> str:
    installed = Path(sys.executable).parent / "yourmemory"
    found = str(installed) if installed.is_file() else shutil.which("yourmemory")
    if not found:
        raise SystemExit("the `yourmemory` entry point is not installed next to this Python: pip install -e .")
    return str(Path(found).absolute())


def child_env(db: Path, user: str = "rel", **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YOURMEMORY_") or k == "YOURMEMORY_MODEL_DIR"}
    env.update(YOURMEMORY_DB=str(db), YOURMEMORY_USER=user, YOURMEMORY_HOME=str(Path(db).parent / "home"), **extra)
    return env


def log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


# ============================================================================
# Part 1: concurrent servers
# ============================================================================

def seed_stress_db(db: Path, embedder, count: int) -> dict:
    """Faded memories for the servers' decay job: ``count`` pruned 40 days ago (to be purged) and
    ``count`` last used 400 days ago (to be pruned)."""
    rng, now = random.Random(7), time.time()
    clock = {"t": now - 500 * DAY}
    texts = [f"{SEED_MARK} {sentence(rng, token('seed', 'a', i))}" for i in range(2 * count)]
    vectors = dict(zip(texts, embedder.embed(texts))) if texts else {}

    class Cached:
        def embed_one(self, text):
            return vectors[text]

    with YourMemory(db, user="stress", clock=lambda: clock["t"], embedder=Cached()) as memory:
        purged = [memory.store(t, 0.3)["id"] for t in texts[:count]]
        clock["t"] = now - 40 * DAY
        memory.prune(force=True)
        clock["t"] = now - 400 * DAY
        faded = [memory.store(t, 0.3)["id"] for t in texts[count:]]
    return {"to_purge": purged, "to_prune": faded}


def stress(processes: int = 4, writes: int = 500, *, seed: int = 1, reads_per_write: float = 0.3,
           decay_interval: float = 0.5, seeded: int = 50, contested_every: int = 50, workdir: Path | None = None,
           embedder=None, time_limit_s: float = 3600, quiet: bool = False) -> dict:
    """Run ``processes`` servers, each client doing ``writes`` writes; returns the report."""
    import anyio
    own_dir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="yourmemory-stress-")) if own_dir else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "stress.db"
    started = time.time()
    if embedder is None and seeded:
        embedder = yourmemory.Embedder().load()
    seeds = seed_stress_db(db, embedder, seeded) if seeded else {"to_purge": [], "to_prune": []}
    env = child_env(db, "stress", YOURMEMORY_DECAY_INTERVAL=str(decay_interval))
    model = Model()
    counts = Counter()
    problems: list[str] = []
    errors: list[str] = []
    rejections: list[str] = []
    contested: dict[int, list[int]] = {}
    decay_runs: set[float] = set()
    poll_errors: list[str] = []
    stop_polling = threading.Event()

    def poll_decay():
        """A plain reader beside the servers: samples the decay job's last run twice a second."""
        conn = yourmemory.open_raw(db)
        try:
            while not stop_polling.wait(0.5):
                try:
                    row = conn.execute("SELECT last_run_at FROM jobs WHERE name = 'decay'").fetchone()
                    if row and row[0] and row[0] >= started:
                        decay_runs.add(row[0])
                except Exception as error:  # noqa: BLE001 - every failure is a finding
                    poll_errors.append(repr(error))
        finally:
            conn.close()

    async def worker(w: int) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        rng = random.Random(seed * 1000 + w)
        params = StdioServerParameters(command=entry_point(), env=env, cwd=str(workdir))
        with open(workdir / f"server-{w}.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

                    async def perform(op: dict) -> None:
                        name, args = tool_call(op)
                        group = "write" if op["op"] in WRITE_OPS else "read" if op["op"] in READ_OPS else "probe"
                        counts[f"{group}s attempted"] += 1
                        counts[f"{op['op']} attempted"] += 1
                        try:
                            with anyio.fail_after(CALL_LIMIT_S):
                                result = await session.call_tool(name, args)
                        except Exception as error:  # noqa: BLE001
                            errors.append(f"{op_label(op)}: {error!r}")
                            return
                        text = "\n".join(b.text for b in result.content if getattr(b, "text", None))
                        if result.is_error:
                            if group == "probe" and rejection_expected(op, text):
                                rejections.append(text)
                                counts["probes rejected as expected"] += 1
                            else:
                                errors.append(f"{op_label(op)}: {text}")
                            return
                        summary = summarize(op, json.loads(text))
                        found = result_problems(op, summary)
                        if found and op["op"] == "recall":  # rare; say where the memory was and what it was
                            found = [found[0] + await recall_miss_detail(session, op, json.loads(text))]
                        problems.extend(found)
                        counts[f"{group}s acknowledged"] += 1
                        if group == "probe" and op["id"] not in model.memories:
                            problems.append(f"{op_label(op)} succeeded on an id no memory holds: {summary}")
                        if op.get("contested"):
                            contested[-op["n"]].extend([w] if summary["created"] else [])
                        model.apply(op, summary)

                    for n in range(writes):
                        if contested_every and n % contested_every == contested_every // 2:
                            contested.setdefault(n // contested_every, [])
                            await perform(contested_op(w, n // contested_every))
                        else:
                            op = next_write(rng, model, w, f"s{w}", n, shared_pool=True)
                            while op["op"] in PROBE_OPS:  # deliberate rejections come on top of the writes
                                await perform(op)
                                op = next_write(rng, model, w, f"s{w}", n, shared_pool=True)
                            await perform(op)
                        while rng.random() < reads_per_write:
                            read_op = next_read(rng, model, w)
                            if read_op is None:
                                break
                            await perform(read_op)
                            if rng.random() < 0.5:
                                break
                        if (n + 1) % max(1, writes // 10) == 0:
                            log(f"stress: worker {w} {n + 1}/{writes} writes, {time.time() - started:.0f}s", quiet)

    async def run_all() -> None:
        with anyio.fail_after(time_limit_s):
            async with anyio.create_task_group() as group:
                for w in range(processes):
                    group.start_soon(guarded, w)

    async def guarded(w: int) -> None:
        try:
            await worker(w)
        except Exception as error:  # noqa: BLE001 - a crashed client is a finding, not a reason to stop the others
            errors.append(f"worker {w} stopped: {error!r}")

    poller = threading.Thread(target=poll_decay, daemon=True)
    poller.start()
    try:
        anyio.run(run_all)
    finally:
        stop_polling.set()
        poller.join()
    wall = time.time() - started

    # Contested entities: exactly one acknowledged creator each.
    for k, winners in sorted(contested.items()):
        if len(winners) != 1:
            problems.append(f"contested entity 'Contested {k}': {len(winners)} creations acknowledged ({winners})")

    conn = yourmemory.connect(db)
    try:
        report = verify(conn, model, "stress", seeded=True)
        extra = cross_checks(conn)
        rows = dict(conn.execute("SELECT id, status FROM memories").fetchall())
        last_decay = conn.execute("SELECT last_run_at FROM jobs WHERE name = 'decay'").fetchone()
    finally:
        conn.close()
    if last_decay and last_decay[0] >= started:
        decay_runs.add(last_decay[0])
    not_purged = [i for i in seeds["to_purge"] if i in rows]
    pruned = sum(rows.get(i) == "pruned" for i in seeds["to_prune"])
    server_log = "".join((workdir / f"server-{w}.log").read_text() for w in range(processes))
    decay_failures = [line for line in server_log.splitlines() if "decay job failed" in line]
    lock_errors = [e for e in errors + decay_failures + poll_errors if any(word in e.lower() for word in LOCK_WORDS)]
    checked = doctor(db, env)
    if not_purged:
        problems.append(f"{len(not_purged)} memories pruned over 30 days ago were not purged by the decay job")
    if not decay_runs:
        problems.append("the decay job never ran during the stress run")
    result = {
        "processes": processes, "writes_per_process": writes, "seed": seed, "decay_interval_s": decay_interval,
        "writes_attempted": counts["writes attempted"], "writes_acknowledged": counts["writes acknowledged"],
        "acknowledged_writes_present": report["present"], "acknowledged_writes_checked": report["acknowledged"],
        "reads_attempted": counts["reads attempted"], "reads_acknowledged": counts["reads acknowledged"],
        "probes_attempted": counts["probes attempted"],
        "probes_rejected_as_expected": counts["probes rejected as expected"],
        "operations": {k.removesuffix(" attempted"): v for k, v in sorted(counts.items())
                       if k.endswith(" attempted") and k.split()[0] not in ("writes", "reads", "probes")},
        "final_state": {"memories": len(model.memories), "forgotten": len(model.gone),
                        "entities": len(model.entities), "relations": len(model.relations),
                        "lessons": len(model.lessons),
                        "lesson_uses": sum(x["uses"] for x in model.lessons.values())},
        "contested_entities": len(contested),
        "ids_reused": len(report["ids_reused"]), "id_reuse_samples": report["ids_reused"][:10],
        "errors": len(errors), "lock_errors": len(lock_errors), "error_samples": errors[:20],
        "decay_job_failures": len(decay_failures), "decay_failure_samples": decay_failures[:10],
        "decay_runs_observed": len(decay_runs), "reader_errors": len(poll_errors),
        "seeded_faded": len(seeds["to_prune"]), "seeded_faded_pruned": pruned,
        "seeded_to_purge": len(seeds["to_purge"]), "seeded_not_purged": len(not_purged),
        "problems": problems + report["problems"], "cross_check_problems": extra,
        "doctor_rc": checked["rc"], "doctor_problems": checked["problems"], "doctor_counts": checked["counts"],
        "wall_s": round(wall, 1), "database": str(db),
    }
    if own_dir and result["errors"] == 0 and not result["problems"] and not extra and checked["rc"] == 0:
        shutil.rmtree(workdir, ignore_errors=True)
        result["database"] = "(removed: clean run)"
    return result


def _child_open(fd: int, db: str, go: float) -> None:
    while time.time() < go:  # every child starts at the same instant
        pass
    try:
        YourMemory(db, user=USER, embedder=StandInEmbedder()).close()
        _send(fd, "ok")
    except Exception as error:  # noqa: BLE001 - reported to the parent
        _send(fd, "error " + repr(error)[:2000])


def open_race(processes: int = 8, rounds: int = 3, *, workdir: Path | None = None, memories: int = 300,
              kinds: tuple[str, ...] = ("new", "version 1"), quiet: bool = False) -> dict:
    """``processes`` processes open one database at the same instant, as MCP clients launching their
    servers together do: a new file (creation, WAL switch, every migration) and a version-1 file
    with data (the upgrade). All must open; the file must end at the current version, data intact."""
    own_dir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="yourmemory-open-")) if own_dir else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    yourmemory.nlp()
    template = workdir / "template-open-v1.db"
    build_old_template(template, 1, memories, 0, 5)
    conn = yourmemory.open_raw(template)
    before = data_of(conn)
    conn.close()
    opens, failures, lock_errors, started = 0, [], 0, time.time()
    for round_ in range(rounds):
        for kind in kinds:
            db = workdir / f"open-{round_}-{kind.replace(' ', '')}.db"
            if kind != "new":
                shutil.copy(template, db)
            go = time.time() + 0.5
            children = [fork_child(_child_open, str(db), go) for _ in range(processes)]
            for pid, read_fd in children:
                watched = watch_and_kill(pid, read_fd, "never", 0, limit_s=120)
                opens += watched["lines"] == ["ok"]
                if watched["lines"] != ["ok"]:
                    failures.append(f"round {round_} {kind}: {watched['lines']}")
                    lock_errors += any(word in str(watched["lines"]).lower() for word in LOCK_WORDS)
            conn = yourmemory.open_raw(db)
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                after = data_of(conn)
            finally:
                conn.close()
            if version != yourmemory.SCHEMA_VERSION:
                failures.append(f"round {round_} {kind}: left at version {version}")
            if kind != "new" and any(after.get(t) != rows for t, rows in before.items()):
                failures.append(f"round {round_} {kind}: the upgrade changed the data")
            checked = doctor(db)
            if checked["rc"] != 0:
                failures.append(f"round {round_} {kind}: doctor exited {checked['rc']}: {checked['problems'][:5]}")
        if (round_ + 1) % max(1, rounds // 10) == 0:
            log(f"open race {round_ + 1}/{rounds}: {len(failures)} failures", quiet)
        for kind in kinds:  # keep the folder small on long runs
            db = workdir / f"open-{round_}-{kind.replace(' ', '')}.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
    if own_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"processes": processes, "rounds": rounds, "files": list(kinds),
            "opens_attempted": processes * rounds * len(kinds), "opens_succeeded": opens,
            "lock_errors": lock_errors, "failures": failures, "wall_s": round(time.time() - started, 1)}


# ============================================================================
# Part 2: kill -9
# ============================================================================

USER = "rel"


def _send(fd: int, line: str) -> None:
    data = (line + "\n").encode("utf-8")
    if len(data) > 4000:  # one write of at most PIPE_BUF bytes is atomic: a kill never tears a line
        raise ValueError("report line too long")
    os.write(fd, data)


def fork_child(target, *args) -> tuple[int, int]:
    """Run ``target(write_fd, *args)`` in a forked child; returns (pid, read_fd)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            target(write_fd, *args)
        except BaseException as error:  # noqa: BLE001
            code = 1
            try:
                _send(write_fd, "E " + json.dumps(repr(error)[:3000]))
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def watch_and_kill(pid: int, read_fd: int, marker: str | None, delay: float, limit_s: float = 120) -> dict:
    """Read the child's lines; SIGKILL it ``delay`` s after it reports ``marker`` (None: after the fork)."""
    started = time.monotonic()
    deadline = started + delay if marker is None else None
    data, killed, killed_at = b"", False, None
    while True:
        now = time.monotonic()
        if not killed and deadline is not None and now >= deadline:
            os.kill(pid, signal.SIGKILL)
            killed, killed_at = True, now - started
        if now - started > limit_s and not killed:
            os.kill(pid, signal.SIGKILL)
            killed, killed_at = True, now - started
        wait = 1.0 if killed or deadline is None else max(0.0, deadline - now)
        ready, _, _ = select.select([read_fd], [], [], min(wait, 1.0))
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
            if deadline is None and marker is not None and (b"\n" + data).find(f"\n{marker}\n".encode()) >= 0:
                deadline = time.monotonic() + delay
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    lines = data.decode("utf-8").splitlines()
    return {"lines": lines, "killed": killed and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
            "killed_at_s": None if killed_at is None else round(killed_at, 3), "exit": status}


def kill_moment(lines: list[str]) -> str:
    """Where the writer was when it died: opening the database, between transactions, inside a write
    transaction, or after its last commit but before acknowledging the operation."""
    if "R" not in lines:
        return "open"
    tail = [line for line in lines[lines.index("R"):] if line[:1] in "BAXQ"]
    if not tail or tail[-1][0] in "AX":
        return "between operations"
    since_op = tail[next(i for i in range(len(tail) - 1, -1, -1) if tail[i][0] == "B"):]
    if since_op[-1] == "Q B":
        return "inside a transaction"
    if since_op[-1] == "Q C" and sum(line == "Q B" for line in since_op) >= 1:
        return "after a commit, before the acknowledgement"
    return "preparing (embedding, parsing)"


def replay(lines: list[str], model: Model, problems: list[str]) -> dict | None:
    """Apply the child's acknowledged writes to ``model``; return the op in flight at the kill, if any."""
    pending = None
    for line in lines:
        tag, _, body = line.partition(" ")
        if tag == "B":
            pending = json.loads(body)
        elif tag == "A":
            summary = json.loads(body)
            problems.extend(result_problems(pending, summary))
            model.apply(pending, summary)
            pending = None
        elif tag == "X":
            if not rejection_expected(pending, json.loads(body)):
                problems.append(f"{op_label(pending)} was refused: {json.loads(body)}")
            pending = None
        elif tag == "E":
            problems.append(f"the child failed: {json.loads(body)}")
    return pending


def resolve_in_flight(conn, model: Model, op: dict | None) -> str:
    """Whether the op in flight at the kill is in the database (then it joins the model): 'applied',
    'not applied', or 'none'. A half-applied op shows up in verify() as missing or phantom rows."""
    if op is None or op["op"] in READ_OPS or (op["op"] in PROBE_OPS and op["id"] not in model.memories):
        return "none"
    db = snapshot(conn, USER)
    kind, applied, summary = op["op"], False, {}
    if kind == "store":
        ids = [i for i, r in db["rows"].items() if r["content"] == op["content"]]
        applied, summary = bool(ids), {"action": "store", "id": ids[0] if ids else None}
    elif kind == "update":
        applied = db["rows"].get(op["id"], {}).get("content") == op["content"]
    elif kind in ("forget", "forget_gone"):
        applied = op["id"] not in db["rows"]
    elif kind == "create_entities":
        applied, summary = op["name"] in db["entities"], {"created": [op["name"]]}
    elif kind == "add_observations":
        applied, summary = (op["name"], op["text"]) in db["observations"], {"added": [op["text"]]}
    elif kind == "delete_observations":
        applied = (op["name"], op["text"]) not in db["observations"]
    elif kind == "create_relations":
        applied, summary = (op["from"], op["to"], op["type"]) in db["relations"], {"created": 1}
    elif kind == "create_lesson":
        applied = op["lesson"]["name"] in db["entities"]
    elif kind == "update_lesson_success":
        applied = db["lessons"][op["name"]]["frequency"] == model.lessons[op["name"]]["uses"] + 1
    if applied:
        model.apply(op, summary)
    return "applied" if applied else "not applied"


def after_kill(db: Path, model: Model | None, in_flight: dict | None, problems: list[str]) -> dict:
    """The checks every trial ends with; appends to ``problems``."""
    record = {}
    try:
        lines = integrity(db)
    except Exception as error:  # noqa: BLE001
        lines = [f"cannot open: {error!r}"]
    record["integrity"] = lines[0] if lines == ["ok"] else lines[:5]
    if lines != ["ok"]:
        problems.append(f"PRAGMA integrity_check: {lines[:5]}")
    try:
        with YourMemory(db, user=USER, embedder=StandInEmbedder()) as memory:
            if model is not None:
                record["in_flight"] = resolve_in_flight(memory.db, model, in_flight)
                report = verify(memory.db, model, USER)
                record["acknowledged"], record["present"] = report["acknowledged"], report["present"]
                record["ids_reused"] = len(report["ids_reused"])
                problems.extend(report["problems"])
            problems.extend(cross_checks(memory.db))
    except Exception as error:  # noqa: BLE001
        problems.append(f"the current code cannot open the database: {error!r}")
    checked = doctor(db)
    record["doctor_rc"] = checked["rc"]
    if checked["rc"] != 0:
        problems.append(f"yourmemory doctor exited {checked['rc']}: {checked['problems'][:5]}")
    return record


class PausingConnection:
    """The child's connection, reporting each BEGIN ("Q B") and COMMIT/ROLLBACK ("Q C") so the parent
    knows where the kill landed; with ``pause`` it also sleeps up to that long after every statement,
    so kills land inside write transactions and between a commit and its acknowledgement."""

    def __init__(self, conn, fd: int, rng: random.Random, pause: float):
        self._conn, self._fd, self._rng, self._pause = conn, fd, rng, pause

    def execute(self, sql, *args):
        cursor = self._conn.execute(sql, *args)
        if sql.startswith("BEGIN"):
            _send(self._fd, "Q B")
        elif sql in ("COMMIT", "ROLLBACK"):
            _send(self._fd, "Q C")
        if self._pause:
            time.sleep(self._rng.uniform(0, self._pause))
        return cursor

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _child_writes(fd: int, db: str, model: Model, seed: int, tag: str, max_ops: int, read_share: float,
                  pause: float) -> None:
    memory = YourMemory(db, user=USER, embedder=StandInEmbedder())
    watched = PausingConnection(memory.db, fd, random.Random(seed), pause)
    memory.db = memory.graph.db = memory.lessons.db = watched
    _send(fd, "R")
    rng = random.Random(seed)
    for n in range(max_ops):
        op = next_read(rng, model, 0) if rng.random() < read_share else None
        op = op or next_write(rng, model, 0, tag, n, shared_pool=False)
        _send(fd, "B " + json.dumps(op))
        try:
            summary = summarize(op, library_call(memory, op))
        except YourMemoryError as error:
            _send(fd, "X " + json.dumps(str(error)[:3000]))
            continue
        model.apply(op, summary)
        _send(fd, "A " + json.dumps(summary))
    _send(fd, "D")


def write_trials(count: int, workdir: Path, *, seed: int, chain: int = 10, max_delay: float = 1.5,
                 quiet: bool = False) -> list[dict]:
    """``count`` kills of a library writer; ``chain`` consecutive trials share one database."""
    records, model, db = [], None, None
    rng = random.Random(seed)
    for trial in range(count):
        if trial % chain == 0:
            db, model = workdir / f"writes-{trial // chain}.db", Model()
        problems: list[str] = []
        before = len(model.log)
        during_open = rng.random() < 0.1
        delay = rng.uniform(0.0, 0.08) if during_open else rng.uniform(0.0, max_delay)
        pause = 0.004 if trial % 2 else 0.0
        pid, read_fd = fork_child(_child_writes, str(db), model, seed * 1000 + trial, f"c{trial}x", 5000, 0.1, pause)
        watched = watch_and_kill(pid, read_fd, None if during_open else "R", delay)
        in_flight = replay(watched["lines"], model, problems)
        record = {"kind": "write", "trial": trial, "database": db.name, "delay_s": round(delay, 3),
                  "paused_statements": bool(pause), "moment": kill_moment(watched["lines"]),
                  "killed": watched["killed"], "acknowledged_this_trial": len(model.log) - before,
                  "in_flight_op": None if in_flight is None else in_flight["op"]}
        record.update(after_kill(db, model, in_flight, problems))
        if record["moment"] == "inside a transaction" and record.get("in_flight") == "applied":
            record["moment"] = "at the commit, before reporting it"
        record["problems"] = problems
        records.append(record)
        log(f"crash write {trial + 1}/{count}: {record['acknowledged_this_trial']} acked, in flight "
            f"{record['in_flight_op']} ({record.get('in_flight')}), {len(problems)} problems", quiet)
    return records


# -- the real server, killed --------------------------------------------------------

class JsonRpcServer:
    """The installed entry point over stdio, spoken to directly, so it can be killed at any moment."""

    def __init__(self, db: Path):
        self.errlog = open(Path(db).parent / f"{Path(db).stem}-server.log", "a")
        self.process = subprocess.Popen([entry_point()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errlog, env=child_env(db), cwd=str(Path(db).parent))
        self.buffer, self.next_id, self.started = b"", 0, time.monotonic()
        self.kill_at: float | None = None
        self.sent = False

    def kill_after(self, delay: float) -> None:
        self.kill_at = time.monotonic() + delay

    def request(self, method: str, params: dict | None = None, notify: bool = False) -> dict | None:
        """Send one request and wait for its answer; None when the server was killed first
        (``self.sent`` says whether this request had left before the kill)."""
        message = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        self.sent = False
        if self._due():
            return None
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        self.sent = True
        if notify:
            return {}
        fd = self.process.stdout.fileno()
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                answer = json.loads(line)
                if answer.get("id") == message["id"]:
                    return answer
            if self._due():
                return None
            wait = 1.0 if self.kill_at is None else max(0.0, min(1.0, self.kill_at - time.monotonic()))
            ready, _, _ = select.select([fd], [], [], wait)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self.buffer += chunk
            if time.monotonic() - self.started > CALL_LIMIT_S:
                raise TimeoutError("the server did not answer")

    def _due(self) -> bool:
        if self.kill_at is not None and time.monotonic() >= self.kill_at and self.process.poll() is None:
            self.process.kill()
        return self.kill_at is not None and time.monotonic() >= self.kill_at

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.errlog.close()
        return self.process.returncode


def server_trials(count: int, workdir: Path, *, seed: int, chain: int = 10, max_delay: float = 3.0,
                  quiet: bool = False) -> list[dict]:
    """``count`` kills of the real server (real model) in the middle of a stream of tool calls."""
    from mcp.types import LATEST_PROTOCOL_VERSION
    records, model, db = [], None, None
    rng = random.Random(seed)
    for trial in range(count):
        if trial % chain == 0:
            db, model = workdir / f"server-{trial // chain}.db", Model()
        problems, before, in_flight = [], len(model.log), None
        during_start = rng.random() < 0.15
        delay = rng.uniform(0.0, 2.0) if during_start else rng.uniform(0.0, max_delay)
        server = JsonRpcServer(db)
        if during_start:
            server.kill_after(delay)
        op_rng = random.Random(seed * 1000 + trial)
        acked_any = False
        answer = server.request("initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                                               "clientInfo": {"name": "reliability", "version": "1"}})
        if answer is not None:
            server.request("notifications/initialized", notify=True)
            for n in range(500):
                op = next_read(op_rng, model, 0) if op_rng.random() < 0.1 else None
                op = op or next_write(op_rng, model, 0, f"k{trial}x", n, shared_pool=False)
                name, args = tool_call(op)
                answer = server.request("tools/call", {"name": name, "arguments": args})
                if answer is None:
                    in_flight = op if server.sent else None
                    break
                result = answer.get("result") or {}
                text = "\n".join(b.get("text", "") for b in result.get("content", []))
                if "error" in answer or result.get("isError"):
                    if not rejection_expected(op, text or json.dumps(answer.get("error"))):
                        problems.append(f"{op_label(op)} failed: {text or answer.get('error')}")
                    continue
                summary = summarize(op, json.loads(text))
                problems.extend(result_problems(op, summary))
                model.apply(op, summary)
                if not acked_any:
                    acked_any = True
                    server.kill_after(delay)
        server.close()
        record = {"kind": "server", "trial": trial, "database": db.name, "delay_s": round(delay, 3),
                  "moment": "start" if during_start else "writes", "killed": server.kill_at is not None,
                  "acknowledged_this_trial": len(model.log) - before,
                  "in_flight_op": None if in_flight is None else in_flight["op"]}
        record.update(after_kill(db, model, in_flight, problems))
        record["problems"] = problems
        records.append(record)
        log(f"crash server {trial + 1}/{count}: {record['acknowledged_this_trial']} acked, in flight "
            f"{record['in_flight_op']} ({record.get('in_flight')}), {len(problems)} problems", quiet)
    return records


# -- migrations ---------------------------------------------------------------------

class schema_version:
    """Make this process's YourMemory write databases at an older schema version (for templates)."""

    def __init__(self, version: int):
        self.version = version

    def __enter__(self):
        self.saved, yourmemory.SCHEMA_VERSION = yourmemory.SCHEMA_VERSION, self.version

    def __exit__(self, *exc):
        yourmemory.SCHEMA_VERSION = self.saved


def schema_of(conn) -> list[tuple]:
    return sorted(conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall(),
        key=lambda row: (row[1], row[0]))


def reference_schemas(workdir: Path) -> dict[int, list[tuple]]:
    """The schema a fresh database has at each version."""
    schemas = {}
    for version in range(1, yourmemory.SCHEMA_VERSION + 1):
        path = workdir / f"schema-v{version}.db"
        with schema_version(version):
            conn = yourmemory.connect(path)
        schemas[version] = schema_of(conn)
        conn.close()
    return schemas


def data_of(conn) -> dict:
    """The user data a migration must keep, as comparable values."""
    tables = {"memories": "SELECT id, user_id, content, category, importance, status FROM memories ORDER BY id",
              "vectors": "SELECT memory_id, scope, active FROM memory_vectors ORDER BY memory_id",
              "edges": "SELECT source_id, target_id, weight FROM memory_edges ORDER BY 1, 2",
              "history": "SELECT memory_id, content FROM memory_history ORDER BY id"}
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    if "entities" in names:
        tables.update(entities="SELECT id, name, entity_type FROM entities ORDER BY id",
                      observations="SELECT entity_id, content, memory_id FROM observations ORDER BY id",
                      relations="SELECT from_id, to_id, relation_type FROM relations ORDER BY id")
    if "lessons" in names:
        tables.update(lessons="SELECT entity_id, error_type, pattern_memory_id, frequency FROM lessons ORDER BY 1")
    return {name: conn.execute(sql).fetchall() for name, sql in tables.items()}


def build_old_template(path: Path, version: int, memories: int, entities: int, seed: int) -> None:
    """A database at schema ``version`` holding what that version's code wrote: memories with vectors,
    full-text entries (the schema's triggers), edges, history and audit rows; from version 2 entities,
    observations and relations; from version 3 lessons.

    Plain SQL against the old schema (created by this code's own migrations with SCHEMA_VERSION
    lowered): today's store() writes columns an old schema does not have.
    """
    rng, embed, t = random.Random(seed), StandInEmbedder(), PRUNE_NOW - 10 * DAY
    caller = yourmemory.Caller(USER)
    with schema_version(version):
        conn = yourmemory.connect(path)
    blob = yourmemory.vector_blob

    def memory_row(content: str, source: str | None, scope: str) -> int:
        columns = "user_id, visibility, content, category, importance, token_count, created_at, updated_at, " \
                  "last_accessed_at" + (", source" if source else "")
        values = [USER, "shared", content, "fact", round(rng.uniform(0.3, 0.9), 2),
                  len(yourmemory.fts_terms(conn, content)), t, t, t] + ([source] if source else [])
        # An explicit id: from version 5 a trigger refuses an id SQLite has not assigned yet.
        memory_id = conn.execute(f"INSERT INTO memories (id, {columns}) VALUES "
                                 f"((SELECT coalesce(max(id), 0) + 1 FROM memories), {', '.join('?' * len(values))})",
                                 values).lastrowid
        conn.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (?, ?, ?, 1)",
                     (memory_id, blob(embed.embed_one(content)), scope))
        conn.execute("INSERT INTO audit_log (at, user_id, actor, action, memory_id) VALUES (?, ?, ?, 'store', ?)",
                     (t, USER, caller.actor, memory_id))
        return memory_id

    try:
        conn.execute("BEGIN IMMEDIATE")
        ids, by_topic, fanout = [], {}, Counter()
        for n in range(memories):
            topic = rng.choice(TOPICS)
            content = sentence(rng, token(f"v{version}", "s", n)).replace(" the ", f" the {topic} ", 1)
            memory_id = memory_row(content, "memory" if version >= 2 else None, caller.scope("shared"))
            for other in by_topic.get(topic, [])[-3:]:
                for source, target in ((memory_id, other), (other, memory_id)):
                    if fanout[source] < yourmemory.EDGE_FANOUT:
                        conn.execute("INSERT INTO memory_edges (source_id, target_id, weight, relation) "
                                     "VALUES (?, ?, ?, NULL)", (source, target, round(rng.uniform(0.3, 0.6), 6)))
                        fanout[source] += 1
            by_topic.setdefault(topic, []).append(memory_id)
            ids.append(memory_id)
        for n in range(memories // 10):
            memory_id, content = rng.choice(ids), sentence(rng, token(f"v{version}", "u", n))
            conn.execute("""INSERT INTO memory_history (memory_id, content, importance, reason, changed_at)
                            SELECT id, content, importance, 'updated', ? FROM memories WHERE id = ?""", (t, memory_id))
            conn.execute("UPDATE memories SET content = ?, token_count = ? WHERE id = ?",
                         (content, len(yourmemory.fts_terms(conn, content)), memory_id))
            conn.execute("UPDATE memory_vectors SET embedding = ? WHERE memory_id = ?",
                         (blob(embed.embed_one(content)), memory_id))
        names = []
        for n in range(entities if version >= 2 else 0):
            tok = token(f"v{version}", "e", n)
            names.append(f"{rng.choice(TOPICS).title()} {tok}")
            entity_id = conn.execute("INSERT INTO entities (user_id, name, entity_type, created_at) "
                                     "VALUES (?, ?, ?, ?)", (USER, names[-1], "site", t)).lastrowid
            for k in range(3):
                text = observation(rng, f"{tok}o{k}")
                memory_id = memory_row(f"{names[-1]}: {text}", "observation", caller.graph_scope)
                conn.execute("INSERT INTO observations (entity_id, content, memory_id) VALUES (?, ?, ?)",
                             (entity_id, text, memory_id))
        for n in range(entities if version >= 2 else 0):
            a, b = rng.sample(names, 2)
            conn.execute("""INSERT INTO relations (from_id, to_id, relation_type)
                            SELECT f.id, t.id, ? FROM entities AS f, entities AS t WHERE f.name = ? AND t.name = ?""",
                         (f"feeds {n}", a, b))
        for n in range(entities // 2 if version >= 3 else 0):
            tok, topic = token(f"v{version}", "l", n), rng.choice(TOPICS)
            entity_id = conn.execute("INSERT INTO entities (user_id, name, entity_type, created_at) "
                                     "VALUES (?, ?, 'lesson', ?)", (USER, f"lesson {tok}", t)).lastrowid
            text = f"Restarting the {topic} controller cleared the stall, note {tok}."
            conn.execute("INSERT INTO observations (entity_id, content, memory_id) VALUES (?, ?, ?)",
                         (entity_id, text, memory_row(text, "observation", caller.graph_scope)))
            pattern = memory_row(f"{topic.title()}Stall: {topic} controller stalled, trace {tok} ({topic} pipeline)",
                                 "observation", caller.graph_scope)
            conn.execute("""INSERT INTO lessons (entity_id, error_type, error_message, error_context,
                                pattern_memory_id, metadata, verification_steps, frequency, success_rate,
                                created_at, updated_at) VALUES (?, ?, ?, ?, ?, '{}', '[]', ?, ?, ?, ?)""",
                         (entity_id, f"{topic.title()}Stall", f"{topic} controller stalled, trace {tok}",
                          f"{topic} pipeline", pattern, n, 0.5, t, t))
        conn.execute("COMMIT")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        problems = yourmemory.check_database(conn)["problems"] if version == yourmemory.SCHEMA_VERSION else []
        assert not problems, problems
    finally:
        conn.close()


def _child_migrate(fd: int, db: str, stretch_s: float, seed: int) -> None:
    if stretch_s:
        rng, split = random.Random(seed), yourmemory._split_sql

        def slow_split(script):
            for statement in split(script):
                time.sleep(rng.uniform(0, stretch_s))
                yield statement
        yourmemory._split_sql = slow_split
    _send(fd, "S")
    YourMemory(db, user=USER, embedder=StandInEmbedder()).close()
    _send(fd, "M")


def timed_child(target, *args, marker: str, done: str) -> float:
    """How long a child takes from ``marker`` to ``done`` when nobody kills it."""
    pid, read_fd = fork_child(target, *args)
    started, finished, data = None, None, b""
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
        lines = data.decode().splitlines()
        if started is None and marker in lines:
            started = time.monotonic()
        if finished is None and done in lines:
            finished = time.monotonic()
    os.close(read_fd)
    os.waitpid(pid, 0)
    if started is None or finished is None:
        raise RuntimeError(f"the timing child did not finish: {data[-500:]!r}")
    return finished - started


def migration_trials(count: int, workdir: Path, *, seed: int, memories: int = 3000, entities: int = 100,
                     quiet: bool = False) -> list[dict]:
    """Kill the current code while it upgrades a version-1 or version-2 database."""
    schemas = reference_schemas(workdir)
    templates = {}
    for version in range(1, yourmemory.SCHEMA_VERSION):
        path = workdir / f"template-v{version}.db"
        build_old_template(path, version, memories if version == 1 else memories // 2, entities, seed + version)
        conn = yourmemory.open_raw(path)
        templates[version] = (path, data_of(conn))
        conn.close()
    durations = {}
    for version, (path, _) in templates.items():
        for stretch in (0.0, 0.01):
            trial_db = workdir / "timing.db"
            shutil.copy(path, trial_db)
            durations[(version, stretch)] = timed_child(_child_migrate, str(trial_db), stretch, seed,
                                                        marker="S", done="M")
            for suffix in ("", "-wal", "-shm"):
                Path(str(trial_db) + suffix).unlink(missing_ok=True)
    rng, records = random.Random(seed), []
    for trial in range(count):
        version = 1 + trial % (yourmemory.SCHEMA_VERSION - 1)
        stretch = 0.01 if trial % 4 in (1, 2) else 0.0
        path, before = templates[version]
        db = workdir / f"migration-{trial}.db"
        shutil.copy(path, db)
        # The first two kills surely land inside the upgrade; the others anywhere in it or just after.
        delay = rng.uniform(0.1, 0.7) if trial < 2 else rng.uniform(0, 1.2)
        delay *= durations[(version, stretch)]
        pid, read_fd = fork_child(_child_migrate, str(db), stretch, seed + trial)
        watched = watch_and_kill(pid, read_fd, "S", delay)
        problems: list[str] = []
        replay(watched["lines"], Model(), problems)
        record = {"kind": "migration", "trial": trial, "from_version": version, "stretched": bool(stretch),
                  "delay_s": round(delay, 4), "killed": watched["killed"], "finished": "M" in watched["lines"]}
        try:
            conn = yourmemory.open_raw(db)
            try:
                found = conn.execute("PRAGMA user_version").fetchone()[0]
                record["version_after_kill"] = found
                if found not in schemas or schema_of(conn) != schemas[found]:
                    problems.append(f"after the kill the schema is not that of a whole version (user_version {found})")
                if record["finished"] and found != yourmemory.SCHEMA_VERSION:
                    problems.append(f"the upgrade was reported done but the version is {found}")
                after = data_of(conn)
                for table, rows in before.items():
                    if after.get(table) != rows:
                        problems.append(f"the kill changed table {table} ({len(rows)} rows before, "
                                        f"{len(after.get(table) or [])} after)")
            finally:
                conn.close()
        except Exception as error:  # noqa: BLE001
            problems.append(f"cannot read the killed database: {error!r}")
        record.update(after_kill(db, None, None, problems))
        conn = yourmemory.open_raw(db)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != yourmemory.SCHEMA_VERSION:
                problems.append("reopening with the current code did not finish the upgrade")
            after = data_of(conn)
            for table, rows in before.items():
                if after.get(table) != rows:
                    problems.append(f"after the upgrade table {table} differs from before it")
        finally:
            conn.close()
        record["problems"] = problems
        records.append(record)
        log(f"crash migration {trial + 1}/{count}: v{version}, stretched {bool(stretch)}, killed at version "
            f"{record.get('version_after_kill')}, {len(problems)} problems", quiet)
        for suffix in ("", "-wal", "-shm"):
            if not problems:
                Path(str(db) + suffix).unlink(missing_ok=True)
    return records


# -- prune ------------------------------------------------------------------------------

PRUNE_NOW = 1_900_000_000.0


def build_prune_template(path: Path, purge: int, faded: int, fresh: int, seed: int) -> None:
    """Memories pruned 40 days ago (to purge), memories last used 400 days ago (to prune), fresh ones."""
    rng, clock = random.Random(seed), {"t": PRUNE_NOW - 500 * DAY}
    with YourMemory(path, user=USER, embedder=StandInEmbedder(), clock=lambda: clock["t"]) as memory:
        for n in range(purge):
            memory.store(sentence(rng, token("p", "a", n)), 0.3)
        clock["t"] = PRUNE_NOW - 40 * DAY
        memory.prune(force=True)
        clock["t"] = PRUNE_NOW - 400 * DAY
        for n in range(faded):
            memory.store(sentence(rng, token("p", "b", n)), round(rng.uniform(0.2, 0.5), 2))
        clock["t"] = PRUNE_NOW - DAY
        for n in range(fresh):
            memory.store(sentence(rng, token("p", "f", n)), 0.8)


def prune_state(path: Path) -> tuple:
    conn = yourmemory.open_raw(path)
    try:
        return (tuple(conn.execute("SELECT id, status, pruned_at FROM memories ORDER BY id")),
                tuple(conn.execute("SELECT memory_id, active FROM memory_vectors ORDER BY memory_id")),
                tuple(conn.execute("SELECT source_id, target_id FROM memory_edges ORDER BY 1, 2")),
                tuple(conn.execute("SELECT name, last_run_at FROM jobs ORDER BY name")))
    finally:
        conn.close()


def _child_prune(fd: int, db: str, pause: float = 0.0, seed: int = 0) -> None:
    memory = YourMemory(db, user=USER, embedder=StandInEmbedder(), clock=lambda: PRUNE_NOW)
    memory.db = PausingConnection(memory.db, fd, random.Random(seed), pause)
    _send(fd, "S")
    report = memory.prune(force=True)
    _send(fd, "D " + json.dumps({"pruned": len(report["pruned"]), "purged": report["purged"]}))


def prune_trials(count: int, workdir: Path, *, seed: int, purge: int = 400, faded: int = 2000, fresh: int = 400,
                 quiet: bool = False) -> list[dict]:
    """Kill a child in the middle of a prune: afterwards all of it or none of it, never part."""
    template = workdir / "template-prune.db"
    build_prune_template(template, purge, faded, fresh, seed)
    untouched = prune_state(template)
    reference_db = workdir / "reference-prune.db"
    shutil.copy(template, reference_db)
    with YourMemory(reference_db, user=USER, embedder=StandInEmbedder(), clock=lambda: PRUNE_NOW) as memory:
        reference_report = memory.prune(force=True)
    pruned = prune_state(reference_db)
    durations = {}
    for pause in (0.0, 0.05):  # paused: each statement of the prune is followed by up to 50 ms
        timing_db = workdir / "timing-prune.db"
        shutil.copy(template, timing_db)
        durations[pause] = _time_prune(timing_db, pause)
        for suffix in ("", "-wal", "-shm"):
            Path(str(timing_db) + suffix).unlink(missing_ok=True)
    rng, records = random.Random(seed), []
    for trial in range(count):
        db = workdir / f"prune-{trial}.db"
        shutil.copy(template, db)
        pause = 0.05 if trial % 2 else 0.0
        delay = (rng.uniform(0.1, 0.7) if trial < 2 else rng.uniform(0, 1.3)) * durations[pause]
        pid, read_fd = fork_child(_child_prune, str(db), pause, seed + trial)
        watched = watch_and_kill(pid, read_fd, "S", delay)
        problems: list[str] = []
        finished = any(line.startswith("D ") for line in watched["lines"])
        for line in watched["lines"]:
            if line.startswith("E "):
                problems.append(f"the prune child failed: {line[2:]}")
        state = prune_state(db)
        outcome = "all" if state == pruned else "none" if state == untouched else "partial"
        if outcome == "partial":
            problems.append("the killed prune left part of its work: the state is neither before nor after it")
        if finished and outcome != "all":
            problems.append(f"the prune was reported done but the database shows {outcome} of it")
        marks = [line for line in watched["lines"] if line in ("Q B", "Q C")]
        moment = ("after the commit" if "Q C" in marks else "inside the transaction" if marks
                  else "before the transaction")
        if (moment, outcome) in (("after the commit", "none"), ("before the transaction", "all")):
            problems.append(f"killed {moment}, yet the database shows {outcome} of the prune")
        record = {"kind": "prune", "trial": trial, "paused_statements": bool(pause), "delay_s": round(delay, 4),
                  "killed": watched["killed"], "finished": finished, "moment": moment, "outcome": outcome}
        record.update(after_kill(db, None, None, problems))
        record["problems"] = problems
        records.append(record)
        log(f"crash prune {trial + 1}/{count}: outcome {outcome}, {len(problems)} problems", quiet)
        for suffix in ("", "-wal", "-shm"):
            if not problems:
                Path(str(db) + suffix).unlink(missing_ok=True)
    records.append({"kind": "prune-reference", "pruned": len(reference_report["pruned"]),
                    "purged": reference_report["purged"], "prune_s": round(durations[0.0], 3),
                    "paused_prune_s": round(durations[0.05], 3)})
    return records


def _time_prune(db: Path, pause: float) -> float:
    pid, read_fd = fork_child(_child_prune, str(db), pause, 0)
    started, data = None, b""
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
        if started is None and b"S\n" in data:
            started = time.monotonic()
    finished = time.monotonic()
    os.close(read_fd)
    os.waitpid(pid, 0)
    if started is None or b"\nD " not in data:
        raise RuntimeError(f"the timing prune did not finish: {data[-500:]!r}")
    return finished - started


def crash(write: int = 70, server: int = 20, migration: int = 12, prune: int = 12, *, seed: int = 1,
          workdir: Path | None = None, sizes: dict | None = None, quiet: bool = False) -> dict:
    """All kill trials; returns the report (records per trial, totals per kind, failures)."""
    own_dir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="yourmemory-crash-")) if own_dir else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = {"memories": 3000, "entities": 100, "purge": 400, "faded": 2000, "fresh": 400, **(sizes or {})}
    yourmemory.nlp()  # loaded once here; forked children inherit it
    started, records, walls = time.time(), [], {}
    for kind, run in (("write", lambda: write_trials(write, workdir, seed=seed, quiet=quiet)),
                      ("server", lambda: server_trials(server, workdir, seed=seed, quiet=quiet)),
                      ("migration", lambda: migration_trials(migration, workdir, seed=seed, memories=sizes["memories"],
                                                             entities=sizes["entities"], quiet=quiet)),
                      ("prune", lambda: prune_trials(prune, workdir, seed=seed, purge=sizes["purge"],
                                                     faded=sizes["faded"], fresh=sizes["fresh"], quiet=quiet))):
        if not {"write": write, "server": server, "migration": migration, "prune": prune}[kind]:
            continue
        t = time.time()
        records += run()
        walls[kind] = round(time.time() - t, 1)
    trials = [r for r in records if r["kind"] != "prune-reference"]
    by_kind = {}
    for kind in ("write", "server", "migration", "prune"):
        mine = [r for r in trials if r["kind"] == kind]
        if not mine:
            continue
        by_kind[kind] = {"trials": len(mine), "killed": sum(r["killed"] for r in mine),
                         "failed": sum(bool(r["problems"]) for r in mine), "wall_s": walls[kind]}
        if kind in ("write", "server"):
            by_kind[kind].update(
                acknowledged=sum(r["acknowledged_this_trial"] for r in mine),
                in_flight=Counter(r.get("in_flight") for r in mine if r.get("in_flight_op")),
                moments=Counter(r["moment"] for r in mine))
            chains = {}
            for r in mine:
                chains[r["database"]] = r
            by_kind[kind]["acknowledged_total_checked"] = sum(r.get("acknowledged", 0) for r in chains.values())
            by_kind[kind]["present_total"] = sum(r.get("present", 0) for r in chains.values())
            by_kind[kind]["ids_reused"] = sum(r.get("ids_reused", 0) for r in chains.values())
        if kind == "migration":
            by_kind[kind]["version_after_kill"] = Counter(str(r.get("version_after_kill")) for r in mine)
            by_kind[kind]["stretched"] = sum(r["stretched"] for r in mine)
        if kind == "prune":
            by_kind[kind]["outcomes"] = Counter(r["outcome"] for r in mine)
            by_kind[kind]["moments"] = Counter(r["moment"] for r in mine)
    reference = next((r for r in records if r["kind"] == "prune-reference"), None)
    failures = [f"{r['kind']} trial {r['trial']}: {p}" for r in trials for p in r["problems"]]
    result = {"seed": seed, "trials": len(trials), "killed": sum(r["killed"] for r in trials),
              "failed_trials": sum(bool(r["problems"]) for r in trials), "by_kind": by_kind,
              "prune_reference": reference, "failures": failures, "wall_s": round(time.time() - started, 1),
              "workdir": str(workdir), "records": trials}
    if own_dir and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
        result["workdir"] = "(removed: clean run)"
    return result


# ============================================================================
# CLI
# ============================================================================

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=("all", "stress", "open", "crash"), default="all")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--writes", type=int, default=500, help="writes per server process")
    parser.add_argument("--seeded", type=int, default=50, help="faded memories seeded for the decay job (x2)")
    parser.add_argument("--open-processes", type=int, default=8, help="processes opening one file at once")
    parser.add_argument("--open-rounds", type=int, default=100)
    parser.add_argument("--write-trials", type=int, default=70)
    parser.add_argument("--server-trials", type=int, default=20)
    parser.add_argument("--migration-trials", type=int, default=12)
    parser.add_argument("--prune-trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="keep databases in this folder")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from common import RESULTS, machine, write_results
    target = RESULTS / "reliability.json"
    payload = json.loads(target.read_text()) if target.exists() else {}
    payload.update(benchmark="reliability", machine=machine(), yourmemory=yourmemory.__version__)
    payload.setdefault("commands", {})
    workdir = Path(args.keep) if args.keep else None
    failed = False
    if args.part in ("all", "stress"):
        report = stress(args.processes, args.writes, seed=args.seed, seeded=args.seeded,
                        workdir=workdir / "stress" if workdir else None, quiet=args.quiet)
        payload["stress"] = report
        payload["commands"]["stress"] = (f"python benchmarks/reliability.py stress --processes {args.processes} "
                                         f"--writes {args.writes} --seed {args.seed}")
        failed |= bool(report["errors"] or report["problems"] or report["cross_check_problems"] or report["doctor_rc"])
        print_stress(report)
    if args.part in ("all", "open"):
        race = open_race(args.open_processes, args.open_rounds, workdir=workdir / "open" if workdir else None,
                         quiet=args.quiet)
        payload["open_race"] = race
        payload["commands"]["open_race"] = (f"python benchmarks/reliability.py open --open-processes "
                                            f"{args.open_processes} --open-rounds {args.open_rounds}")
        failed |= bool(race["failures"])
        print(f"open race: {race['opens_succeeded']}/{race['opens_attempted']} simultaneous opens succeeded "
              f"({race['processes']} processes x {race['rounds']} rounds x new + version-1 file), "
              f"{race['lock_errors']} 'database is locked', {race['wall_s']} s")
        for line in race["failures"][:10]:
            print(f"    {line}")
    if args.part in ("all", "crash"):
        report = crash(args.write_trials, args.server_trials, args.migration_trials, args.prune_trials,
                       seed=args.seed, workdir=workdir / "crash" if workdir else None, quiet=args.quiet)
        payload["crash"] = {k: v for k, v in report.items() if k != "records"}
        payload["crash_records"] = report["records"]
        payload["commands"]["crash"] = (
            f"python benchmarks/reliability.py crash --write-trials {args.write_trials} --server-trials "
            f"{args.server_trials} --migration-trials {args.migration_trials} --prune-trials {args.prune_trials} "
            f"--seed {args.seed}")
        failed |= bool(report["failures"])
        print_crash(report)
    records = payload.pop("crash_records", None)
    if records is not None:
        payload["records"] = records
    path = write_results("reliability.json", payload)
    print(f"results: {path}")
    return 1 if failed else 0


def print_stress(r: dict) -> None:
    print(f"stress: {r['processes']} servers x {r['writes_per_process']} writes, {r['wall_s']} s")
    print(f"  writes attempted {r['writes_attempted']}, acknowledged {r['writes_acknowledged']}, "
          f"present {r['acknowledged_writes_present']}/{r['acknowledged_writes_checked']}")
    print(f"  reads {r['reads_acknowledged']}/{r['reads_attempted']}, deliberate rejections "
          f"{r['probes_rejected_as_expected']}/{r['probes_attempted']}")
    print(f"  errors {r['errors']} (locked/busy {r['lock_errors']}), decay runs observed {r['decay_runs_observed']}, "
          f"decay job failures {r['decay_job_failures']}, seeded faded pruned {r['seeded_faded_pruned']}/"
          f"{r['seeded_faded']}, not purged {r['seeded_not_purged']}/{r['seeded_to_purge']}")
    print(f"  doctor exit {r['doctor_rc']}; problems {len(r['problems'])}, cross-check problems "
          f"{len(r['cross_check_problems'])}")
    for line in (r["problems"] + r["cross_check_problems"] + r["doctor_problems"] + r["error_samples"])[:30]:
        print(f"    {line}")


def print_crash(r: dict) -> None:
    print(f"crash: {r['trials']} trials ({r['killed']} killed), {r['failed_trials']} failed, {r['wall_s']} s")
    for kind, k in r["by_kind"].items():
        print(f"  {kind}: {json.dumps(k, default=dict)}")
    for line in r["failures"][:40]:
        print(f"    {line}")


if __name__ == "__main__":
    sys.exit(main())
