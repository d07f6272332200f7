"""Lessons: error patterns with their fixes and success records, found again by meaning.

Real model, real SQLite; the clock only moves when a test moves it.
"""
import copy
import json
import os
import re
from datetime import datetime

import anyio
import pytest
from conftest import installed_entry_point
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from yourmemory import SAME_ERROR_TYPE_BONUS, InvalidInput, NotFound

TABLES = ("entities", "observations", "lessons", "memories")


def make_lesson(name, kind, message, context, observations, command, indicator, severity="high"):
    return {"name": name, "entityType": "lesson", "observations": observations,
            "errorPattern": {"type": kind, "message": message, "context": context},
            "metadata": {"severity": severity, "environment": {"os": "linux", "shell": "bash"}},
            "verificationSteps": [{"command": command, "expectedOutput": indicator, "successIndicators": [indicator]}]}


LESSONS = {lesson["name"]: lesson for lesson in [
    make_lesson("postgres-connection-refused", "ConnectionRefusedError",
                "could not connect to server: Connection refused. Is the server running on host localhost "
                "and accepting TCP/IP connections on port 5432?", "database setup",
                ["The Postgres service was not running; start it with systemctl start postgresql",
                 "Check that postgresql.conf listens on localhost"],
                "pg_isready -h localhost -p 5432", "accepting connections", "critical"),
    make_lesson("npm-eacces-global-install", "EACCES",
                "npm ERR! Error: EACCES: permission denied, mkdir '/usr/local/lib/node_modules'", "npm install -g",
                ["Global npm installs failed because /usr/local is owned by root",
                 "Set the npm prefix to ~/.npm-global instead of using sudo"],
                "npm config get prefix", ".npm-global"),
    make_lesson("python-module-not-found", "ModuleNotFoundError", "No module named 'requests'",
                "running a Python script",
                ["The package was installed for a different interpreter than the one running the script",
                 "Activate the virtualenv and pip install the package there"],
                "python -c 'import requests'", "exit status 0", "medium"),
    make_lesson("docker-port-allocated", "DockerError", "Bind for 0.0.0.0:8080 failed: port is already allocated",
                "docker compose up",
                ["Another container or process already listens on the host port",
                 "Stop the old container or map a different host port"],
                "docker ps", "Up"),
    make_lesson("git-merge-conflict", "MergeConflict",
                "CONFLICT (content): Merge conflict in src/app.py; Automatic merge failed", "git pull",
                ["Both branches edited the same lines", "Resolve the conflict markers, git add the file and commit"],
                "git status", "nothing to commit", "low"),
    make_lesson("ssl-certificate-verify-failed", "SSLError",
                "certificate verify failed: unable to get local issuer certificate", "HTTPS request from Python",
                ["The CA bundle was missing on the machine",
                 "Install certifi or point REQUESTS_CA_BUNDLE at the corporate CA"],
                "python -m certifi", "cacert.pem"),
]}
PG = LESSONS["postgres-connection-refused"]


def counts(memory) -> dict:
    return {table: memory.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}


def at(iso_text: str) -> float:
    return datetime.fromisoformat(iso_text).timestamp()


@pytest.fixture
def library(memory):
    for lesson in LESSONS.values():
        memory.lessons.create_lesson(copy.deepcopy(lesson))
    return memory


def names(result) -> list[str]:
    return [lesson["name"] for lesson in result["lessons"]]


# -- create_lesson -------------------------------------------------------------------------------------------

def test_create_lesson_sets_timestamps_and_counters_itself_and_ignores_client_values(memory, clock):
    given = copy.deepcopy(PG)
    given["errorPattern"]["stackTrace"] = "psycopg2.OperationalError at db.py:12"
    given["metadata"].update(createdAt="1999-01-01T00:00:00+00:00", updatedAt="1999-01-01T00:00:00+00:00",
                             frequency=42, successRate=0.9)
    created = memory.lessons.create_lesson(given)
    assert created["name"] == PG["name"] and created["entityType"] == "lesson"
    assert created["observations"] == PG["observations"]
    assert created["errorPattern"] == given["errorPattern"]
    assert created["verificationSteps"] == PG["verificationSteps"]
    meta = created["metadata"]
    assert meta["severity"] == "critical" and meta["environment"] == {"os": "linux", "shell": "bash"}
    assert meta["frequency"] == 0 and meta["successRate"] == 0
    assert at(meta["createdAt"]) == at(meta["updatedAt"]) == clock.now


