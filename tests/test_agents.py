"""Agents: API keys, shared and private memories, revocation, the audit log - and every path a private
memory could leak by.

Two agents of user "ada" (coder, reviewer) and one of user "bob" (assistant), the real model and SQLite.
Every test attacks coder's private memory from another caller and checks nothing of it gets through.
"""
import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from conftest import installed_entry_point

from yourmemory import InvalidInput, NotFound, YourMemory, YourMemoryError, iso

INVALID = "invalid or revoked API key"
SHARED = "The billing API authenticates requests with signed JWT tokens"
NEIGHBOUR = "JWT tokens for the billing API are signed with RS256 keys"
SECRET = "The billing API has an unpatched authentication bypass in its JWT validation, tracked as XK-4471"
PASSWORD = "The staging DB password is hunter2"
CONTRADICTION = "The staging DB password is hunter3"
KEY = re.compile(r"\bym_[A-Za-z0-9_-]+")
STATE_TABLES = ("memories", "memory_edges", "memory_history", "audit_log", "agents")


@pytest.fixture
def team(memory):
    return SimpleNamespace(
        coder=memory.register_agent("coder", description="writes code")["api_key"],
        reviewer=memory.register_agent("reviewer")["api_key"],
        bob=memory.register_agent("assistant", user_id="bob")["api_key"])


@pytest.fixture
def secret(memory, team):
    """Two related shared memories, then coder's private one, linked to both in the graph."""
    shared = memory.store(SHARED, importance=0.6)["id"]
    neighbour = memory.store(NEIGHBOUR, importance=0.6)["id"]
    private = memory.store(SECRET, importance=0.9, api_key=team.coder, visibility="private")["id"]
    return SimpleNamespace(shared=shared, neighbour=neighbour, private=private)


def ids(result) -> list[int]:
    return [m["id"] for m in result["memories"]]


def snapshot(memory) -> dict:
    return {table: memory.db.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall() for table in STATE_TABLES}


def other_callers(team):
    return {"reviewer": team.reviewer, "user ada (no key)": None, "bob's agent": team.bob}


# -- keys ---------------------------------------------------------------------------------------------

