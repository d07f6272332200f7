"""The knowledge-graph tools, checked against the official MCP memory server.

Differential tests: the same (tool, arguments) calls go to the official "Knowledge Graph Memory
Server" (npm ``@modelcontextprotocol/server-memory``, run with node) and to our installed
``yourmemory`` entry point, each over stdio with the official Python MCP client, and the answers
are compared. One session per server per test keeps the launches few.

The official server is a test dependency that pip does not install: the first run installs the
pinned version with npm into ~/.cache/yourmemory-tests/official (the npm registry must be reachable
once), or point ``$YOURMEMORY_OFFICIAL_MEMORY_SERVER`` at its ``dist/index.js`` (or at the folder
holding its ``node_modules``). Without node and npm these tests fail; they do not skip.

What is compared, and how:

* create_entities / create_relations / add_observations: the structured result exactly, in order
  (it follows the order of the input, so order is part of the answer).
* read_graph / open_nodes: the same entities and relations, order-insensitively (the official
  order is its file order, an implementation accident; open_nodes does not even keep the order of
  the names asked for). Observations inside one entity are compared in order: both append.
* search_nodes: every entity the official case-insensitive substring search finds, and those
  first; ours may add semantically related entities after them. Relations: every one the official
  server returns, and exactly those touching at least one returned entity.
* delete_*: ``success`` exactly; ``message`` is free text.
* errors: both fail, ours names what is wrong and carries no stack trace.

Where the official server is sloppy (a duplicate inside one call is stored twice; a relation to a
missing entity is accepted) ours is specified to be strict, and the tests assert that instead.

``test_official_server_harness`` needs only the official server. Every test marked
``needs_our_graph`` drives our implementation of the nine tools and the resource.
"""
import json
import os
import shutil
import subprocess
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest
from conftest import installed_entry_point
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

OFFICIAL_PACKAGE = "@modelcontextprotocol/server-memory"
OFFICIAL_VERSION = "2026.8.31"  # the version whose behaviour these tests pin
OFFICIAL_ENV = "YOURMEMORY_OFFICIAL_MEMORY_SERVER"
OFFICIAL_HOME = Path.home() / ".cache" / "yourmemory-tests" / "official"
INSTALL_HINT = (f"npm install --prefix {OFFICIAL_HOME} {OFFICIAL_PACKAGE}@{OFFICIAL_VERSION}  "
                f"(or set ${OFFICIAL_ENV} to its dist/index.js)")
RESOURCE = "memory://knowledge-graph"
GRAPH_TOOLS = ("create_entities", "create_relations", "add_observations", "delete_entities",
               "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes")
HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")
FLOW_LIMIT_S = 300  # a hang guard, not a timing assertion

needs_our_graph = pytest.mark.needs_our_graph  # drives our knowledge-graph tools (registered in pyproject.toml)


# ---------------------------------------------------------------------------
# Launching the two servers
# ---------------------------------------------------------------------------

def official_server() -> tuple[str, str]:
    """(node, path to the official server's dist/index.js), or the test fails saying how to install it."""
    node = shutil.which("node")
    if not node:
        pytest.fail(f"`node` is not on PATH; the official {OFFICIAL_PACKAGE} needs Node.js 18+. Then: {INSTALL_HINT}")
    configured = os.environ.get(OFFICIAL_ENV)
    base = Path(configured).expanduser() if configured else OFFICIAL_HOME
    candidates = [base] if base.is_file() else [
        base / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js",
        base / "dist" / "index.js"]
    if not configured and not candidates[0].is_file():
        install_official_server()
    for script in candidates:
        if script.is_file():
            return node, str(script)
    where = f"${OFFICIAL_ENV}={configured}" if configured else str(OFFICIAL_HOME)
    pytest.fail(f"the official MCP memory server ({OFFICIAL_PACKAGE}) is not installed at {where}; "
                f"install it with: {INSTALL_HINT}")


def install_official_server() -> None:
    """Install the pinned official server into the test cache (once; later runs reuse it)."""
    npm = shutil.which("npm")
    if not npm:
        pytest.fail(f"`npm` is not on PATH, so the official server cannot be installed: {INSTALL_HINT}")
    OFFICIAL_HOME.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--prefix", str(OFFICIAL_HOME), "--no-audit", "--no-fund",
                           f"{OFFICIAL_PACKAGE}@{OFFICIAL_VERSION}"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"npm could not install the official server ({done.returncode}): {done.stderr[-2000:]}")