def test_a_lesson_is_a_graph_entity_of_type_lesson(memory):
    memory.graph.create_entities([{"name": "Ada", "entityType": "person", "observations": ["Ada runs the tests"]}])
    memory.lessons.create_lesson(copy.deepcopy(PG))
    graph = memory.graph.read_graph()
    assert {e["name"]: e["entityType"] for e in graph["entities"]} == {"Ada": "person", PG["name"]: "lesson"}
    opened = memory.graph.open_nodes([PG["name"]])["entities"]
    assert opened == [{"name": PG["name"], "entityType": "lesson", "observations": PG["observations"]}]


def test_a_duplicate_lesson_name_is_rejected_and_nothing_is_written(memory):
    memory.lessons.create_lesson(copy.deepcopy(PG))
    before = counts(memory)
    again = copy.deepcopy(LESSONS["git-merge-conflict"]) | {"name": PG["name"]}
    with pytest.raises(InvalidInput) as error:
        memory.lessons.create_lesson(again)
    assert error.value.field == "lesson.name"
    assert counts(memory) == before
    assert memory.lessons.find_similar_errors(PG["errorPattern"])["lessons"][0]["errorPattern"] == PG["errorPattern"]


def edit(*path, value=None, delete=False):
    def change(lesson):
        for key in path[:-1]:
            lesson = lesson[key]
        if delete:
            del lesson[path[-1]]
        else:
            lesson[path[-1]] = value
    return change


def without(*path):
    return edit(*path, delete=True)


def setting(*path, value):
    return edit(*path, value=value)


INVALID = [
    (without("name"), "lesson.name"),
    (without("entityType"), "lesson.entityType"),
    (without("observations"), "lesson.observations"),
    (without("errorPattern"), "lesson.errorPattern"),
    (without("errorPattern", "type"), "lesson.errorPattern.type"),
    (without("errorPattern", "message"), "lesson.errorPattern.message"),
    (without("errorPattern", "context"), "lesson.errorPattern.context"),
    (without("verificationSteps"), "lesson.verificationSteps"),
    (without("verificationSteps", 0, "command"), "lesson.verificationSteps[0].command"),
    (without("verificationSteps", 0, "expectedOutput"), "lesson.verificationSteps[0].expectedOutput"),
    (without("verificationSteps", 0, "successIndicators"), "lesson.verificationSteps[0].successIndicators"),
    (setting("entityType", value="person"), "lesson.entityType"),
    (setting("metadata", "severity", value="extreme"), "lesson.metadata.severity"),
    (setting("metadata", "environment", value="linux"), "lesson.metadata.environment"),
    (setting("metadata", value=[]), "lesson.metadata"),
    (setting("metadata", "tags", value={"npm"}), "lesson.metadata"),  # a set is no JSON (was a TypeError)
    (setting("metadata", "environment", value={"load": float("nan")}), "lesson.metadata"),  # exported as NaN
    (setting("observations", value="Start Postgres first"), "lesson.observations"),
    (setting("observations", value=["Start Postgres first", ""]), "lesson.observations[1]"),
    (setting("name", value=""), "lesson.name"),
    (setting("name", value="   "), "lesson.name"),
    (setting("errorPattern", "message", value=""), "lesson.errorPattern.message"),
    (setting("errorPattern", "message", value="x" * 10_001), "lesson.errorPattern.message"),
    (setting("errorPattern", "type", value="E" * 501), "lesson.errorPattern.type"),
    (setting("errorPattern", value="Connection refused"), "lesson.errorPattern"),
    (setting("verificationSteps", value={"command": "pg_isready"}), "lesson.verificationSteps"),
    (setting("verificationSteps", 0, "successIndicators", value="accepting"),
     "lesson.verificationSteps[0].successIndicators"),
    (setting("verificationSteps", 0, "command", value=""), "lesson.verificationSteps[0].command"),
    # an unknown key is refused, not dropped: a misspelt optional field would vanish in silence
    (setting("stackTrace", value="at db.py:12"), "lesson.stackTrace"),
    (setting("errorPattern", "stacktrace", value="at db.py:12"), "lesson.errorPattern.stacktrace"),
    (setting("verificationSteps", 0, "expected", value="ok"), "lesson.verificationSteps[0].expected"),
]