def test_a_key_is_ym_plus_32_random_bytes_and_the_database_holds_only_its_sha256(memory, db_path):
    key = memory.register_agent("coder")["api_key"]
    assert KEY.fullmatch(key), key
    raw = base64.urlsafe_b64decode(key[3:] + "=" * (-len(key[3:]) % 4))
    assert len(raw) >= 32
    assert memory.register_agent("reviewer")["api_key"] != key
    memory.store(SECRET, api_key=key, visibility="private")
    memory.recall("billing API", api_key=key)

    digest = hashlib.sha256(key.encode()).hexdigest()
    assert memory.db.execute("SELECT key_hash FROM agents WHERE agent_id = 'coder'").fetchall() == [(digest,)]
    tables = [row[0] for row in memory.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "agents" in tables and "audit_log" in tables
    for table in tables:
        for row in memory.db.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                assert not (isinstance(value, str) and key[3:] in value), f"the key is stored in {table}"
                assert not (isinstance(value, bytes) and key[3:].encode() in value), f"the key is stored in {table}"
    for path in (db_path, Path(f"{db_path}-wal")):
        if path.exists():
            assert key[3:].encode() not in path.read_bytes(), f"the key is in {path.name}"


def test_registering_an_active_agent_again_fails_unless_rotated_and_rotation_keeps_its_rights(memory):
    first = memory.register_agent("coder", can_read=["private"], can_write=["private"], description="writes code")
    private = memory.store(SECRET, api_key=first["api_key"], visibility="private")["id"]
    with pytest.raises(InvalidInput) as refused:
        memory.register_agent("coder")
    assert refused.value.field == "agent_id" and "coder" in str(refused.value)
    assert memory.recall("XK-4471", api_key=first["api_key"])["memoriesFound"] == 1, "the failed register broke the key"

    second = memory.register_agent("coder", rotate=True)
    assert second["rotated"] is True and second["api_key"] != first["api_key"]
    assert (second["can_read"], second["can_write"], second["description"]) == (["private"], ["private"], "writes code")
    for call in (lambda: memory.store("The linter is ruff", api_key=first["api_key"], visibility="private"),
                 lambda: memory.recall("XK-4471", api_key=first["api_key"])):
        with pytest.raises(InvalidInput, match=INVALID):
            call()
    assert ids(memory.recall("XK-4471", api_key=second["api_key"])) == [private]
    with pytest.raises(InvalidInput, match="visibility"):
        memory.store("The linter is ruff", api_key=second["api_key"])  # still may not write shared
    listed = memory.list_agents()
    assert [(a["agent_id"], a["active"]) for a in listed] == [("coder", False), ("coder", True)]
    assert first["api_key"][3:] not in json.dumps(listed) and second["api_key"][3:] not in json.dumps(listed)


def test_a_revoked_key_is_refused_by_every_operation_and_writes_nothing(memory, team, secret):
    assert memory.revoke_agent("coder") == {"agent_id": "coder", "user": "ada", "revoked": True}
    before = snapshot(memory)
    calls = {
        "store": lambda key: memory.store("The linter is ruff", api_key=key, visibility="private"),
        "recall": lambda key: memory.recall("XK-4471", top_k=100, api_key=key),
        "update": lambda key: memory.update(secret.private, "The bypass is patched", api_key=key),
        "forget": lambda key: memory.forget(secret.private, api_key=key),
        "get": lambda key: memory.get(secret.private, api_key=key),
        "restore": lambda key: memory.restore(secret.private, api_key=key),
        "stats": lambda key: memory.stats(api_key=key),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidInput, match=INVALID) as refused:
            call(team.coder)
        assert refused.value.field == "api_key", name
    assert snapshot(memory) == before
    with pytest.raises(NotFound, match="coder"):
        memory.revoke_agent("coder")


BAD_KEYS = {
    "made up": lambda key: "ym_" + secrets.token_urlsafe(32),
    "empty": lambda key: "",
    "integer": lambda key: 12345,
    "bytes": lambda key: key.encode(),
    "list": lambda key: [key],
    "lone surrogate": lambda key: key[:-1] + "\ud800",
    "trailing newline": lambda key: key + "\n",
    "the stored hash": lambda key: hashlib.sha256(key.encode()).hexdigest(),
}


@pytest.mark.parametrize("bad", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_a_bad_key_gets_the_one_invalid_key_error_and_writes_nothing(memory, team, secret, bad):
    before = snapshot(memory)
    for call in (lambda: memory.store("The linter is ruff", api_key=bad(team.coder)),
                 lambda: memory.recall("XK-4471", api_key=bad(team.coder)),
                 lambda: memory.get(secret.private, api_key=bad(team.coder))):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert str(refused.value) == f"api_key: {INVALID}"
    assert snapshot(memory) == before


def test_a_key_of_bobs_agent_cannot_act_for_ada_nor_read_her_memories(memory, team, secret):
    before = snapshot(memory)
    for call in (lambda: memory.recall(SHARED, top_k=100, user_id="ada", api_key=team.bob),
                 lambda: memory.store("Bob's agent was here", user_id="ada", api_key=team.bob),
                 lambda: memory.get(secret.shared, user_id="ada", api_key=team.bob),
                 lambda: memory.stats(user_id="ada", api_key=team.bob)):
        with pytest.raises(YourMemoryError) as refused:
            call()
        # says why: the key is valid, but not for the user named
        assert str(refused.value).startswith(f"api_key: {INVALID} for user 'ada' (a key acts for the user who")
    assert snapshot(memory) == before
    # Without user_id the key speaks for bob, whose namespace is empty.
    assert memory.recall(SHARED, top_k=100, api_key=team.bob)["memoriesFound"] == 0
    with pytest.raises(NotFound):
        memory.get(secret.shared, api_key=team.bob)
    stored = memory.store("Bob's agent was here", api_key=team.bob)
    assert memory.db.execute("SELECT user_id, agent_id FROM memories WHERE id = ?", (stored["id"],)).fetchone() == (
        "bob", "assistant")


# -- recall -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["XK-4471", "Is there a security hole in how the billing API checks JWTs?", SECRET],
                         ids=["lexical token", "semantic", "the exact text"])
def test_recall_never_returns_another_agents_private_memory(memory, team, secret, query):
    for top_k in (1, 5, 100):
        for name, key in other_callers(team).items():
            found = memory.recall(query, top_k=top_k, api_key=key)
            assert secret.private not in ids(found), f"{name} recalled coder's private memory (top_k={top_k})"
            assert "XK-4471" not in json.dumps(found), f"{name} saw coder's private text (top_k={top_k})"
    assert secret.private in ids(memory.recall(query, top_k=5, api_key=team.coder))


def test_graph_expansion_never_walks_into_a_private_memory(memory, team, secret):
    edges = set(memory.db.execute("SELECT source_id, target_id FROM memory_edges").fetchall())
    assert (secret.private, secret.shared) in edges, "the private memory is not linked: nothing to attack"
    assert (secret.shared, secret.private) not in edges, "no shared memory may link to a private one"
    for query in (SHARED, NEIGHBOUR, "billing API JWT authentication"):
        for top_k in range(1, 8):
            for name, key in other_callers(team).items():
                found = memory.recall(query, top_k=top_k, api_key=key)
                assert secret.private not in ids(found), f"{name} reached the private memory through the graph"
    reached = memory.recall(SHARED, top_k=3, api_key=team.coder)
    assert secret.private in ids(reached), "coder itself must still reach its private memory"


def test_private_stores_never_crowd_shared_links_out_of_a_shared_memory(memory, team):
    """Each memory keeps its 10 strongest outgoing links; private memories must not take those places."""
    hub = memory.store("Our deploy pipeline runs on GitHub Actions", importance=0.6)["id"]
    memory.store("The deploy pipeline on GitHub Actions caches Docker layers", importance=0.6)
    shared_links = set(memory.db.execute("SELECT target_id FROM memory_edges WHERE source_id = ?", (hub,)))
    assert shared_links, "the two shared memories must be linked for this test to mean anything"
    for i in range(12):
        memory.store(f"Private note {i}: the deploy pipeline on GitHub Actions needs runner fix {i}",
                     api_key=team.coder, visibility="private")
    assert set(memory.db.execute("SELECT target_id FROM memory_edges WHERE source_id = ?", (hub,))) == shared_links


def test_updating_a_shared_memory_keeps_the_links_private_memories_made_to_it(memory, team, secret):
    assert memory.db.execute("SELECT count(*) FROM memory_edges WHERE source_id = ? AND target_id = ?",
                             (secret.private, secret.shared)).fetchone()[0] == 1
    memory.update(secret.shared, SHARED + " issued by the auth service", api_key=team.reviewer)
    assert memory.db.execute("SELECT count(*) FROM memory_edges WHERE source_id = ? AND target_id = ?",
                             (secret.private, secret.shared)).fetchone()[0] == 1


def test_another_callers_recall_leaves_a_private_memory_untouched(memory, team, secret, clock):
    private_before = memory.get(secret.private, api_key=team.coder)
    neighbour_before = memory.get(secret.neighbour)
    clock.advance(days=5)
    memory.recall(SHARED, top_k=1, api_key=team.reviewer)       # propagates to the seed's neighbours
    assert memory.get(secret.neighbour)["last_accessed_at"] > neighbour_before["last_accessed_at"], \
        "recall propagation did not run, so this test proves nothing"
    clock.advance(days=5)
    memory.recall(SHARED, top_k=1)
    memory.recall("XK-4471 billing bypass", top_k=100, api_key=team.reviewer)
    after = memory.get(secret.private, api_key=team.coder)
    for field in ("recall_count", "last_accessed_at", "updated_at", "importance"):
        assert after[field] == private_before[field], f"another caller's recall changed the private {field}"
    assert after["strength"] < private_before["strength"], "untouched for 10 days, it must have faded"


def test_bm25_scores_an_agent_sees_do_not_depend_on_another_agents_private_memories(memory, team):
    """FTS5's bm25() takes IDF and average length over the whole index: a caller must not be able to
    tell from its own scores whether anyone else's private memories contain a word."""
    ticket = memory.store("Release ticket XK-4471 is blocked on the security review")["id"]
    for text in ("The team standup is at 9:30 every weekday", "The CI runner image is ubuntu-24.04",
                 "Ada prefers dark roast coffee in the morning"):
        memory.store(text)

    def reviewer_scores():
        return {m["id"]: m["bm25"] for m in memory.recall("XK-4471", top_k=100, api_key=team.reviewer)["memories"]}

    before = reviewer_scores()
    assert before[ticket] > 0, "the token must carry weight for this test to mean anything"
    memory.store("XK-4471 still reproduces on staging", api_key=team.coder, visibility="private")
    assert reviewer_scores() == before, "reviewer's bm25 reveals that coder's private memories contain XK-4471"
    memory.store("XK-4471 is bob's ticket too", api_key=team.bob)
    assert reviewer_scores() == before, "reviewer's bm25 reveals that bob's memories contain XK-4471"


# -- store: duplicates and contradictions ---------------------------------------------------------------

def test_storing_the_text_of_a_private_memory_reinforces_and_reveals_nothing(memory, team, secret):
    private_before = memory.get(secret.private, api_key=team.coder)
    replies = [memory.store(SECRET, importance=1.0, api_key=team.reviewer, visibility=visibility)
               for visibility in ("private", "shared")]
    for reply in replies:
        assert reply["action"] == "store" and reply["id"] > secret.private
        assert "content" not in reply and "supersededId" not in reply and "supersededContent" not in reply
        assert f"memory {secret.private}" not in reply["message"]
    assert replies[0]["id"] != replies[1]["id"]
    # The user's copy meets reviewer's shared one (same scope), never coder's private one.
    by_user = memory.store(SECRET)
    assert (by_user["action"], by_user["id"]) == ("reinforce", replies[1]["id"])
    assert memory.get(secret.private, api_key=team.coder) == private_before


def test_a_contradiction_of_a_private_fact_supersedes_nothing(memory, team):
    private = memory.store(PASSWORD, api_key=team.coder, visibility="private")["id"]
    for visibility in ("shared", "private"):
        reply = memory.store(CONTRADICTION, api_key=team.reviewer, visibility=visibility)
        assert reply["action"] == "store" and "hunter2" not in json.dumps(reply)
    assert memory.store(CONTRADICTION)["action"] == "reinforce"  # reviewer's shared copy, not coder's
    assert memory.get(private, api_key=team.coder)["status"] == "active"
    assert private in ids(memory.recall("staging DB password", top_k=10, api_key=team.coder))
    # The pair is a contradiction: coder's own private store of it does supersede.
    assert memory.store(CONTRADICTION, api_key=team.coder, visibility="private")["supersededId"] == private


def test_a_private_store_never_reinforces_merges_into_or_supersedes_a_shared_memory(memory, team, secret):
    shared_before = memory.get(secret.shared)
    reply = memory.store(SHARED, importance=1.0, api_key=team.coder, visibility="private")
    assert reply["action"] == "store" and reply["id"] not in (secret.shared, secret.neighbour, secret.private)
    assert memory.get(secret.shared) == shared_before
    password = memory.store(PASSWORD)["id"]
    assert memory.store(CONTRADICTION, api_key=team.coder, visibility="private")["action"] == "store"
    assert memory.get(password)["status"] == "active"


def test_a_store_reply_counts_no_edges_to_private_memories(memory, team, secret):
    visible = memory.db.execute(
        "SELECT count(*) FROM memory_edges AS e JOIN memories AS t ON t.id = e.target_id "
        "WHERE e.source_id = ? AND t.visibility = 'shared'", (secret.shared,)).fetchone()[0]
    for key in (team.reviewer, None):
        reply = memory.store(SHARED, api_key=key)
        assert reply["action"] == "reinforce" and reply["id"] == secret.shared
        assert reply["edges"] == visible, "the edge count reveals links to coder's private memory"


def test_an_agent_that_may_not_read_shared_memories_is_not_shown_them_by_its_stores(memory):
    scribe = memory.register_agent("scribe", can_read=["private"], can_write=["shared", "private"])["api_key"]
    password = memory.store(PASSWORD)["id"]
    standup = memory.store("The team standup is at 9:30 every weekday")["id"]
    superseding = memory.store(CONTRADICTION, api_key=scribe)
    assert "hunter2" not in json.dumps(superseding) and superseding.get("supersededId") != password
    duplicate = memory.store("The team standup is at 9:30 every weekday", api_key=scribe)
    assert duplicate["id"] != standup, "the reply revealed a shared memory the agent may not read"


# -- rights -------------------------------------------------------------------------------------------

def test_writes_outside_the_callers_rights_are_refused_naming_visibility(memory, team):
    linter = memory.register_agent("linter", can_write=["shared"])["api_key"]
    before = snapshot(memory)
    for key, visibility in ((linter, "private"), (None, "private"), (team.coder, "public"), (team.coder, None)):
        with pytest.raises(InvalidInput) as refused:
            memory.store("The linter is ruff", api_key=key, visibility=visibility)
        assert refused.value.field == "visibility", (key, visibility)
    assert snapshot(memory) == before
    assert memory.store("The linter is ruff", api_key=linter)["visibility"] == "shared"


def test_an_agent_that_reads_only_private_memories_sees_only_its_own(memory, team, secret):
    scribe = memory.register_agent("scribe", can_read=["private"], can_write=["private"])["api_key"]
    own = memory.store("The billing API JWT secret rotates every Monday", api_key=scribe, visibility="private")["id"]
    for query in ("billing API JWT", "XK-4471", SHARED):
        assert ids(memory.recall(query, top_k=100, api_key=scribe)) == [own]
    with pytest.raises(NotFound):
        memory.get(secret.shared, api_key=scribe)
    stats = memory.stats(api_key=scribe)
    assert stats["memories"]["active"] == 1 and stats["edges"] == 0


# -- by id: update, forget, get, restore ------------------------------------------------------------------

def test_another_callers_private_id_is_indistinguishable_from_a_missing_one(memory, team, secret):
    missing = secret.private + 1000
    operations = {
        "update": lambda i, key: memory.update(i, "The bypass is patched", api_key=key),
        "forget": lambda i, key: memory.forget(i, api_key=key),
        "get": lambda i, key: memory.get(i, api_key=key),
        "restore": lambda i, key: memory.restore(i, api_key=key),
    }
    for caller, key in other_callers(team).items():
        for name, operation in operations.items():
            errors = {}
            for memory_id in (secret.private, missing):
                with pytest.raises(YourMemoryError) as raised:
                    operation(memory_id, key)
                errors[memory_id] = (type(raised.value), str(raised.value).replace(str(memory_id), "<id>"))
            assert errors[secret.private] == errors[missing], f"{name} by {caller}: {errors}"
            assert errors[missing][0] is NotFound
    kept = memory.get(secret.private, api_key=team.coder)
    assert (kept["content"], kept["status"], kept["history"]) == (SECRET, "active", [])


# -- stats --------------------------------------------------------------------------------------------------

def test_stats_count_neither_private_memories_nor_their_edges(memory, team, secret):
    shared_edges = memory.db.execute(
        "SELECT count(*) FROM memory_edges AS e JOIN memories AS s ON s.id = e.source_id "
        "JOIN memories AS t ON t.id = e.target_id WHERE s.visibility = 'shared' AND t.visibility = 'shared'"
    ).fetchone()[0]
    all_edges = memory.db.execute("SELECT count(*) FROM memory_edges").fetchone()[0]
    assert all_edges > shared_edges, "the private memory has no edges to hide"
    for key in (team.reviewer, None):
        stats = memory.stats(api_key=key)
        assert stats["memories"]["active"] == 2 and stats["edges"] == shared_edges
        assert sum(stats["categories"].values()) == sum(stats["strength"].values()) == 2
    coder = memory.stats(api_key=team.coder)
    assert coder["memories"]["active"] == 3 and coder["edges"] == all_edges
    assert memory.stats(api_key=team.bob)["memories"]["active"] == 0


# -- audit --------------------------------------------------------------------------------------------------

def test_the_audit_log_names_who_changed_which_memory_when_and_never_a_key(memory, team, clock):
    times = []

    def step():
        clock.advance(seconds=3600)
        times.append(iso(clock.now))

    step(); private = memory.store(SECRET, api_key=team.coder, visibility="private")["id"]
    step(); memory.update(private, SECRET + " and in its session cookies", api_key=team.coder)
    step(); password = memory.store(PASSWORD)["id"]
    step(); newer = memory.store(CONTRADICTION, api_key=team.reviewer)["id"]
    step(); memory.forget(private, api_key=team.coder)
    changes = [(e["actor"], e["action"], e["memory_id"], e["at"]) for e in memory.audit() if e["memory_id"]]
    assert changes[::-1] == [
        ("agent:coder", "store", private, times[0]),
        ("agent:coder", "update", private, times[1]),
        ("user:ada", "store", password, times[2]),
        ("agent:reviewer", "store", newer, times[3]),
        ("agent:reviewer", "supersede", password, times[3]),
        ("agent:coder", "forget", private, times[4]),
    ]
    registered = [(e["actor"], e["action"], e["detail"]) for e in memory.audit() if e["memory_id"] is None]
    assert ("user:ada", "register agent", "coder") in registered
    assert memory.audit(memory_id=password)[0]["action"] == "supersede"
    logged = json.dumps(memory.db.execute("SELECT * FROM audit_log").fetchall())
    for key in (team.coder, team.reviewer, team.bob):
        assert key[3:] not in logged and key[3:] not in json.dumps(memory.audit(limit=1000))


# -- CLI ------------------------------------------------------------------------------------------------------

def test_cli_registers_lists_revokes_and_audits_agents_without_ever_showing_a_key_again(tmp_path, embedder):
    db = tmp_path / "memory.db"
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": "ada", "YOURMEMORY_HOME": str(tmp_path / "home")}
    command = installed_entry_point()

    def cli(*args, ok=True):
        done = subprocess.run([str(command), *args], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert (done.returncode == 0) == ok, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout + done.stderr

    shown = cli("agent", "register", "coder", "--read", "shared,private", "--write", "shared",
                "--description", "writes code")
    keys = KEY.findall(shown)
    assert len(keys) == 1 and "coder" in shown, shown
    key = keys[0]
    with YourMemory(db, user="ada", embedder=embedder) as memory:
        stored = memory.store("The CI runner image is ubuntu-24.04", api_key=key)
        assert stored["action"] == "store"
        with pytest.raises(InvalidInput, match="visibility"):
            memory.store("Coder's scratch note", api_key=key, visibility="private")
    again = cli("agent", "register", "coder", ok=False)
    assert "coder" in again and not KEY.search(again)
    assert "No agents" in cli("--user", "bob", "agent", "list")

    rotated = cli("agent", "register", "coder", "--rotate")
    new_key = KEY.findall(rotated)
    assert len(new_key) == 1 and new_key[0] != key
    listed = cli("agent", "list")
    assert "coder" in listed and "writes code" in listed and "active" in listed and "revoked" in listed
    audit = cli("audit")
    assert re.search(rf"agent:coder\s+store memory {stored['id']}\b", audit), audit
    cli("agent", "revoke", "coder")
    assert "active" not in cli("agent", "list")
    for output in (listed, audit, cli("audit"), cli("agent", "list")):
        assert key[3:] not in output and new_key[0][3:] not in output and not KEY.search(output)
    with YourMemory(db, user="ada", embedder=embedder) as memory:
        for dead in (key, new_key[0]):
            with pytest.raises(InvalidInput, match=INVALID):
                memory.recall("CI runner", api_key=dead)


# -- MCP over stdio ---------------------------------------------------------------------------------------------

def test_mcp_keys_keep_a_private_memory_private_and_no_tool_registers_agents(tmp_path, embedder):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "memory.db"
    with YourMemory(db, user="ada", embedder=embedder) as memory:
        coder = memory.register_agent("coder")["api_key"]
        reviewer = memory.register_agent("reviewer")["api_key"]
        ghost = memory.register_agent("ghost")["api_key"]
        memory.revoke_agent("ghost")
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": "ada", "YOURMEMORY_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(command=installed_entry_point(), env=env, cwd=str(tmp_path))

    async def call(client, tool, **arguments):
        result = await client.call_tool(tool, arguments)
        text = "\n".join(block.text for block in result.content if getattr(block, "text", None))
        return result.is_error, (text if result.is_error else json.loads(text))

    async def flow():
        with anyio.fail_after(300), open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    out = {"tools": (await client.list_tools()).tools}
                    out["private"] = await call(client, "store_memory", content=SECRET, api_key=coder,
                                                visibility="private")
                    out["shared"] = await call(client, "store_memory", content=SHARED)
                    for name, key in (("reviewer", reviewer), ("user", None), ("coder", coder)):
                        args = {"api_key": key} if key else {}
                        out[name] = [await call(client, "recall_memory", query=q, top_k=100, **args)
                                     for q in ("XK-4471", SECRET)]
                    out["ghost"] = [await call(client, "store_memory", content="Ghost was here", api_key=ghost),
                                    await call(client, "recall_memory", query="XK-4471", api_key=ghost),
                                    await call(client, "forget_memory", memory_id=1, api_key=ghost)]
                    return out

    out = anyio.run(flow)
    names = {tool.name for tool in out["tools"]}
    assert names == {"store_memory", "recall_memory", "update_memory", "forget_memory", "restore_memory",
                     "create_entities",
                     "create_relations", "add_observations", "delete_entities", "delete_observations",
                     "delete_relations", "read_graph", "search_nodes", "open_nodes", "create_lesson",
                     "update_lesson_success", "find_similar_errors", "get_lesson_recommendations"}
    assert not any(re.search(r"agent|regist|key", name) for name in names)
    assert all("api_key" in tool.input_schema["properties"] for tool in out["tools"])
    error, private = out["private"]
    assert not error and private["visibility"] == "private", private
    for name in ("reviewer", "user"):
        for error, found in out[name]:
            assert not error and private["id"] not in ids(found) and "XK-4471" not in json.dumps(found), name
    assert all(private["id"] in ids(found) for _, found in out["coder"])
    for error, text in out["ghost"]:
        assert error and INVALID in text, text
    with YourMemory(db, user="ada", embedder=embedder) as memory:
        assert memory.db.execute("SELECT count(*) FROM memories WHERE agent_id = 'ghost' "
                                 "OR content LIKE 'Ghost%'").fetchone()[0] == 0
        assert memory.get(private["id"], api_key=coder)["status"] == "active"


def test_an_agents_pruned_private_memory_is_restored_from_the_cli_with_its_key(tmp_path, embedder, clock):
    """The prune report says pruned memories can be restored; an agent's private one too, with its key."""
    db = tmp_path / "memory.db"
    clock.now = time.time() - 400 * 86400
    with YourMemory(db, user="ada", clock=clock, embedder=embedder) as memory:
        key = memory.register_agent("coder", can_read=["shared", "private"], can_write=["shared", "private"])["api_key"]
        private = memory.store("The flaky ARM runner needs a reboot after kernel updates", importance=0.1,
                               category="failure", api_key=key, visibility="private")["id"]
        clock.now = time.time()
        assert private in memory.prune()["pruned"]
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": "ada", "YOURMEMORY_HOME": str(tmp_path / "home")}

    def cli(*args):
        return subprocess.run([installed_entry_point(), *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
    hidden = cli("restore", str(private))
    assert hidden.returncode == 1 and f"no memory {private}" in hidden.stderr  # the user alone may not see it
    restored = cli("restore", str(private), "--api-key", key)
    assert restored.returncode == 0 and f"Restored memory {private}" in restored.stdout, restored.stderr
    with YourMemory(db, user="ada", embedder=embedder) as memory:
        assert memory.get(private, api_key=key)["status"] == "active"


def test_knowledge_graph_deletions_are_in_the_audit_log(memory, team):
    memory.graph.create_entities([{"name": "Kiosk", "entityType": "project",
                                   "observations": ["Runs on a Pi 4", "Boots from USB"]}], api_key=team.coder)
    observations = dict(memory.db.execute("SELECT content, memory_id FROM observations"))
    memory.graph.delete_observations([{"entityName": "Kiosk", "observations": ["Boots from USB"]}], api_key=team.coder)
    memory.graph.delete_entities(["Kiosk"], api_key=team.coder)
    forgotten = [(e["actor"], e["action"], e["memory_id"], e["detail"]) for e in memory.audit()
                 if e["action"] == "forget"]
    assert forgotten == [("agent:coder", "forget", observations["Runs on a Pi 4"], "knowledge graph"),
                         ("agent:coder", "forget", observations["Boots from USB"], "knowledge graph")]


def test_deleted_entities_and_relations_are_named_in_the_audit_log(memory, team):
    """An entity without observations, and the relations going with it, had left no trace at all."""
    memory.graph.create_entities([{"name": "Kiosk", "entityType": "project", "observations": []},
                                  {"name": "Pi", "entityType": "device", "observations": ["Has 4 GB"]}],
                                 api_key=team.coder)
    memory.graph.create_relations([{"from": "Kiosk", "to": "Pi", "relationType": "runs_on"},
                                   {"from": "Pi", "to": "Kiosk", "relationType": "hosts"}], api_key=team.coder)
    memory.graph.delete_relations([{"from": "Pi", "to": "Kiosk", "relationType": "hosts"},
                                   {"from": "Pi", "to": "Kiosk", "relationType": "never_there"}], api_key=team.coder)
    memory.graph.delete_entities(["Kiosk"], api_key=team.coder)
    logged = [(e["actor"], e["action"], e["detail"]) for e in memory.audit() if e["memory_id"] is None
              and e["action"].startswith("delete")]
    assert logged == [("agent:coder", "delete entity", "'Kiosk' (project), 0 observations, 1 relations"),
                      ("agent:coder", "delete relation", "'Pi' hosts 'Kiosk'")]