class Servers:
    """Start the official server and/or ours in tmp_path and run an async flow against them."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.official_file = tmp_path / "official" / "memory.jsonl"
        self.our_db = tmp_path / "ours" / "memory.db"
        self.logs = {"official": tmp_path / "official-stderr.log", "ours": tmp_path / "ours-stderr.log"}

    def params(self, which: str) -> StdioServerParameters:
        if which == "official":
            node, script = official_server()
            self.official_file.parent.mkdir(parents=True, exist_ok=True)
            return StdioServerParameters(command=node, args=[script], cwd=str(self.tmp),
                                         env={**os.environ, "MEMORY_FILE_PATH": str(self.official_file)})
        self.our_db.parent.mkdir(parents=True, exist_ok=True)
        return StdioServerParameters(command=installed_entry_point(), cwd=str(self.tmp), env={
            **os.environ, "YOURMEMORY_DB": str(self.our_db), "YOURMEMORY_USER": "tester",
            "YOURMEMORY_HOME": str(self.tmp / "home")})

    @asynccontextmanager
    async def session(self, which: str, stack: AsyncExitStack):
        params = self.params(which)
        errlog = stack.enter_context(open(self.logs[which], "a"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        client = await stack.enter_async_context(ClientSession(read, write))
        await client.initialize()
        yield client

    def run(self, flow, *which: str):
        """``flow(*sessions)`` with one session per named server ("official", "ours"), in that order."""
        async def main():
            with anyio.fail_after(FLOW_LIMIT_S):
                async with AsyncExitStack() as stack:
                    sessions = []
                    for name in which:
                        sessions.append(await stack.enter_async_context(self.session(name, stack)))
                    return await flow(*sessions)
        try:
            return anyio.run(main)
        except Exception as error:
            tails = "\n".join(f"--- {name} stderr ---\n{log.read_text()[-3000:]}"
                              for name, log in self.logs.items() if name in which and log.exists())
            raise AssertionError(f"MCP flow failed: {error!r}\n{tails}") from error

    def both(self, steps):
        """Run ``steps`` on the official server and on ours; [(step, official result, our result)]."""
        async def flow(official, ours):
            return [(step, await official.call_tool(step[0], step[1]), await ours.call_tool(step[0], step[1]))
                    for step in steps]
        return self.run(flow, "official", "ours")

    def one(self, which: str, steps):
        async def flow(client):
            return [(step, await client.call_tool(step[0], step[1])) for step in steps]
        return self.run(flow, which)


@pytest.fixture
def servers(tmp_path) -> Servers:
    return Servers(tmp_path)


# ---------------------------------------------------------------------------
# Comparing answers
# ---------------------------------------------------------------------------

def text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def show(step) -> str:
    return f"{step[0]}({json.dumps(step[1], ensure_ascii=False)})"


def graph_key(graph: dict) -> dict:
    """A graph with entity and relation order dropped (observation order inside an entity kept)."""
    return {"entities": sorted((e["name"], e["entityType"], tuple(e["observations"])) for e in graph["entities"]),
            "relations": sorted((r["from"], r["to"], r["relationType"]) for r in graph["relations"])}


def shape_problems(graph) -> list[str]:
    """Our graph answers must have the official shape: exactly these keys, these types."""
    if not isinstance(graph, dict) or set(graph) != {"entities", "relations"}:
        return [f"a graph must be an object with exactly entities and relations, got {graph!r:.300}"]
    problems = []
    for entity in graph["entities"]:
        if set(entity) != {"name", "entityType", "observations"} or not isinstance(entity["observations"], list):
            problems.append(f"entity has the wrong shape: {entity!r:.300}")
    for relation in graph["relations"]:
        if set(relation) != {"from", "to", "relationType"}:
            problems.append(f"relation has the wrong shape: {relation!r:.300}")
    return problems


def error_problems(step, result, names=()) -> list[str]:
    """A tool error must say what is wrong (each of ``names``) and must not carry a stack trace."""
    message = text(result)
    problems = [] if message.strip() else [f"{show(step)}: the error has no message"]
    if "Traceback" in message or 'File "' in message:
        problems.append(f"{show(step)}: the error carries a stack trace: {message[:400]}")
    problems += [f"{show(step)}: the error does not name {name!r}: {message[:300]}"
                 for name in names if name not in message]
    return problems


def differences(step, official, ours, names=()) -> list[str]:
    """How our answer to ``step`` differs from the official one (see the module docstring)."""
    tool, where = step[0], show(step)
    if official.is_error or ours.is_error:
        if not official.is_error:
            return [f"{where}: ours failed where the official server succeeded: {text(ours)[:300]}"]
        if not ours.is_error:
            return [f"{where}: ours succeeded where the official server failed ({text(official)[:200]}): "
                    f"{json.dumps(ours.structured_content)[:300]}"]
        return error_problems(step, ours, names)
    want, got = official.structured_content, ours.structured_content
    if got is None:
        return [f"{where}: ours returned no structured content (text: {text(ours)[:200]})"]
    if tool.startswith("delete_"):
        if got.get("success") is not want["success"] or not isinstance(got.get("message"), str):
            return [f"{where}: official {want}, ours {got}"]
        return []
    if tool in ("read_graph", "open_nodes"):
        problems = shape_problems(got)
        if not problems and graph_key(got) != graph_key(want):
            problems.append(f"{where}:\n  official {graph_key(want)}\n  ours     {graph_key(got)}")
        return problems
    if tool == "search_nodes":
        return search_differences(where, want, got)
    if got != want:  # create_entities, create_relations, add_observations: order follows the input
        return [f"{where}:\n  official {json.dumps(want, ensure_ascii=False)}\n"
                f"  ours     {json.dumps(got, ensure_ascii=False)}"]
    return []


def search_differences(where: str, want: dict, got: dict) -> list[str]:
    """Ours: every official match, those first (any order among them), then maybe related ones."""
    problems = shape_problems(got)
    if problems:
        return problems
    official_names = [e["name"] for e in want["entities"]]
    our_names = [e["name"] for e in got["entities"]]
    head = our_names[:len(official_names)]
    if sorted(head) != sorted(official_names):
        problems.append(f"{where}: the official matches {official_names} must come first in ours, got {our_names}")
    by_name = {e["name"]: e for e in got["entities"]}
    for entity in want["entities"]:
        mine = by_name.get(entity["name"])
        if mine is not None and (mine["entityType"], mine["observations"]) != (
                entity["entityType"], entity["observations"]):
            problems.append(f"{where}: official {entity}, ours {mine}")
    official_relations = set(graph_key(want)["relations"])
    our_relations = set(graph_key(got)["relations"])
    if not official_relations <= our_relations:
        problems.append(f"{where}: ours lacks relations {sorted(official_relations - our_relations)}")
    names = set(our_names)
    strays = [r for r in our_relations if r[0] not in names and r[1] not in names]
    if strays:
        problems.append(f"{where}: ours returns relations touching no returned entity: {strays}")
    if len(our_names) != len(set(our_names)):
        problems.append(f"{where}: ours returns an entity twice: {our_names}")
    return problems


def compare_all(pairs, error_names: dict | None = None) -> None:
    error_names = error_names or {}
    problems = []
    for index, (step, official, ours) in enumerate(pairs):
        problems += differences(step, official, ours, error_names.get(index, ()))
    assert not problems, f"{len(problems)} difference(s) from the official server:\n" + "\n".join(problems)


def entity(name, kind, *observations):
    return {"name": name, "entityType": kind, "observations": list(observations)}


def relation(source, target, kind):
    return {"from": source, "to": target, "relationType": kind}


PEOPLE = [entity("Alice", "person", "likes tea", "works at Acme"),
          entity("Acme", "Company"),
          entity("Bob", "person", "Plays CHESS on Sundays"),
          entity("Carol", "person", "bakes bread")]


# ---------------------------------------------------------------------------
# The official server alone: proves the harness and pins the behaviour we rely on
# ---------------------------------------------------------------------------

def test_official_server_harness(servers):
    """Runs against the official server only, so it passes before our implementation lands."""
    steps = [
        ("create_entities", {"entities": PEOPLE}),
        ("create_entities", {"entities": [entity("Dup", "a", "1"), entity("Dup", "b", "2")]}),
        ("create_relations", {"relations": [relation("Alice", "Acme", "works_at"),
                                            relation("Alice", "Ghost", "haunts")]}),
        ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["x"]},
                                               {"entityName": "Ghost", "contents": ["boo"]}]}),
        ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["likes tea", "n", "n"]}]}),
        ("search_nodes", {"query": "CHESS"}),
        ("open_nodes", {"names": ["Acme", "alice"]}),
        ("read_graph", {}),
    ]

    async def flow(client):
        calls = [await client.call_tool(tool, arguments) for tool, arguments in steps]
        return calls, await client.list_resources(), await client.read_resource(RESOURCE)

    calls, resources, resource = servers.run(flow, "official")
    created, dups, related, ghost, added, search, opened, graph = calls
    assert not any(result.is_error for i, result in enumerate(calls) if i != 3), [text(r) for r in calls]
    assert created.structured_content == {"entities": PEOPLE}
    assert json.loads(text(created)) == PEOPLE
    # sloppy: a repeated name inside one call is stored twice, a dangling relation is accepted
    assert [e["name"] for e in dups.structured_content["entities"]] == ["Dup", "Dup"]
    assert related.structured_content["relations"][1] == relation("Alice", "Ghost", "haunts")
    # an unknown entity fails the whole call (nothing for Bob is written)
    assert ghost.is_error and text(ghost) == "Entity with name Ghost not found"
    assert ghost.structured_content is None
    # already-present observations are skipped, repeats inside one call are both added (sloppy)
    assert added.structured_content == {"results": [{"entityName": "Alice", "addedObservations": ["n", "n"]}]}
    # case-insensitive substring search; relations with at least one end among the matches
    assert [e["name"] for e in search.structured_content["entities"]] == ["Bob"]
    assert search.structured_content["relations"] == []
    # open_nodes: exact names; relations with at least one end among the opened (dangling ones too)
    assert [e["name"] for e in opened.structured_content["entities"]] == ["Acme"]
    assert opened.structured_content["relations"] == [relation("Alice", "Acme", "works_at")]
    bob = next(e for e in graph.structured_content["entities"] if e["name"] == "Bob")
    assert bob["observations"] == ["Plays CHESS on Sundays"]
    assert len(graph.structured_content["entities"]) == 6 and len(graph.structured_content["relations"]) == 2
    assert [str(r.uri) for r in resources.resources] == [RESOURCE]
    assert json.loads(resource.contents[0].text) == graph.structured_content
    # the JSONL file: one compact object per line, entities first, no trailing newline
    stored = servers.official_file.read_text()
    assert not stored.endswith("\n")
    lines = [json.loads(line) for line in stored.split("\n")]
    assert list(lines[0]) == ["type", "name", "entityType", "observations"] and lines[0]["type"] == "entity"
    assert list(lines[-1]) == ["type", "from", "to", "relationType"] and lines[-1]["type"] == "relation"


# ---------------------------------------------------------------------------
# Ours against the official server
# ---------------------------------------------------------------------------

@needs_our_graph
def test_tools_and_resource_are_listed_like_the_official_ones(servers):
    async def flow(official, ours):
        return [(await client.list_tools(), await client.list_resources()) for client in (official, ours)]

    (official_tools, official_resources), (our_tools, our_resources) = servers.run(flow, "official", "ours")
    theirs = {tool.name: tool for tool in official_tools.tools}
    mine = {tool.name: tool for tool in our_tools.tools}
    assert set(theirs) == set(GRAPH_TOOLS), "the official server's tool set changed; re-check the tests"
    missing = [name for name in GRAPH_TOOLS if name not in mine]
    assert not missing, f"our server lacks the knowledge-graph tools {missing}"
    problems = []
    for name in GRAPH_TOOLS:
        official, ours = theirs[name], mine[name]
        if not (ours.title and ours.description):
            problems.append(f"{name}: no title or description")
        for hint in HINTS:
            want = getattr(official.annotations, hint)
            got = getattr(ours.annotations, hint) if ours.annotations else None
            # The official create_* / add_observations say idempotentHint false, yet repeating one of
            # them changes nothing more (in either server), so ours may claim true there.
            if got != want and not (hint == "idempotent_hint" and got is True and not official_is_read_only(official)):
                problems.append(f"{name}: {hint} is {got}, the official server says {want}")
        problems += schema_problems(f"{name} input", official.input_schema, ours.input_schema, exact_required=True)
        if not ours.output_schema:
            problems.append(f"{name}: no output schema")
        else:
            problems += schema_problems(f"{name} output", official.output_schema, ours.output_schema)
    assert not problems, "\n".join(problems)
    listed = {str(resource.uri): resource for resource in our_resources.resources}
    assert RESOURCE in listed, f"{RESOURCE} is not listed: {sorted(listed)}"
    assert listed[RESOURCE].mime_type == "application/json"
    assert [str(r.uri) for r in official_resources.resources] == [RESOURCE]


def official_is_read_only(tool) -> bool:
    return bool(tool.annotations and tool.annotations.read_only_hint)


def schema_problems(where: str, official: dict, ours: dict, exact_required: bool = False) -> list[str]:
    """Ours accepts/produces what the official schema describes: the same properties and types
    (ours may add optional ones) and the same required ones."""
    problems = []
    if official.get("type") != ours.get("type"):
        return [f"{where}: type {ours.get('type')!r}, official {official.get('type')!r}"]
    if official.get("type") == "array":
        return schema_problems(f"{where}[]", official.get("items", {}), ours.get("items", {}), exact_required)
    if official.get("type") != "object":
        return []
    required_official, required_ours = set(official.get("required", [])), set(ours.get("required", []))
    if exact_required and required_official != required_ours:
        problems.append(f"{where}: requires {sorted(required_ours)}, official {sorted(required_official)}")
    if not exact_required and not required_official <= required_ours:
        problems.append(f"{where}: does not promise {sorted(required_official - required_ours)}")
    our_properties = ours.get("properties", {})
    for key, schema in official.get("properties", {}).items():
        if key not in our_properties:
            problems.append(f"{where}: no property {key!r}")
        else:
            problems += schema_problems(f"{where}.{key}", schema, resolve(our_properties[key], ours), exact_required)
    return problems


def resolve(schema: dict, root: dict) -> dict:
    """Follow a local $ref (pydantic puts nested models under $defs) and unwrap anyOf-with-null."""
    while "$ref" in schema:
        schema = root.get("$defs", {}).get(schema["$ref"].rsplit("/", 1)[-1], schema)
        if "$ref" in schema:
            break
    if "type" not in schema and "anyOf" in schema:
        kinds = [s for s in schema["anyOf"] if s.get("type") != "null"]
        if len(kinds) == 1:
            return resolve(kinds[0], root)
    if schema.get("type") == "array" and "items" in schema:
        return {**schema, "items": resolve(schema["items"], root)}
    if schema.get("type") == "object" and "properties" in schema:
        return {**schema, "properties": {k: resolve(v, root) for k, v in schema["properties"].items()},
                "$defs": root.get("$defs", {})}
    return schema


@needs_our_graph
def test_writes_answer_like_the_official_server(servers):
    """Creating, adding and deleting, with the official edge cases; read_graph after each group."""
    steps = [
        ("read_graph", {}),                                                                           # 0
        ("create_entities", {"entities": PEOPLE}),                                                    # 1
        ("create_entities", {"entities": [entity("Alice", "robot", "new"), entity("Dave", "person")]}),  # 2 existing
        ("create_entities", {"entities": []}),                                                        # 3
        ("create_relations", {"relations": [relation("Alice", "Acme", "works_at"),
                                            relation("Bob", "Alice", "knows")]}),                     # 4
        ("create_relations", {"relations": [relation("Alice", "Acme", "works_at"),                    # 5 existing
                                            relation("Alice", "Bob", "knows"),                        #   reversed
                                            relation("Alice", "Acme", "founded")]}),                  #   new type
        ("read_graph", {}),                                                                           # 6
        ("add_observations", {"observations": [{"entityName": "Alice",                                # 7 present
                                                "contents": ["likes tea", "drives a Volvo"]}]}),
        ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["a"]},              # 8 same
                                               {"entityName": "Bob", "contents": ["a", "b"]},         #   entity
                                               {"entityName": "Dave", "contents": []}]}),             #   twice
        ("add_observations", {"observations": [{"entityName": "Carol", "contents": ["carol fact"]},   # 9 unknown
                                               {"entityName": "Ghost", "contents": ["boo"]}]}),
        ("add_observations", {"observations": [{"entityName": "Ghost", "contents": ["boo"]},          # 10 unknown
                                               {"entityName": "Carol", "contents": ["carol fact"]}]}),  # first
        ("add_observations", {"observations": [{"entityName": "alice", "contents": ["a"]}]}),         # 11 case
        ("read_graph", {}),                                                                           # 12
        ("delete_observations", {"deletions": [{"entityName": "Alice",                                # 13
                                                "observations": ["likes tea", "never said"]},
                                               {"entityName": "Ghost", "observations": ["boo"]}]}),
        ("delete_relations", {"relations": [relation("Alice", "Acme", "founded"),                     # 14
                                            relation("Alice", "Carol", "knows"),
                                            relation("X", "Y", "z")]}),
        ("read_graph", {}),                                                                           # 15
        ("delete_entities", {"entityNames": ["Bob", "Nobody"]}),                                      # 16 cascade
        ("delete_entities", {"entityNames": []}),                                                     # 17
        ("read_graph", {}),                                                                           # 18
        ("create_entities", {"entities": [entity("Bob", "robot", "rebuilt")]}),                       # 19 again
        ("open_nodes", {"names": ["Bob"]}),                                                           # 20
        ("create_entities", {"entities": [{"name": "Eve", "entityType": "person"}]}),                 # 21 bad
        ("create_entities", {}),                                                                      # 22 bad
        ("add_observations", {"observations": [{"entityName": "Alice", "contents": "not a list"}]}),  # 23 bad
        ("create_relations", {"relations": [{"from": "Alice", "to": "Acme"}]}),                       # 24 bad
        ("read_graph", {}),                                                                           # 25
    ]
    pairs = servers.both(steps)
    compare_all(pairs, error_names={9: ["Ghost"], 10: ["Ghost"], 11: ["alice"], 21: ["observations"],
                                    22: ["entities"], 23: ["contents"], 24: ["relationType"]})


@needs_our_graph
def test_reads_answer_like_the_official_server(servers):
    """read_graph {}, the resource, open_nodes and search_nodes on the same graph."""
    graph = PEOPLE + [entity("École", "Straße", "ÜBER alles"), entity("Quiet", "thing", "nothing here")]
    relations = [relation("Alice", "Acme", "works_at"), relation("Bob", "Alice", "knows"),
                 relation("Carol", "Bob", "likes"), relation("Quiet", "Quiet", "is"),
                 relation("École", "Acme", "linkedTo")]
    reads = [
        ("read_graph", {}),
        ("open_nodes", {"names": ["Alice"]}),                     # relations with either end on Alice
        ("open_nodes", {"names": ["Carol"]}),                     # Carol -> Bob, Bob not opened
        ("open_nodes", {"names": ["Bob", "Alice", "Ghost"]}),     # unknown names ignored
        ("open_nodes", {"names": ["alice", "BOB"]}),              # exact, case-sensitive names
        ("open_nodes", {"names": ["Acme", "Acme"]}),              # asked twice, returned once
        ("open_nodes", {"names": []}),
        ("search_nodes", {"query": "PERSON"}),                    # entityType, any case
        ("search_nodes", {"query": "chess"}),                     # an observation, any case
        ("search_nodes", {"query": "ali"}),                       # part of a name
        ("search_nodes", {"query": "acme"}),                      # a name and an observation
        ("search_nodes", {"query": "company"}),
        ("search_nodes", {"query": "école"}),                     # non-ASCII case folding
        ("search_nodes", {"query": "über"}),
        ("search_nodes", {"query": "Sundays"}),
        ("search_nodes", {"query": "linkedTo"}),                  # relation types are not searched
        ("search_nodes", {"query": ""}),                          # the empty query matches everything
        ("search_nodes", {}),                                     # missing query: an error
    ]
    steps = [("create_entities", {"entities": graph}), ("create_relations", {"relations": relations}), *reads]

    async def flow(official, ours):
        pairs = [(step, await official.call_tool(*step), await ours.call_tool(*step)) for step in steps]
        resources = [await client.read_resource(RESOURCE) for client in (official, ours)]
        return pairs, resources

    pairs, (official_resource, our_resource) = servers.run(flow, "official", "ours")
    compare_all(pairs, error_names={len(steps) - 1: ["query"]})
    read_graph = pairs[2][2].structured_content
    content = our_resource.contents[0]
    assert content.mime_type == "application/json"
    shown = json.loads(content.text)
    assert graph_key(shown) == graph_key(read_graph) == graph_key(json.loads(official_resource.contents[0].text))
    assert not shape_problems(shown), shape_problems(shown)


# ---------------------------------------------------------------------------
# Where the official server is sloppy, ours is strict
# ---------------------------------------------------------------------------

@needs_our_graph
def test_duplicates_inside_one_call_are_stored_once_and_dangling_relations_are_refused(servers):
    steps = [
        ("create_entities", {"entities": [entity("Alice", "person", "likes tea", "likes tea"),      # 0
                                          entity("Dup", "a", "1"), entity("Acme", "company"),
                                          entity("Dup", "b", "2")]}),  # the first of a name wins, in its place
        ("create_relations", {"relations": [relation("Alice", "Acme", "works_at"),                  # 1
                                            relation("Alice", "Acme", "works_at")]}),
        ("add_observations", {"observations": [{"entityName": "Acme",                               # 2
                                                "contents": ["sells anvils", "sells anvils"]}]}),
        ("create_relations", {"relations": [relation("Alice", "Dup", "knows"),                      # 3 dangling
                                            relation("Alice", "Ghost", "haunts")]}),                #   to
        ("create_relations", {"relations": [relation("Nobody", "Alice", "sees"),                    # 4 dangling
                                            relation("Dup", "Acme", "visits")]}),                   #   from
        ("create_relations", {"relations": [relation("Ghost", "Ghost", "is")]}),                    # 5
        ("read_graph", {}),                                                                         # 6
        ("delete_entities", {"entityNames": ["Acme"]}),                                             # 7 cascade
        ("read_graph", {}),                                                                         # 8
    ]
    results = [result for _, result in servers.one("ours", steps)]
    refused = (3, 4, 5)
    problems = [f"{show(step)} failed: {text(result)[:300]}"
                for index, (step, result) in enumerate(zip(steps, results)) if result.is_error and index not in refused]
    assert not problems, "\n".join(problems)
    created, related, added, dangling_to, dangling_from, ghost_loop, graph, _, after = results

    entities = created.structured_content["entities"]
    assert [e["name"] for e in entities] == ["Alice", "Dup", "Acme"], "a name repeated in one call is created once"
    assert entities[0]["observations"] == ["likes tea"], "an observation repeated in one entity is stored once"
    assert related.structured_content == {"relations": [relation("Alice", "Acme", "works_at")]}
    assert added.structured_content == {"results": [{"entityName": "Acme", "addedObservations": ["sells anvils"]}]}

    for result, missing, step in ((dangling_to, "Ghost", steps[3]), (dangling_from, "Nobody", steps[4]),
                                  (ghost_loop, "Ghost", steps[5])):
        assert result.is_error, f"{show(step)}: a relation to a missing entity was accepted"
        assert not error_problems(step, result, [missing]), error_problems(step, result, [missing])

    stored = graph.structured_content
    assert not shape_problems(stored), shape_problems(stored)
    assert [e["name"] for e in stored["entities"]] == ["Alice", "Dup", "Acme"], "stored in the order created"
    assert graph_key(stored) == {
        "entities": [("Acme", "company", ("sells anvils",)), ("Alice", "person", ("likes tea",)), ("Dup", "a", ("1",))],
        "relations": [("Alice", "Acme", "works_at")],
    }, "nothing from a refused create_relations call may be written, and nothing twice"
    assert graph_key(after.structured_content) == {
        "entities": [("Alice", "person", ("likes tea",)), ("Dup", "a", ("1",))], "relations": []}


# ---------------------------------------------------------------------------
# Ours alone
# ---------------------------------------------------------------------------

def test_search_nodes_returns_as_many_related_entities_as_the_limit_allows(memory):
    """The related entities were found among a fixed 40 observations, so limit=100 gave 40 at most."""
    drinks = ["espresso", "a flat white", "cold brew", "a latte", "a cappuccino", "filter coffee"]
    memory.graph.create_entities([{"name": f"Person {i}", "entityType": "person",
                                   "observations": [f"Drinks {drinks[i % 6]} every morning before work"]}
                                  for i in range(60)])
    assert len(memory.graph.search_nodes("coffee lover", limit=100)["entities"]) == 60
    assert len(memory.graph.search_nodes("coffee lover", limit=50)["entities"]) == 50