def test_a_long_real_error_message_and_a_step_checked_by_exit_status_are_accepted(memory):
    """Found in realistic use: a pydantic ValidationError of three fields (over 500 characters) was refused,
    by find_similar_errors too, and so was a step with no expected output."""
    message = "3 validation errors for Settings\n" + "\n".join(
        f"{field}\n  Field required [type=missing, input_value={{'debug': True, 'region': 'eu-west-1'}}, "
        f"input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.9/v/missing"
        for field in ("database_url", "secret_key", "redis_url"))
    assert len(message) > 500
    lesson = copy.deepcopy(PG)
    lesson["name"] = "settings-missing-env"
    lesson["errorPattern"] = {"type": "ValidationError", "message": message, "context": "app startup"}
    lesson["verificationSteps"] = [{"command": "python -c 'import app.settings'", "expectedOutput": "",
                                    "successIndicators": []}]
    memory.lessons.create_lesson(lesson)
    found = memory.lessons.find_similar_errors({"type": "ValidationError", "message": message, "context": "startup"})
    top = found["lessons"][0]
    assert top["name"] == "settings-missing-env" and top["errorPattern"]["message"] == message
    assert top["verificationSteps"][0]["expectedOutput"] == ""

@pytest.mark.parametrize("change, field", INVALID, ids=[f"{field}-{i}" for i, (_, field) in enumerate(INVALID)])
def test_an_invalid_lesson_names_the_field_and_writes_nothing(memory, change, field):
    memory.lessons.create_lesson(copy.deepcopy(LESSONS["git-merge-conflict"]))
    before = counts(memory)
    bad = copy.deepcopy(PG)
    change(bad)
    with pytest.raises(InvalidInput) as error:
        memory.lessons.create_lesson(bad)
    assert error.value.field == field and str(error.value).startswith(field + ":")
    assert counts(memory) == before


# -- update_lesson_success -------------------------------------------------------------------------------------

def test_success_rate_is_the_running_mean_of_outcomes_and_updated_at_moves(memory, clock):
    created = memory.lessons.create_lesson(copy.deepcopy(PG))["metadata"]["createdAt"]
    for n, (success, rate) in enumerate([(True, 1.0), (False, 0.5), (True, 2 / 3), (True, 0.75)], start=1):
        clock.advance(days=1)
        meta = memory.lessons.update_lesson_success(PG["name"], success)["metadata"]
        assert meta["frequency"] == n
        assert meta["successRate"] == pytest.approx(rate, abs=1e-9)
        assert at(meta["updatedAt"]) == clock.now and meta["createdAt"] == created
    stored = memory.db.execute("SELECT frequency, success_rate FROM lessons").fetchall()
    assert stored == [(4, pytest.approx(0.75))]


@pytest.mark.parametrize("success", [1, 0, "true", None, 1.0])
def test_success_must_be_a_boolean(memory, success):
    memory.lessons.create_lesson(copy.deepcopy(PG))
    with pytest.raises(InvalidInput) as error:
        memory.lessons.update_lesson_success(PG["name"], success)
    assert error.value.field == "success"
    assert memory.db.execute("SELECT frequency, success_rate FROM lessons").fetchall() == [(0, 0.0)]


def test_updating_an_unknown_lesson_or_a_non_lesson_entity_is_not_found(memory):
    memory.graph.create_entities([{"name": "Ada", "entityType": "person", "observations": ["Ada runs the tests"]}])
    for name in ("no-such-lesson", "Ada"):
        with pytest.raises(NotFound, match="lessonName"):
            memory.lessons.update_lesson_success(name, True)


# -- find_similar_errors ------------------------------------------------------------------------------------

PARAPHRASED_ERRORS = [
    ({"type": "OperationalError", "message": "connection to server at localhost port 5432 failed: Connection refused",
      "context": "django tests"}, "postgres-connection-refused"),
    ({"type": "PermissionError", "message": "permission denied while installing a node package globally",
      "context": "setting up frontend tooling"}, "npm-eacces-global-install"),
    ({"type": "ImportError", "message": "cannot import the requests library", "context": "cron job"},
     "python-module-not-found"),
    ({"type": "APIError", "message": "driver failed programming external connectivity: address already in use "
      "on port 8080", "context": "starting containers"}, "docker-port-allocated"),
    ({"type": "GitError", "message": "automatic merge failed because both branches changed the same file",
      "context": "rebasing a feature branch"}, "git-merge-conflict"),
    ({"type": "URLError", "message": "urlopen error [SSL: CERTIFICATE_VERIFY_FAILED] self signed certificate in "
      "chain", "context": "pip download"}, "ssl-certificate-verify-failed"),
]


