"""The installed `yourmemory` entry point, driven over stdio by the official MCP client.

Every test launches the real server process (real model, real SQLite) on a database in tmp_path,
except one that runs serve() in-process to check how it shuts down; launches are few because each
one costs seconds.
"""
import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import asynccontextmanager, closing

import anyio
import pytest
from conftest import LEES_NEWS, installed_entry_point
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import yourmemory
from yourmemory import YourMemory

MEMORY_TOOLS = {"store_memory", "recall_memory", "update_memory", "forget_memory", "restore_memory"}
GRAPH_TOOLS = {"create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
               "delete_relations", "read_graph", "search_nodes", "open_nodes"}
LESSON_TOOLS = {"create_lesson", "update_lesson_success", "find_similar_errors", "get_lesson_recommendations"}
TOOLS = MEMORY_TOOLS | GRAPH_TOOLS | LESSON_TOOLS
MEMORY_FIELDS = {"id", "content", "category", "importance", "strength", "similarity", "bm25", "score", "via",
                 "recall_count", "created_at", "last_accessed_at"}
FLOW_LIMIT_S = 300  # a hang guard, not a timing assertion




@pytest.fixture
def server(tmp_path):
    """run(flow): launch the server on tmp_path/memory.db, run `await flow(session)`, stop it.

    The inherited environment carries where the model lives (HOME, XDG_CACHE_HOME, ...);
    conftest has already removed any YOURMEMORY_* variables from it.
    """
    db, log = tmp_path / "memory.db", tmp_path / "server-stderr.log"
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": "tester",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(command=installed_entry_point(), env=env, cwd=str(tmp_path))

    @asynccontextmanager
    async def session():
        with open(log, "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    yield client

    def run(flow):
        async def main():
            with anyio.fail_after(FLOW_LIMIT_S):
                async with session() as client:
                    return await flow(client)
        try:
            return anyio.run(main)
        except Exception as error:
            tail = log.read_text()[-4000:] if log.exists() else "(no stderr)"
            raise AssertionError(f"MCP flow failed: {error!r}\n--- server stderr ---\n{tail}") from error

    run.db = db
    return run


def text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def payload(result) -> dict:
    """The tool's JSON result (its text block), asserting the call succeeded."""
    assert not result.is_error, text(result)
    return json.loads(result.content[0].text)


async def recall(client, query: str, top_k: int = 10) -> dict:
    return payload(await client.call_tool("recall_memory", {"query": query, "top_k": top_k}))


def test_server_lists_exactly_the_documented_tools_while_the_model_is_still_loading(server):
    async def flow(client):
        listed = (await client.list_tools()).tools  # asked right after the handshake
        empty = await client.call_tool("recall_memory", {"query": "anything at all"})
        return client.initialize_result, listed, empty

    init, tools, empty = server(flow)
    assert init.server_info.name == "yourmemory"
    assert "recall_memory" in (init.instructions or "")
    assert {tool.name for tool in tools} == TOOLS and len(tools) == len(TOOLS)
    by_name = {tool.name: tool for tool in tools}
    for tool in tools:
        assert tool.title and tool.description, tool.name
        assert tool.annotations is not None, tool.name
        assert tool.output_schema and tool.output_schema.get("type") == "object", f"{tool.name} has no output schema"
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, schema in properties.items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
        # An API key is checked by its digest, whatever its length; every other string has a limit.
        unbounded = [path for path in string_paths(tool.input_schema, tool.input_schema, tool.name)
                     if not path.endswith(".api_key")]
        assert not unbounded, f"strings with no maxLength (the server refuses over its limits): {unbounded}"
    assert by_name["forget_memory"].annotations.destructive_hint is True
    assert by_name["store_memory"].annotations.destructive_hint is False
    # A repeated store reinforces (recall_count + 1) and a repeated update adds a history row: a client
    # must not retry them as if they were idempotent.
    assert by_name["store_memory"].annotations.idempotent_hint is False
    assert by_name["update_memory"].annotations.idempotent_hint is False
    assert by_name["restore_memory"].annotations.destructive_hint is False
    assert set(by_name["store_memory"].input_schema["required"]) == {"content"}
    assert set(by_name["update_memory"].input_schema["required"]) == {"memory_id", "new_content"}
    assert set(by_name["recall_memory"].output_schema["properties"]) == {"memoriesFound", "context", "memories"}
    assert not empty.is_error, text(empty)
    assert payload(empty)["memoriesFound"] == 0


def string_paths(schema: dict, root: dict, path: str):
    """The paths of the free-text strings in an input schema that advertise no maxLength."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    for branch in schema.get("anyOf", []):
        yield from string_paths(branch, root, path)
    if schema.get("type") == "string" and "enum" not in schema and "const" not in schema \
            and "maxLength" not in schema:
        yield path
    for key, value in schema.get("properties", {}).items():
        yield from string_paths(value, root, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from string_paths(schema["items"], root, f"{path}[]")


def test_store_recall_reinforce_and_supersede_over_stdio(server):
    async def flow(client):
        out = {}
        out["stored"] = await client.call_tool("store_memory", {
            "content": "The deploy script lives in tools/deploy.sh", "importance": 0.7, "category": "fact"})
        out["recalled"] = await client.call_tool("recall_memory", {"query": "where is the deploy script?"})
        out["inferred"] = payload(await client.call_tool("store_memory", {
            "content": "The CI pipeline crashed because the runner ran out of disk"}))
        out["duplicate"] = payload(await client.call_tool("store_memory", {
            "content": "the deploy script lives in tools/deploy.sh"}))
        out["old"] = payload(await client.call_tool("store_memory", {"content": "The project database is Postgres 15"}))
        out["new"] = payload(await client.call_tool("store_memory", {"content": "The project database is Postgres 16"}))
        out["after"] = [await recall(client, query) for query in (
            "project database", "Postgres 15", "which Postgres version does the project use?")]
        return out

    out = server(flow)
    stored = payload(out["stored"])
    assert stored["action"] == "store" and stored["category"] == "fact" and stored["categoryInferred"] is False
    assert out["stored"].structured_content == stored

    recalled = out["recalled"]
    assert not recalled.is_error, text(recalled)
    structured = recalled.structured_content
    assert structured is not None, "recall_memory returned no structured content"
    assert structured["memoriesFound"] == len(structured["memories"]) >= 1
    top = structured["memories"][0]
    assert set(top) == MEMORY_FIELDS
    assert top["id"] == stored["id"] and top["content"] == "The deploy script lives in tools/deploy.sh"
    assert top["category"] == "fact" and top["importance"] == 0.7
    assert top["recall_count"] == 0  # recalled right after its store: a massed recall restarts the clock, no more
    assert top["via"] in ("vector", "bm25", "graph")
    assert "tools/deploy.sh" in structured["context"]

    assert out["inferred"]["categoryInferred"] is True
    assert out["inferred"]["category"] == "failure"

    assert out["duplicate"]["action"] == "reinforce" and out["duplicate"]["id"] == stored["id"]

    assert out["old"]["action"] == "store"
    assert out["new"]["action"] == "supersede"
    assert out["new"]["supersededId"] == out["old"]["id"] != out["new"]["id"]
    for result in out["after"]:
        ids = [m["id"] for m in result["memories"]]
        assert out["old"]["id"] not in ids
        assert not any("Postgres 15" in m["content"] for m in result["memories"])
    assert out["after"][0]["memories"][0]["id"] == out["new"]["id"]


def test_update_changes_what_recall_finds_and_forget_removes_the_memory(server):
    async def flow(client):
        out = {}
        kept = payload(await client.call_tool("store_memory", {"content": "Ada prefers dark roast coffee"}))
        first = payload(await client.call_tool("store_memory", {"content": "The staging server listens on port 8080"}))
        out["ids"] = kept["id"], first["id"]
        out["updated"] = payload(await client.call_tool("update_memory", {
            "memory_id": first["id"], "new_content": "The staging server listens on port 9090", "importance": 0.8}))
        out["after_update"] = await recall(client, "staging server port")
        out["forgot"] = payload(await client.call_tool("forget_memory", {"memory_id": first["id"]}))
        out["after_forget"] = await recall(client, "staging server port 9090")
        out["again"] = await client.call_tool("forget_memory", {"memory_id": first["id"]})
        return out

    out = server(flow)
    kept_id, memory_id = out["ids"]
    assert out["updated"]["action"] == "update" and out["updated"]["id"] == memory_id
    assert out["updated"]["previousContent"] == "The staging server listens on port 8080"
    top = out["after_update"]["memories"][0]
    assert top["id"] == memory_id and top["content"] == "The staging server listens on port 9090"
    assert top["importance"] == 0.8
    assert not any("8080" in m["content"] for m in out["after_update"]["memories"])

    assert out["forgot"]["action"] == "forget" and out["forgot"]["id"] == memory_id
    remaining = [m["id"] for m in out["after_forget"]["memories"]]
    assert memory_id not in remaining and remaining == [kept_id]
    assert out["again"].is_error and "memory_id" in text(out["again"])


def test_restore_memory_brings_back_a_memory_a_store_superseded_and_both_are_recalled(server):
    async def flow(client):
        first = payload(await client.call_tool("store_memory", {"content": "The project database is Postgres 15"}))
        second = payload(await client.call_tool("store_memory", {"content": "The project database is Postgres 16"}))
        restored = payload(await client.call_tool("restore_memory", {"memory_id": second["supersededId"]}))
        found = await recall(client, "Which Postgres version is the project database?")
        again = await client.call_tool("restore_memory", {"memory_id": first["id"]})
        return first, second, restored, found, again

    first, second, restored, found, again = server(flow)
    assert second["action"] == "supersede" and second["supersededId"] == first["id"]
    assert "restore_memory" in second["message"]
    assert restored["action"] == "restore" and restored["memory"]["status"] == "active", restored
    assert {first["id"], second["id"]} <= {m["id"] for m in found["memories"]}
    assert again.is_error and "memory_id" in text(again), "an active memory cannot be restored"


BAD_CALLS = [
    ("store_memory", {"content": ""}, "content"),
    ("store_memory", {"content": "   "}, "content"),
    ("store_memory", {"content": "The build uses Bazel", "importance": 1.5}, "importance"),
    ("store_memory", {"content": "The build uses Bazel", "importance": "high"}, "importance"),
    ("store_memory", {"content": "The build uses Bazel", "category": "opinion"}, "category"),
    ("store_memory", {"content": "x" * (yourmemory.MAX_CONTENT_CHARS + 1)}, "content"),
    ("store_memory", {"content": "Which database do we use?"}, "content"),
    ("store_memory", {"content": "The build uses Bazel", "api_key": "ym_not_a_key"}, "api_key"),
    ("update_memory", {"memory_id": 999999, "new_content": "The build uses Make"}, "memory_id"),
    ("forget_memory", {"memory_id": 999999}, "memory_id"),
    ("recall_memory", {"query": "build tool", "top_k": 0}, "top_k"),
    ("recall_memory", {"query": "build tool", "top_k": 101}, "top_k"),
    ("recall_memory", {"query": "build tool", "api_key": "ym_not_a_key"}, "api_key"),
    # unknown (misspelt) arguments fail, naming themselves, instead of being dropped in silence
    ("store_memory", {"content": "The build uses Bazel", "importnce": 0.9}, "importnce"),  # not within "importance"
    ("recall_memory", {"query": "build tool", "topk": 3}, "topk"),
    ("create_entities", {"entities": [{"name": "Bazel", "entityType": "tool", "observations": ["fast"],
                                       "notes": "hermetic"}]}, "notes"),
]


def test_bad_inputs_are_tool_errors_naming_the_field_and_write_nothing(server):
    async def flow(client):
        results = [await client.call_tool(name, arguments) for name, arguments, _ in BAD_CALLS]
        return results, await recall(client, "build Bazel database question opinion")

    results, after = server(flow)
    for (name, arguments, field), result in zip(BAD_CALLS, results):
        shown = {k: (v if len(str(v)) < 40 else f"<{len(v)} chars>") for k, v in arguments.items()}
        assert result.is_error, f"{name}({shown}) was accepted: {text(result)[:300]}"
        assert field in text(result), f"{name}({shown}): error does not name {field!r}: {text(result)[:300]}"
        if field == "api_key":
            assert "invalid or revoked API key" in text(result)
    assert after["memoriesFound"] == 0
    with YourMemory(server.db, user="tester") as memory:
        stats = memory.stats()
    assert stats["memories"] == {"active": 0, "superseded": 0, "pruned": 0}
    assert stats["edges"] == 0


def test_memories_persist_across_two_server_launches_on_the_same_database(server):
    async def first(client):
        return payload(await client.call_tool("store_memory", {
            "content": "The team standup is at 9:30 every weekday", "importance": 0.9}))

    async def second(client):
        return await recall(client, "when is the standup?")

    stored = server(first)
    assert stored["action"] == "store"
    found = server(second)
    assert found["memories"], "the second launch recalled nothing"
    assert found["memories"][0]["id"] == stored["id"]
    assert found["memories"][0]["content"] == "The team standup is at 9:30 every weekday"
    assert found["memories"][0]["recall_count"] == 0  # within the hour of its store: not a spaced recall


IMMEDIATE_DISCONNECTS = 6  # the abort hit 2 launches in 20 before the fix


def test_the_server_embeds_the_sentences_of_stored_memories_in_the_background(server):
    """A store answers after one model run; the server's background job then embeds each sentence of a memory of
    several alone, and recall ranks that memory by the sentence that answers (test_recall has the same memories
    without the job: there the one on music in the family comes first)."""
    def embedded(memory_id):
        with closing(sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT length(vectors) FROM memory_sentences WHERE memory_id = ?",
                             (memory_id,)).fetchone()
        return row is not None and row[0] > 0

    async def flow(client):
        ids = [payload(await client.call_tool("store_memory", {"content": text, "importance": 0.7}))["id"]
               for text in LEES_NEWS]
        with anyio.fail_after(120):  # a hang guard, not a timing assertion
            while not embedded(ids[0]):
                await anyio.sleep(0.1)
        return ids, await recall(client, "Which instrument is Lee learning?", top_k=2)

    (news, music, _), found = server(flow)
    assert [m["id"] for m in found["memories"]] == [news, music]


def test_a_client_that_disconnects_at_once_leaves_a_server_that_exits_0_every_time(tmp_path):
    """A server whose stdin closes while the model is still loading must wait for the load, not abort.

    onnxruntime aborted the process ("terminate called without an active exception", SIGABRT) when
    the interpreter exited during its session setup in the warm-up thread.
    """
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "memory.db"), "YOURMEMORY_USER": "tester",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    for launch in range(IMMEDIATE_DISCONNECTS):
        done = subprocess.run([installed_entry_point(), "serve"], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        assert (launch, done.returncode, done.stderr) == (launch, 0, ""), done.stderr[-2000:]


def test_serve_returns_only_after_the_model_load_it_started_has_ended(tmp_path, monkeypatch):
    """The deterministic half of the test above: serve() with stdin at EOF from the start returns
    with no warm-up thread left running, although loading the model takes longer than the session."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
    with YourMemory(tmp_path / "memory.db", user="tester", embedder=yourmemory.Embedder()) as memory:
        yourmemory.serve(memory)
        left = [t.name for t in threading.enumerate() if t.name in ("yourmemory-warm-up", "yourmemory-sentences")]
        assert left == []


def test_each_tool_call_first_stops_the_background_model_runs_and_the_job_waits_for_a_quiet_moment(
        tmp_path, embedder):
    """A background model run beside a tool call takes a core from it (a recall took twice as long beside nonstop
    sentence embedding): every tool call starts by stopping them (``on_start``; the server's stops the embedder's
    background runs), and counts as running until it returns, so the job waits until QUIET_SECONDS pass without one."""
    from mcp import Client
    seen = []
    calls = yourmemory.CallsInFlight(quiet_seconds=60, on_start=lambda: seen.append(calls.quiet()))
    with YourMemory(tmp_path / "memory.db", user="ada", embedder=embedder) as memory:
        async def session():
            async with Client(yourmemory.build_server(memory, calls), mode="legacy") as client:
                await client.call_tool("store_memory", {"content": "CI runs on Buildkite"})
                await client.call_tool("recall_memory", {"query": "Where does CI run?"})
        assert calls.quiet()  # no call yet
        anyio.run(session)
    assert seen == [False, False]  # each call began while it counted as running
    assert not calls.quiet()  # the last call ended under 60 s ago
    calls.quiet_seconds = 0
    assert calls.quiet()
    stopped = threading.Event()
    calls.quiet_seconds = 60
    with calls.running():
        waiter = threading.Thread(target=calls.wait_for_quiet, args=(stopped.is_set,))
        waiter.start()
        waiter.join(0.1)
        assert waiter.is_alive()  # it waits while a call runs ...
        stopped.set()  # ... until the server stops
        waiter.join()
