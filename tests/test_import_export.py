"""Import and export: official JSONL in and out, lessons, YourMemory's own memories; nothing lost, nothing doubled."""
import json
import os
import subprocess

import anyio
import pytest
from conftest import installed_entry_point
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from test_knowledge_graph import official_server

from yourmemory import InvalidInput, YourMemory, export_records, import_files

OFFICIAL_FILE = "\n".join([
    '{"type":"entity","name":"Alice","entityType":"person","observations":["works at Acme","likes tea"]}',
    "",
    '{"type":"entity","name":"Acme","entityType":"company","observations":["makes rockets"]}',
    "this line is not JSON",
    '{"type":"mystery","x":1}',
    '{"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}',
    '{"type":"entity","name":"École","entityType":"place","observations":["ÜBER cool"]}',
])  # no final newline, a blank line, a malformed line, an unknown type: all as real files have them

# "id": a field of another tool's own, not the lesson's: not read (a tool call would refuse it)
LESSON = {"type": "lesson", "id": "l-1", "name": "pg-down", "entityType": "lesson",
          "observations": ["Start Postgres first"],
          "errorPattern": {"type": "ConnectionError", "message": "connection refused", "context": "pytest"},
          "metadata": {"severity": "high", "frequency": 4, "successRate": 0.75, "createdAt": "2026-01-01T00:00:00Z"},
          "verificationSteps": [{"command": "pg_isready", "expectedOutput": "accepting",
                                 "successIndicators": ["accepting"]}]}


@pytest.fixture
def store_at(tmp_path, embedder, clock):
    opened = []

    def open_store(name):
        opened.append(YourMemory(tmp_path / name, user="ada", clock=clock, embedder=embedder))
        return opened[-1]
    yield open_store
    for store in opened:
        store.close()


def test_an_official_file_imports_with_its_malformed_line_reported_and_the_rest_kept(tmp_path, store_at):
    source = tmp_path / "memory.jsonl"
    source.write_text(OFFICIAL_FILE, encoding="utf-8")
    memory = store_at("a.db")
    report = import_files(memory, [source])
    assert (report["entities"], report["observations"], report["relations"], report["skipped"]) == (3, 4, 1, 1)
    assert report["problems"] == ["memory.jsonl:4: not JSON (Expecting value)"]
    graph = memory.graph.read_graph()
    assert [e["name"] for e in graph["entities"]] == ["Alice", "Acme", "École"]
    assert graph["relations"] == [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]
    assert "likes tea" in memory.recall("what does Alice drink?", top_k=3)["context"]


def test_importing_the_same_files_again_changes_nothing(tmp_path, store_at):
    (tmp_path / "memory.jsonl").write_text(OFFICIAL_FILE, encoding="utf-8")
    (tmp_path / "memory-1.json").write_text(  # the lessons fork splits big graphs into numbered files
        '{"type":"entity","name":"Bob","entityType":"person","observations":["plays chess"]}\n', encoding="utf-8")
    (tmp_path / "lesson.json").write_text(json.dumps(LESSON), encoding="utf-8")
    memory = store_at("a.db")
    first = import_files(memory, [tmp_path])
    assert len(first["files"]) == 3 and (first["entities"], first["lessons"]) == (4, 1)
    before = {t: memory.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("entities", "observations", "relations", "lessons", "memories", "memory_vectors")}
    again = import_files(memory, [tmp_path])
    assert (again["entities"], again["observations"], again["relations"], again["lessons"]) == (0, 0, 0, 0)
    assert before == {t: memory.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}


def test_a_dangling_relation_is_reported_with_its_line_and_not_imported(tmp_path, store_at):
    source = tmp_path / "memory.json"  # the legacy name; JSONL inside
    source.write_text(OFFICIAL_FILE + '\n{"type":"relation","from":"Alice","to":"Ghost","relationType":"haunts"}\n')
    report = import_files(store_at("a.db"), [source])
    assert len(report["problems"]) == 2 and report["problems"][1].startswith("memory.json:8: relations:")
    assert "'Ghost'" in report["problems"][1]


def test_export_import_export_is_byte_identical(tmp_path, store_at):
    source = tmp_path / "memory.jsonl"
    source.write_text(OFFICIAL_FILE, encoding="utf-8")
    first = store_at("a.db")
    import_files(first, [source])
    exported = export_records(first)
    (tmp_path / "export.jsonl").write_text(exported, encoding="utf-8")
    second = store_at("b.db")
    import_files(second, [tmp_path / "export.jsonl"])
    assert export_records(second) == exported
    assert exported.splitlines()[0] == OFFICIAL_FILE.splitlines()[0] and not exported.endswith("\n")