@pytest.mark.parametrize("pattern, expected", PARAPHRASED_ERRORS, ids=[e for _, e in PARAPHRASED_ERRORS])
def test_a_paraphrased_error_finds_the_right_lesson_first(library, pattern, expected):
    found = library.lessons.find_similar_errors(pattern)["lessons"]
    assert found and found[0]["name"] == expected, [(f["name"], f["relevance"]) for f in found]
    assert found[0]["verificationSteps"] == LESSONS[expected]["verificationSteps"]
    assert [f["relevance"] for f in found] == sorted((f["relevance"] for f in found), reverse=True)


def test_an_exact_type_or_context_match_with_an_unrelated_message_is_still_returned(library):
    by_type = library.lessons.find_similar_errors(
        {"type": "SSLError", "message": "the printer ran out of paper", "context": "office"})["lessons"]
    ssl = [f for f in by_type if f["name"] == "ssl-certificate-verify-failed"]
    assert ssl and ssl[0]["relevance"] >= SAME_ERROR_TYPE_BONUS
    by_context = library.lessons.find_similar_errors(
        {"type": "Timeout", "message": "the printer ran out of paper", "context": "git pull"})
    assert "git-merge-conflict" in names(by_context)


def same_error_twins(memory, first, second):
    """Two lessons identical but for the name; the second-created one has the better success record."""
    for name in (first, second):
        memory.lessons.create_lesson(copy.deepcopy(PG) | {"name": name})
    for outcome in (True, False, False):
        memory.lessons.update_lesson_success(first, outcome)
    for outcome in (True, True, False):
        memory.lessons.update_lesson_success(second, outcome)
    query = {"type": "ConnectionRefusedError", "message": "connection refused on port 5432",
             "context": "database setup"}
    return (memory.lessons.find_similar_errors(query)["lessons"],
            memory.lessons.get_lesson_recommendations("postgres refuses connections during database setup")["lessons"])


def test_equally_relevant_lessons_rank_by_success_rate(memory):
    # Names that tokenize identically for both the model and FTS5, so the relevance is exactly equal.
    found, recommended = same_error_twins(memory, "Postgres refused", "postgres refused")
    assert [f["relevance"] for f in found[:2]] == [found[0]["relevance"]] * 2
    assert names({"lessons": found})[:2] == ["postgres refused", "Postgres refused"]
    assert names({"lessons": recommended})[:2] == ["postgres refused", "Postgres refused"]


def test_relevance_to_an_error_does_not_depend_on_the_lessons_name(memory):
    found, _ = same_error_twins(memory, "pg-refused-b", "pg-refused-a")
    ranked = [(f["name"], f["relevance"], f["metadata"]["successRate"]) for f in found[:2]]
    assert [name for name, _, _ in ranked] == ["pg-refused-a", "pg-refused-b"], ranked
    assert found[0]["relevance"] == found[1]["relevance"], ranked


# -- get_lesson_recommendations -----------------------------------------------------------------------------

CONTEXTS = [
    ("my Django test suite cannot reach the local Postgres database", "postgres-connection-refused"),
    ("installing an npm package globally fails with permission denied", "npm-eacces-global-install"),
    ("the script crashes because it can't import a library I just pip installed", "python-module-not-found"),
    ("docker compose cannot start because something already uses the port", "docker-port-allocated"),
    ("git says I have conflicts after pulling", "git-merge-conflict"),
    ("HTTPS calls fail with a certificate error behind the corporate proxy", "ssl-certificate-verify-failed"),
]


@pytest.mark.parametrize("context, expected", CONTEXTS, ids=[e for _, e in CONTEXTS])
def test_recommendations_put_the_right_never_tried_lesson_first_with_full_details(library, context, expected):
    top = library.lessons.get_lesson_recommendations(context)["lessons"][0]
    assert top["name"] == expected
    want = LESSONS[expected]
    assert top["observations"] == want["observations"] and top["verificationSteps"] == want["verificationSteps"]
    assert top["errorPattern"] == want["errorPattern"] and top["entityType"] == "lesson"
    assert top["metadata"]["severity"] == want["metadata"]["severity"]
    assert top["metadata"]["frequency"] == 0 and top["score"] == pytest.approx(top["relevance"] / 2, abs=1e-6)