def test_an_updated_memory_stays_the_newer_value_through_export_and_import(store_at, clock):
    """The time an update wrote a memory's text travels with it (a review found the older value first after import)."""
    source = store_at("source.db")
    first = source.store("Oskar prefers a window seat when flying.")
    clock.advance(seconds=60)
    source.store("Oskar books aisle seats on flights.")
    clock.advance(seconds=60)
    source.update(first["id"], "Oskar prefers an exit row seat when flying.")
    records = source.export_memories()
    assert [("stated_at" in r) for r in records] == [True, False]  # only where an update wrote the text
    target = store_at("target.db")
    for record in records:
        target.import_memory(record)
    top = target.recall("Which seat does Oskar prefer on flights?", top_k=2)["memories"]
    assert [m["content"] for m in top] == ["Oskar prefers an exit row seat when flying.",
                                           "Oskar books aisle seats on flights."]


def test_the_official_server_loads_our_export_unchanged(tmp_path, store_at):
    source = tmp_path / "memory.jsonl"
    source.write_text(OFFICIAL_FILE, encoding="utf-8")
    memory = store_at("a.db")
    import_files(memory, [source])
    exported = tmp_path / "export.jsonl"
    exported.write_text(export_records(memory), encoding="utf-8")
    node, script = official_server()

    async def read_with_official():
        params = StdioServerParameters(command=node, args=[script],
                                       env={**os.environ, "MEMORY_FILE_PATH": str(exported)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return (await session.call_tool("read_graph", {})).structured_content

    assert anyio.run(read_with_official) == memory.graph.read_graph()


@pytest.mark.parametrize("calls", [1, 2])
def test_a_lesson_keeps_its_details_when_its_plain_entity_line_came_first(tmp_path, store_at, calls):
    """The official file carries a lesson as a plain entity; imported before lesson.json (files named in that
    order, or in two imports), its name was taken and the lesson's details were skipped without a word."""
    plain = {"type": "entity", "name": LESSON["name"], "entityType": "lesson",
             "observations": ["Start Postgres first", "Seen on CI too"]}
    (tmp_path / "graph.jsonl").write_text(json.dumps(plain), encoding="utf-8")
    (tmp_path / "lesson.json").write_text(json.dumps(LESSON), encoding="utf-8")
    memory = store_at("a.db")
    files = [tmp_path / "graph.jsonl", tmp_path / "lesson.json"]
    reports = [import_files(memory, files)] if calls == 1 else [import_files(memory, [f]) for f in files]
    assert sum(r["lessons"] for r in reports) == 1 and not any(r["problems"] for r in reports)
    (lesson,) = memory.lessons.all()
    assert lesson["errorPattern"] == LESSON["errorPattern"]
    assert lesson["verificationSteps"] == LESSON["verificationSteps"]
    assert lesson["observations"] == ["Start Postgres first", "Seen on CI too"]
    assert lesson["metadata"]["frequency"] == 4
    # its observations follow its error pattern, as a lesson created whole does (recalled with the error)
    pattern = memory.db.execute("SELECT pattern_memory_id FROM lessons").fetchone()[0]
    assert {f for (f,) in memory.db.execute("SELECT m.follows FROM observations AS o JOIN memories AS m "
                                            "ON m.id = o.memory_id")} == {pattern}
    assert import_files(memory, files)["lessons"] == 0  # and again: nothing more


def test_lessons_round_trip_with_their_success_history(tmp_path, store_at):
    (tmp_path / "lesson.json").write_text(json.dumps(LESSON), encoding="utf-8")
    first = store_at("a.db")
    assert import_files(first, [tmp_path / "lesson.json"])["lessons"] == 1
    (lesson,) = first.lessons.all()
    assert (lesson["metadata"]["frequency"], lesson["metadata"]["successRate"]) == (4, 0.75)
    assert lesson["metadata"]["createdAt"] == "2026-01-01T00:00:00+00:00"
    (tmp_path / "lessons-out.json").write_text(export_records(first, "lessons"), encoding="utf-8")
    second = store_at("b.db")
    import_files(second, [tmp_path / "lessons-out.json"])
    assert second.lessons.all() == first.lessons.all()


def test_own_memories_round_trip_with_timestamps_and_recall_counts(tmp_path, store_at, clock):
    first = store_at("a.db")
    kept = first.store("The user prefers dark mode in every editor", importance=0.8)["id"]
    clock.advance(days=3)
    first.recall("dark mode", top_k=1)
    first.store("Deploys happen on Tuesdays", importance=0.4, category="strategy")
    (tmp_path / "memories.jsonl").write_text(export_records(first, "memories"), encoding="utf-8")
    second = store_at("b.db")
    assert import_files(second, [tmp_path / "memories.jsonl"])["memories"] == 2
    assert export_records(second, "memories") == export_records(first, "memories")
    assert import_files(second, [tmp_path / "memories.jsonl"])["memories"] == 0
    assert first.get(kept)["recall_count"] == 1


def test_the_cli_imports_and_exports(tmp_path):
    source = tmp_path / "memory.jsonl"
    source.write_text(OFFICIAL_FILE, encoding="utf-8")
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "cli.db"), "YOURMEMORY_USER": "ada",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    entry = installed_entry_point()
    imported = subprocess.run([entry, "import", str(source)], env=env, capture_output=True, text=True)
    assert imported.returncode == 1, "a malformed line must make the exit status say so"
    assert "3 entities" in imported.stdout and "memory.jsonl:4" in imported.stderr
    assert "Traceback" not in imported.stderr
    exported = subprocess.run([entry, "export", "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")],
                              env=env, capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").count('"type":"entity"') == 3
    missing = subprocess.run([entry, "import", str(tmp_path / "nope.jsonl")], env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "path:" in missing.stderr and "Traceback" not in missing.stderr


def test_the_cli_import_embeds_the_sentences_of_what_it_brought_so_none_wait(tmp_path):
    """A memory of several sentences is compared sentence by sentence only once they are embedded: the CLI
    import does it for its own memories, as the server does after stores, instead of leaving them to
    `yourmemory reindex`. A one-sentence memory has none to embed."""
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(json.dumps({"type": "memory", "content": text}) for text in (
        "Ada: We moved to Lyon in May. The new office is near the river. I cycle there every day.",
        "The staging server is in Bergen")) + "\n", encoding="utf-8")
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "cli.db"), "YOURMEMORY_USER": "ada",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    entry = installed_entry_point()
    imported = subprocess.run([entry, "import", str(source)], env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert "2 memories" in imported.stdout
    assert "Embedded one by one the sentences of 1 imported memory or observation with several." in imported.stdout
    with YourMemory(tmp_path / "cli.db", user="ada", read_only=True) as memory:
        lengths = [length for (length,) in memory.db.execute(
            "SELECT length(vectors) FROM memory_sentences ORDER BY memory_id")]
    assert lengths == [3 * 4 * 768, 0]  # three sentences of float32 vectors; nothing to embed in the other
    doctor = subprocess.run([entry, "doctor"], env=env, capture_output=True, text=True)
    assert doctor.returncode == 0 and "wait" not in doctor.stdout, doctor.stdout


@pytest.mark.parametrize("field, value, why", [
    ("created_at", "0001-01-01T00:00:00+14:00", "between 1970 and now"),  # made recall and export fail for good
    ("last_accessed_at", "9999-12-31T00:00:00Z", "between 1970 and now"),  # would never decay
    ("updated_at", "last Tuesday", "ISO 8601"),
    ("created_at", 1767225600, "ISO 8601"),
    ("importance", 10 ** 400, "between 0 and 1"),  # a float would overflow
    ("importance", float("inf"), "between 0 and 1"),
    ("recall_count", 10 ** 30, "non-negative integer"),  # SQLite would overflow
])
def test_a_memory_line_with_an_impossible_value_is_reported_and_the_rest_imported(tmp_path, store_at, field, value,
                                                                                why):
    bad = {"type": "memory", "content": "The build server is in Oslo", field: value}
    good = {"type": "memory", "content": "The staging server is in Bergen", "created_at": "2026-01-05T09:00:00Z"}
    source = tmp_path / "memories.jsonl"
    source.write_text(json.dumps(bad) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    memory = store_at("a.db")
    report = import_files(memory, [source])
    assert report["memories"] == 1 and len(report["problems"]) == 1
    assert report["problems"][0].startswith(f"memories.jsonl:1: {field}: ") and why in report["problems"][0]
    assert [m["content"] for m in memory.recall("Where are the servers?", top_k=5)["memories"]] == \
        ["The staging server is in Bergen"]
    assert export_records(memory, "memories").count('"type":"memory"') == 1


def test_a_line_that_is_not_utf8_is_reported_and_the_other_lines_are_imported(tmp_path, store_at):
    source = tmp_path / "memory.jsonl"
    source.write_bytes('{"type":"entity","name":"Café","entityType":"place","observations":["opens at 8"]}\n'
                       .encode("latin-1") + b'{"type":"entity","name":"Bakery","entityType":"place",'
                                            b'"observations":["sells rye bread"]}\n')
    memory = store_at("a.db")
    report = import_files(memory, [source])
    assert report["problems"] == ["memory.jsonl:1: not UTF-8 (byte 0xE9 at column 29); save the file as UTF-8"]
    assert [e["name"] for e in memory.graph.read_graph()["entities"]] == ["Bakery"]  # nothing garbled ("Caf\ufffd")


def test_fields_no_record_has_are_counted_in_the_report_and_refused_by_the_library(tmp_path, store_at):
    """A file's own fields ("id", "colour") are not read; they were dropped without a word."""
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in [
        {"type": "memory", "id": 7, "content": "The build server is in Oslo", "colour": "red"},
        {"type": "entity", "id": 8, "name": "Oslo", "entityType": "city", "observations": []},
        LESSON]), encoding="utf-8")
    memory = store_at("a.db")
    report = import_files(memory, [source])
    assert (report["memories"], report["entities"], report["lessons"], report["problems"]) == (1, 1, 1, [])
    assert report["ignored"] == {"id": 3, "colour": 1}
    with pytest.raises(InvalidInput, match=r"memory\.importnce: is not a known field"):
        memory.import_memory({"content": "The staging server is in Bergen", "importnce": 0.9})
    assert memory.import_memory({"type": "memory", "content": "The staging server is in Bergen"}) == 1  # a file line
    cli = subprocess.run([installed_entry_point(), "import", str(source)], capture_output=True, text=True,
                         env={**os.environ, "YOURMEMORY_DB": str(tmp_path / "cli.db"), "YOURMEMORY_USER": "ada",
                              "YOURMEMORY_HOME": str(tmp_path / "home")})
    assert cli.returncode == 0, cli.stderr
    assert "Fields no YourMemory record has, not read: 'colour' (1 records), 'id' (3 records)" in cli.stdout