def test_recommendation_score_is_relevance_times_half_of_one_plus_success_rate(library):
    for outcome in (True, True, False):
        library.lessons.update_lesson_success("docker-port-allocated", outcome)
    ranked = library.lessons.get_lesson_recommendations("a container will not start: address already in use")
    ranked = ranked["lessons"]
    assert ranked[0]["name"] == "docker-port-allocated" and len(ranked) >= 2
    for lesson in ranked:
        rate = lesson["metadata"]["successRate"]
        assert lesson["score"] == pytest.approx(lesson["relevance"] * (1 + rate) / 2, abs=1e-6)
    assert ranked[0]["metadata"]["successRate"] == pytest.approx(2 / 3)
    assert [lesson["score"] for lesson in ranked] == sorted((lesson["score"] for lesson in ranked), reverse=True)


# -- deleting ----------------------------------------------------------------------------------------------

def test_delete_entities_removes_the_lesson_everywhere(library):
    before = counts(library)
    library.graph.delete_entities([PG["name"]])
    assert PG["name"] not in {e["name"] for e in library.graph.read_graph()["entities"]}
    assert library.graph.open_nodes([PG["name"]])["entities"] == []
    with pytest.raises(NotFound, match="lessonName"):
        library.lessons.update_lesson_success(PG["name"], True)
    assert PG["name"] not in names(library.lessons.find_similar_errors(PG["errorPattern"]))
    assert PG["name"] not in names(library.lessons.get_lesson_recommendations("Postgres connection refused"))
    # one entity, its lesson row, two observations, and three memories (two observations + the error pattern)
    assert counts(library) == {"entities": before["entities"] - 1, "lessons": before["lessons"] - 1,
                               "observations": before["observations"] - 2, "memories": before["memories"] - 3}


# -- over MCP stdio ----------------------------------------------------------------------------------------

def test_the_lesson_tools_work_end_to_end_over_stdio(tmp_path):
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "memory.db"), "YOURMEMORY_USER": "tester",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(command=installed_entry_point(), env=env, cwd=str(tmp_path))
    missing_message = copy.deepcopy(PG) | {"name": "broken"}
    del missing_message["errorPattern"]["message"]
    tagged = copy.deepcopy(LESSONS)
    tagged[PG["name"]]["metadata"]["tags"] = ["postgres", "local dev"]  # a metadata key of the client's own
    misspelt = copy.deepcopy(PG) | {"name": "misspelt", "verificationStep": []}

    async def flow():
        out = {}
        with anyio.fail_after(300), open(tmp_path / "stderr.log", "a") as errlog:  # a hang guard only
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
                    out["created"] = [await client.call_tool("create_lesson", {"lesson": lesson})
                                      for lesson in tagged.values()]
                    out["misspelt"] = await client.call_tool("create_lesson", {"lesson": misspelt})
                    out["updated"] = [await client.call_tool("update_lesson_success", {
                        "lessonName": PG["name"], "success": outcome}) for outcome in (True, False)]
                    out["found"] = await client.call_tool("find_similar_errors", {"errorPattern": {
                        "type": "OperationalError", "message": "connection to server at localhost port 5432 failed",
                        "context": "django tests"}})
                    out["recommended"] = await client.call_tool("get_lesson_recommendations", {
                        "context": "git says I have conflicts after pulling"})
                    out["broken"] = await client.call_tool("create_lesson", {"lesson": missing_message})
                    out["not_bool"] = await client.call_tool("update_lesson_success", {
                        "lessonName": PG["name"], "success": "true"})
        return out

    try:
        out = anyio.run(flow)
    except Exception as error:
        raise AssertionError(f"{error!r}\n{(tmp_path / 'stderr.log').read_text()[-4000:]}") from error
    for name, read_only in [("create_lesson", False), ("update_lesson_success", False),
                            ("find_similar_errors", True), ("get_lesson_recommendations", True)]:
        tool = out["tools"][name]
        assert tool.title and tool.annotations is not None and tool.annotations.read_only_hint is read_only, name
    results = out["created"] + out["updated"] + [out["found"], out["recommended"]]
    for result in results:
        assert not result.is_error, result.content
        assert result.structured_content == json.loads(result.content[0].text)
    assert out["created"][0].structured_content["metadata"]["frequency"] == 0
    assert out["created"][0].structured_content["metadata"]["tags"] == ["postgres", "local dev"]
    assert out["misspelt"].is_error and re.search(r"verificationStep\b", out["misspelt"].content[0].text)
    last = out["updated"][-1].structured_content["metadata"]
    assert last["frequency"] == 2 and last["successRate"] == pytest.approx(0.5)
    found = out["found"].structured_content["lessons"]
    assert found[0]["name"] == PG["name"] and found[0]["metadata"]["successRate"] == pytest.approx(0.5)
    top = out["recommended"].structured_content["lessons"][0]
    assert top["name"] == "git-merge-conflict"
    assert top["verificationSteps"] == LESSONS["git-merge-conflict"]["verificationSteps"]
    assert out["broken"].is_error and "errorPattern.message" in out["broken"].content[0].text
    assert out["not_bool"].is_error and "success" in out["not_bool"].content[0].text