def test_import_reports_its_progress_per_file(tmp_path, store_at):
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(json.dumps({"type": "memory", "content": f"Server {i} is in rack {i % 7}"})
                                for i in range(60)), encoding="utf-8")
    seen = []
    report = import_files(store_at("a.db"), [source], on_progress=lambda *step: seen.append(step))
    assert report["memories"] == 60
    assert seen[-1] == ("memories.jsonl", 60, 60) and len(seen) >= 3  # more than one step on a long file
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)


def test_problems_come_in_line_order_and_two_files_of_one_name_are_told_apart(tmp_path, store_at):
    for folder in ("work", "home"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "memory.json").write_text("\n".join([
            '{"type":"entity","name":"Ada","entityType":"person","observations":[]}',
            '{"type":"relation","from":"Ada","to":"Nobody","relationType":"knows"}',  # found while importing
            "not json",                                                                # found while reading
        ]), encoding="utf-8")
    report = import_files(store_at("a.db"), [tmp_path / "work", tmp_path / "home"])
    assert [p.split(": ")[0] for p in report["problems"]] == [
        f"{tmp_path / 'work' / 'memory.json'}:2", f"{tmp_path / 'work' / 'memory.json'}:3",
        f"{tmp_path / 'home' / 'memory.json'}:2", f"{tmp_path / 'home' / 'memory.json'}:3"]