def test_changing_a_lessons_error_pattern_memory_points_to_the_lesson_tools(memory):
    memory.lessons.create_lesson(copy.deepcopy(PG))
    pattern = memory.db.execute("SELECT pattern_memory_id FROM lessons").fetchone()[0]
    for change in (lambda: memory.forget(pattern), lambda: memory.update(pattern, "Some other error")):
        with pytest.raises(InvalidInput, match="memory_id: .*error pattern of lesson 'postgres-connection-refused'; "
                                               "delete_entities removes the lesson"):
            change()


FIX_WORDED_APART = make_lesson(
    "pydantic-v2-config", "PydanticUserError", '"Config" and "model_config" cannot be used together',
    "settings module startup",
    ["Resolved by deleting the legacy inner options block and moving its keys into a ConfigDict assigned once "
     "per class"], "pytest tests/test_settings.py", "passed")
NEIGHBOURS = ["The API is written in FastAPI with pydantic models", "The settings module loads .env files at startup",
              "Startup fails fast when DATABASE_URL is missing", "We validate request bodies with pydantic v2 models",
              "The settings module reads environment variables with pydantic-settings",
              "Config for staging lives in config/staging.toml", "The worker reads its config from the same settings module",
              "Model serialisation uses model_dump, not dict()", "CI runs mypy in strict mode on the settings package"]


def test_recalling_an_error_brings_its_lessons_fix_along(memory):
    """The fix shares few words with the error; it is recalled with it as one episode (the twelfth session's
    user-style test found recall_memory on an error's text returning the pattern without its fix)."""
    for text in NEIGHBOURS:
        memory.store(text)
    memory.lessons.create_lesson(copy.deepcopy(FIX_WORDED_APART))
    found = [m["content"] for m in memory.recall('PydanticUserError: "Config" and "model_config" cannot be used '
                                                 'together', top_k=3)["memories"]]
    assert found[0].startswith("PydanticUserError") and FIX_WORDED_APART["observations"][0] in found, found


def test_a_lesson_written_before_episodes_gets_its_fix_linked_on_upgrade(db_path, clock, embedder):
    from yourmemory import YourMemory
    with YourMemory(db_path, clock=clock, embedder=embedder) as memory:
        memory.lessons.create_lesson(copy.deepcopy(FIX_WORDED_APART))
        memory.lessons.create_lesson(copy.deepcopy(PG))
        memory.graph.add_observations([{"entityName": PG["name"], "contents": ["Restarting the container helps too"]}])
        expected = dict(memory.db.execute("SELECT id, follows FROM memories WHERE source = 'observation'"))
        assert sum(follows is not None for follows in expected.values()) == 4  # every observation, none of the patterns
        memory.db.execute("UPDATE memories SET follows = NULL")
        memory.db.execute("ALTER TABLE memories DROP COLUMN stated_at")  # as version 8 left it
        memory.db.execute("DROP TABLE memory_tokens")  # and without version 10's and 11's tables
        memory.db.execute("DROP TABLE memory_sentences")
        memory.db.execute("PRAGMA user_version = 8")
    with YourMemory(db_path, clock=clock, embedder=embedder) as memory:
        assert dict(memory.db.execute("SELECT id, follows FROM memories WHERE source = 'observation'")) == expected


def test_knowledge_graph_and_lesson_memories_keep_the_token_sketches_a_store_makes(memory, embedder):
    """Recall compares the query token by token with observations and error patterns too (they share its
    results): each keeps the sketches of its memory text, from batched model runs that give the same ones."""
    memory.graph.create_entities([{"name": "Priya", "entityType": "person",
                                   "observations": ["Adopted a greyhound called Juno", "Lives in Leeds"]}])
    memory.graph.add_observations([{"entityName": "Priya", "contents": ["Works on the billing team"]}])
    memory.lessons.create_lesson(copy.deepcopy(PG))
    rows = memory.db.execute("""SELECT m.content, t.sketches FROM memories AS m
                                LEFT JOIN memory_tokens AS t ON t.memory_id = m.id""").fetchall()
    assert len(rows) == 3 + 1 + len(PG["observations"])
    for content, sketches in rows:
        assert sketches == embedder.embed_with_tokens(content)[1], content