def test_a_folder_round_trip_keeps_the_order_of_entities_and_lessons(tmp_path, store_at):
    """lesson.json used to be read first, so lessons moved ahead of the entities made before them."""
    first = store_at("a.db")
    first.graph.create_entities([{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}])
    first.lessons.create_lesson({key: value for key, value in LESSON.items() if key not in ("type", "id")})
    first.graph.create_entities([{"name": "Bob", "entityType": "person", "observations": ["plays chess"]}])
    folder = tmp_path / "moved"
    folder.mkdir()
    (folder / "memory.json").write_text(export_records(first, "jsonl"), encoding="utf-8")
    (folder / "lesson.json").write_text(export_records(first, "lessons"), encoding="utf-8")
    second = store_at("b.db")
    assert import_files(second, [folder])["problems"] == []
    assert export_records(second, "jsonl") == export_records(first, "jsonl")
    assert export_records(second, "lessons") == export_records(first, "lessons")


def test_a_second_entity_of_one_name_and_another_type_is_reported_not_merged(tmp_path, store_at):
    """The official server writes two entities of one name when one call repeats it; merging the second
    into the first dropped its type without a word."""
    source = tmp_path / "memory.json"
    source.write_text('{"type":"entity","name":"X","entityType":"person","observations":["a"]}\n'
                      '{"type":"entity","name":"X","entityType":"robot","observations":["b"]}\n'
                      '{"type":"entity","name":"X","entityType":"person","observations":["c"]}', encoding="utf-8")
    memory = store_at("imported.db")
    report = import_files(memory, [source])
    assert len(report["problems"]) == 1 and ":2:" in report["problems"][0] and "'robot'" in report["problems"][0], \
        report["problems"]
    assert memory.graph.read_graph()["entities"] == [{"name": "X", "entityType": "person", "observations": ["a", "c"]}]
