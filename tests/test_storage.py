"""Storage: the SQLite binding, WAL, migrations, index consistency, several processes on one file."""
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import yourmemory
from yourmemory import SchemaTooNew, YourMemory


def test_the_binding_can_load_sqlite_vec_and_has_fts5(db_path):
    conn = yourmemory.connect(db_path)
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        assert yourmemory.sqlite_module().__name__ == "sqlean"  # the documented fallback


def test_the_database_is_in_wal_mode_with_a_busy_timeout(memory):
    assert memory.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert memory.db.execute("PRAGMA busy_timeout").fetchone()[0] == yourmemory.SQLITE_BUSY_TIMEOUT_MS
    assert memory.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_migrations_set_user_version_and_reopening_changes_nothing(db_path, embedder):
    with YourMemory(db_path, user="ada", embedder=embedder) as memory:
        memory.store("Reopening must keep this memory")
    with YourMemory(db_path, user="ada", embedder=embedder) as memory:
        assert memory.db.execute("PRAGMA user_version").fetchone()[0] == yourmemory.SCHEMA_VERSION
        assert memory.stats()["memories"]["active"] == 1


def test_upgrading_keeps_an_updated_memory_the_newer_statement(db_path, clock, embedder):
    """Migration 9 dates each memory's text by its store or its last update, from the update history."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        first = memory.store("Oskar prefers a window seat when flying.")["id"]
        clock.advance(seconds=60)
        second = memory.store("Oskar books aisle seats on flights.")["id"]
        clock.advance(seconds=60)
        memory.update(first, "Oskar prefers an exit row seat when flying.")
        memory.db.execute("ALTER TABLE memories DROP COLUMN stated_at")  # as version 8 left it
        memory.db.execute("DROP TABLE memory_tokens")  # and without version 10's and 11's tables
        memory.db.execute("DROP TABLE memory_sentences")
        memory.db.execute("PRAGMA user_version = 8")
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        stated = dict(memory.db.execute("SELECT id, stated_at - created_at FROM memories"))
        assert stated == {first: 120, second: 0}
        top = memory.recall("Which seat does Oskar prefer on flights?", top_k=2)["memories"]
        assert [m["id"] for m in top] == [first, second]


def test_a_database_from_a_newer_version_is_refused_and_left_intact(db_path, embedder):
    with YourMemory(db_path, user="ada", embedder=embedder) as memory:
        memory.store("Data written before the downgrade")
        memory.db.execute(f"PRAGMA user_version = {yourmemory.SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaTooNew, match="upgrade YourMemory"):
        YourMemory(db_path, user="ada", embedder=embedder)
    raw = yourmemory.sqlite_module().connect(str(db_path))
    assert raw.execute("SELECT content FROM memories").fetchall() == [("Data written before the downgrade",)]


def test_fts_index_stays_consistent_through_store_update_supersede_and_forget(memory):
    a = memory.store("The user prefers tabs for indentation")
    memory.store("The user prefers spaces for indentation")  # supersedes a
    b = memory.store("Lint runs in the pre-commit hook")
    memory.update(b["id"], "Lint runs in CI, not in the pre-commit hook")
    c = memory.store("The API token rotates monthly")
    memory.forget(c["id"])
    memory.db.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")
    vectors = {r[0] for r in memory.db.execute("SELECT memory_id FROM memory_vectors")}
    rows = {r[0] for r in memory.db.execute("SELECT id FROM memories")}
    assert vectors == rows and a["id"] in rows and c["id"] not in rows
    active = {r[0] for r in memory.db.execute("SELECT memory_id FROM memory_vectors WHERE active = 1")}
    assert active == {r[0] for r in memory.db.execute("SELECT id FROM memories WHERE status = 'active'")}


def test_a_failed_store_leaves_no_partial_write(memory, monkeypatch):
    memory.store("The deploy script fails when the VPN is down")

    def explode(*args, **kwargs):
        raise RuntimeError("simulated failure while linking")

    monkeypatch.setattr(memory, "_link", explode)
    with pytest.raises(RuntimeError):
        memory.store("The deploy script fails without a VPN connection")
    assert memory.db.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
    assert memory.db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 1


def test_two_processes_writing_one_database_lose_nothing(db_path, embedder, tmp_path):
    """Two real processes, each storing 15 distinct memories at once, through the library."""
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from yourmemory import YourMemory
        name = sys.argv[1]
        with YourMemory({str(db_path)!r}, user="ada") as memory:
            for i in range(15):
                memory.store(f"Writer {{name}} recorded measurement number {{i}} of sensor {{name}}{{i}}")
    """))
    YourMemory(db_path, user="ada", embedder=embedder).close()  # create the schema first
    writers = [subprocess.Popen([sys.executable, str(script), name], stderr=subprocess.PIPE, text=True)
               for name in ("alpha", "beta")]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert not any("locked" in e for e in errors)
    with YourMemory(db_path, user="ada", embedder=embedder) as memory:
        contents = [r[0] for r in memory.db.execute("SELECT content FROM memories")]
    assert len(contents) == len(set(contents)) == 30


def bm25_counts_match_the_memories_table(memory) -> None:
    assert not memory.db.execute(yourmemory.MISCOUNTED_SQL).fetchall()
    visible = {"user": "ada", "agent": None, "read_shared": 1, "read_private": 0}
    counted = memory.db.execute(
        f"SELECT sum(documents), sum(tokens) FROM memory_counts AS m WHERE {yourmemory.VISIBLE_TO_CALLER}",
        visible).fetchone()
    actual = memory.db.execute(
        f"""SELECT count(*), sum(token_count) FROM memories AS m
            WHERE m.status = 'active' AND {yourmemory.VISIBLE_TO_CALLER}""", visible).fetchone()
    assert counted == actual


def test_bm25_counts_follow_every_kind_of_write(memory, clock):
    """BM25's document count and average length come from trigger-kept sums, not a count per recall."""
    first = memory.store("The staging database runs Postgres 15", 0.2)["id"]
    memory.store("The staging database runs Postgres 16", 0.5)  # supersedes the first
    kept = memory.store("Deployments are frozen on Fridays after noon", 0.9)["id"]
    doomed = memory.store("Grace owns the billing service and its alerts", 0.1)["id"]
    memory.update(kept, "Deployments are frozen on Fridays after noon and on public holidays too")
    memory.forget(doomed)
    key = memory.register_agent("coder")["api_key"]
    memory.store("My scratch branch is ada/experiments", api_key=key, visibility="private")
    memory.graph.create_entities([{"name": "Lisbon office", "entityType": "place",
                                   "observations": ["The design team meets there every spring"]}])
    memory.import_memory({"content": "Backups are kept for 35 days", "importance": 0.6})
    bm25_counts_match_the_memories_table(memory)
    assert memory.db.execute("SELECT status FROM memories WHERE id = ?", (first,)).fetchone() == ("superseded",)

    clock.advance(days=400)
    pruned = memory.prune()["pruned"]
    assert pruned
    bm25_counts_match_the_memories_table(memory)
    memory.restore(pruned[0])
    memory.graph.delete_entities(["Lisbon office"])
    bm25_counts_match_the_memories_table(memory)


def test_a_database_opens_and_answers_reads_while_another_process_holds_the_write_lock(db_path, clock, embedder,
                                                                                       monkeypatch):
    """Opening an up-to-date database only reads its schema version: stats, export and the graph must not
    wait for a writer (they timed out after 15 s when opening took the write lock)."""
    monkeypatch.setattr(yourmemory, "SQLITE_BUSY_TIMEOUT_MS", 1_000)
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        memory.store("The build server is in Oslo")
    writer = yourmemory.open_raw(db_path)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as reader:
            assert reader.stats()["memories"]["active"] == 1
            assert reader.export_memories()[0]["content"] == "The build server is in Oslo"
            assert reader.graph.read_graph() == {"entities": [], "relations": []}
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_closed_store_says_so_from_every_method_and_closes_twice_quietly(db_path, embedder):
    """stats() after close() was a ProgrammingError from SQLite, recall() 'database error on the database'."""
    memory = YourMemory(db_path, user="ada", embedder=embedder)
    memory.store("The build uses Bazel")
    memory.close()
    memory.close()
    for call in (memory.stats, lambda: memory.recall("build"), lambda: memory.store("CI runs on Buildkite"),
                 memory.doctor, memory.prune, memory.list_agents, lambda: memory.graph.read_graph(),
                 lambda: memory.lessons.all()):
        with pytest.raises(yourmemory.StorageError, match="this YourMemory was closed"):
            call()


def test_token_sketches_follow_their_memory_through_store_update_import_and_forget(memory, embedder):
    """Each memory keeps its token sketches for late interaction: made with the vector, replaced when the text
    changes, and deleted with the memory (the table's foreign key), so none outlives its memory."""
    def sketches(memory_id):
        row = memory.db.execute("SELECT sketches FROM memory_tokens WHERE memory_id = ?", (memory_id,)).fetchone()
        return row and row[0]
    stored = memory.store("The release checklist lives in the wiki")["id"]
    assert sketches(stored) == embedder.embed_with_tokens("The release checklist lives in the wiki")[1]
    memory.update(stored, "The release checklist moved to the repository's docs folder")
    assert sketches(stored) == embedder.embed_with_tokens("The release checklist moved to the repository's docs folder")[1]
    assert memory.import_memory({"content": "Standup is at 9:30 on weekdays"}) == 1
    imported = memory.db.execute("SELECT max(id) FROM memories").fetchone()[0]
    assert sketches(imported) == embedder.embed_with_tokens("Standup is at 9:30 on weekdays")[1]
    memory.forget(stored)
    assert sketches(stored) is None
    assert {r[0] for r in memory.db.execute("SELECT memory_id FROM memory_tokens")} == {imported}


class ChangingWhileItEmbeds:
    """The real model; ``embed_many_with_tokens`` runs ``meanwhile`` before it answers, as another process might."""

    def __init__(self, model):
        self.model, self.embed, self.embed_one = model, model.embed, model.embed_one
        self.embed_with_tokens, self.meanwhile = model.embed_with_tokens, lambda: None

    def embed_many_with_tokens(self, texts):
        embedded = self.model.embed_many_with_tokens(texts)
        self.meanwhile()
        return embedded


def test_reindex_keeps_the_sketches_of_a_text_changed_or_forgotten_while_it_embeds(db_path, clock, embedder):
    """The sketches of a memory's old text are not written for its new one, whether its update made sketches of
    its own or none (a text with no word), nor for a forgotten one."""
    model = ChangingWhileItEmbeds(embedder)
    with YourMemory(db_path, user="ada", clock=clock, embedder=model) as memory:
        changed, emptied, forgotten, kept = (memory.store(text)["id"] for text in (
            "The release checklist lives in the wiki", "Ada's desk is by the window",
            "Standup is at 9:30 on weekdays", "CI runs on Buildkite"))
        memory.db.execute("DELETE FROM memory_tokens")
        model.meanwhile = lambda: (memory.update(changed, "The release checklist moved to the docs folder"),
                                   memory.update(emptied, "— — —"), memory.forget(forgotten))
        assert memory.fill_token_sketches() == {"filled": 1, "total": 4, "changed": 3}
        assert dict(memory.db.execute("SELECT memory_id, sketches FROM memory_tokens")) == {
            changed: embedder.embed_with_tokens("The release checklist moved to the docs folder")[1],
            kept: embedder.embed_with_tokens("CI runs on Buildkite")[1]}
        assert memory.fill_token_sketches() == {"filled": 0, "total": 0, "changed": 0}  # "— — —" has no word


@pytest.mark.parametrize("damage, said", [
    (lambda vector: vector[:384], "a vector of 384 numbers"),
    (lambda vector: [*vector[:-1], float("nan")], "a NaN or an infinity"),
    (lambda vector: [float("inf")] * len(vector), "a NaN or an infinity"),
    (lambda vector: [0.0] * len(vector), "no length to measure"),
    (lambda vector: [1e30] * len(vector), "no length to measure"),
    (lambda vector: "a vector", "str"),
], ids=["another model's length", "a NaN", "infinities", "zeros", "too large for float32", "a string"])
def test_an_embedder_whose_vectors_are_unusable_is_refused_naming_the_method(db_path, clock, embedder, damage, said):
    """A library embedder's vector that no search could use (a NaN's int8 code once took the candidates' places
    of real neighbours, another length raised numpy's broadcast error): every call that embeds fails saying
    what a vector must be, and nothing is written."""
    class Damaging:
        def embed(self, texts):
            return [damage(list(vector)) for vector in embedder.embed(texts)]

        def embed_one(self, text):
            return damage(list(embedder.embed_one(text)))

    class DamagingWithTokens(Damaging):
        def embed_with_tokens(self, text):
            vector, sketches = embedder.embed_with_tokens(text)
            return damage(list(vector)), sketches

        def embed_many_with_tokens(self, texts):
            return [(damage(list(vector)), sketches) for vector, sketches in embedder.embed_many_with_tokens(texts)]
    for database, damaging, methods in ((db_path, Damaging(), "embed_one|embed"),
                                        (db_path.with_name("with_tokens.db"), DamagingWithTokens(),
                                         "embed_one|embed_(many_)?with_tokens")):
        with YourMemory(database, user="ada", clock=clock, embedder=embedder) as memory:
            kept = memory.store("The deploy script lives in scripts/deploy.sh")["id"]
        with YourMemory(database, user="ada", clock=clock, embedder=damaging) as memory:
            calls = {
                "store": lambda: memory.store("CI runs on Buildkite"),
                "recall": lambda: memory.recall("What runs CI?"),
                "update": lambda: memory.update(kept, "The deploy script lives in tools/deploy.sh"),
                "create_entities": lambda: memory.graph.create_entities(
                    [{"name": "Ada", "entityType": "person", "observations": ["Writes Rust at work"]}]),
                "search_nodes": lambda: memory.graph.search_nodes("Who writes Rust?"),
                "find_similar_errors": lambda: memory.lessons.find_similar_errors(
                    {"type": "TimeoutError", "message": "backup timed out", "context": "cron"}),
            }
            refusal = rf"embedder's ({methods}) gave .*{said}.*must be 768 finite numbers.*nothing was written"
            for call in calls.values():
                with pytest.raises(yourmemory.YourMemoryError, match=refusal):
                    call()
            assert memory.db.execute("SELECT id, content FROM memories").fetchall() == [
                (kept, "The deploy script lives in scripts/deploy.sh")]
            assert memory.db.execute("SELECT count(*) FROM entities").fetchone()[0] == 0


def test_reindex_needs_an_embedder_that_sketches_tokens(db_path, clock, embedder):
    class VectorsOnly:
        embed, embed_one = embedder.embed, embedder.embed_one
    with YourMemory(db_path, user="ada", clock=clock, embedder=VectorsOnly()) as memory:
        memory.store("CI runs on Buildkite")
        with pytest.raises(yourmemory.YourMemoryError, match="this embedder gives no token sketches"):
            memory.fill_token_sketches()


@pytest.mark.parametrize("damage", [lambda sketches: list(sketches), lambda sketches: sketches[:50], lambda _: 7],
                         ids=["a list", "a part of a sketch", "a number"])
def test_an_embedder_whose_token_sketches_are_not_whole_sketches_is_refused_naming_the_method(
        db_path, clock, embedder, damage):
    """A library embedder's ``embed_with_tokens`` that gives anything but bytes of whole 96-byte sketches: a
    store, an observation and a recall each fail saying what it must give, and nothing is written."""
    class Damaging:
        embed, embed_one = embedder.embed, embedder.embed_one

        def embed_with_tokens(self, text):
            vector, sketches = embedder.embed_with_tokens(text)
            return vector, damage(sketches)

        def embed_many_with_tokens(self, texts):  # what the knowledge graph's texts go through
            return [(vector, damage(sketches)) for vector, sketches in embedder.embed_many_with_tokens(texts)]
    with YourMemory(db_path, user="ada", clock=clock, embedder=Damaging()) as memory:
        for call in (lambda: memory.store("CI runs on Buildkite"), lambda: memory.recall("What runs CI?"),
                     lambda: memory.graph.create_entities([{"name": "Ada", "entityType": "person",
                                                            "observations": ["Writes Rust at work"]}])):
            with pytest.raises(yourmemory.YourMemoryError, match="embed_(many_)?with_tokens gave .* whole 96-byte"):
                call()
        assert memory.db.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        assert memory.db.execute("SELECT count(*) FROM entities").fetchone()[0] == 0


ADAS_MOVE = "Ada: We moved to Lyon in May. The new office is near the river. I cycle there every day."


def test_a_memory_of_several_sentences_waits_for_index_sentences_and_a_change_or_forget_drops_them(
        db_path, clock, embedder):
    """A store makes one model run: the sentences of a memory of several wait for ``index_sentences``, which embeds
    each alone after its speaker's name; a one-sentence memory has none to wait for. An update drops them until the
    next run; a forget takes them with the memory."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        def kept():
            return dict(memory.db.execute("SELECT memory_id, vectors FROM memory_sentences"))
        story, fact = memory.store(ADAS_MOVE)["id"], memory.store("CI runs on Buildkite")["id"]
        assert kept() == {fact: b""} and memory.sentences_waiting.is_set()
        assert memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        assert not memory.sentences_waiting.is_set()
        expected = np.array([embedder.embed_one(f"Ada: {s}") for s in (
            "We moved to Lyon in May.", "The new office is near the river.", "I cycle there every day.")])
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose(yourmemory.sentence_vectors(kept()[story]), expected, atol=1e-6)
        memory.update(story, "Ada: We moved back to Paris. The old office reopened after the summer.")
        assert story not in kept() and memory.sentences_waiting.is_set()
        assert memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        assert len(kept()[story]) == 2 * 4 * yourmemory.EMBEDDING_DIM
        memory.update(fact, "CI runs on Buildkite. Deploys go through Argo CD.")
        memory.forget(story)
        assert kept() == {} and memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        assert memory.index_sentences() == {"indexed": 0, "total": 0, "changed": 0}


@pytest.mark.parametrize("text, sentences", [
    ("Ada: The worker moved to Python 3.11 today. The api stays on 3.10 until May.",
     ["Ada: The worker moved to Python 3.11 today.", "Ada: The api stays on 3.10 until May."]),
    ("Dr. Chen signed the form this morning. The clinic sent it on to Mr. Okafor.",
     ["Dr. Chen signed the form this morning.", "The clinic sent it on to Mr. Okafor."]),
    ('Gina: We just did a piece called "Finding Freedom." it was really emotional and powerful.',
     ['Gina: We just did a piece called "Finding Freedom."', "Gina: it was really emotional and powerful."]),
    ("Version 2.4.1 of the app went live on Monday.", []),  # one sentence: the whole memory's vector is it
])
def test_a_sentence_ends_where_a_space_follows_its_stop_and_not_at_a_title(text, sentences):
    """What ``index_sentences`` embeds one by one: a number's point, a title's ("Dr.") or a stop inside quotes
    does not cut a sentence in two, and a sentence that chat starts in lower case is one of its own."""
    assert yourmemory.sentences_to_embed(text) == sentences


def test_upgrading_a_version_10_database_leaves_its_memories_of_several_sentences_waiting(db_path, clock, embedder):
    """Migration 11 adds the table of sentence vectors: a memory of several sentences from before it waits for
    ``index_sentences`` (doctor counts it), which embeds them; a one-sentence memory gets its empty row on the way."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        story, fact = memory.store(ADAS_MOVE)["id"], memory.store("CI runs on Buildkite")["id"]
        memory.db.execute("DROP TABLE memory_sentences")  # as version 10 left it
        memory.db.execute("PRAGMA user_version = 10")
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        assert memory.db.execute("PRAGMA user_version").fetchone()[0] == yourmemory.SCHEMA_VERSION
        assert any(note.startswith("1 memory waits for its sentences") for note in memory.doctor()["notes"])
        assert memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        assert {memory_id: len(blob) // (4 * yourmemory.EMBEDDING_DIM) for memory_id, blob in memory.db.execute(
            "SELECT memory_id, vectors FROM memory_sentences")} == {story: 3, fact: 0}
        report = memory.doctor()
        assert report["ok"] and report["notes"] == [], report


def test_index_sentences_of_recent_writes_only_takes_what_this_object_wrote_since_its_last_run(
        db_path, clock, embedder):
    """The server's job, after its first run, embeds what its own writes left (``recent_only``) without looking
    through every memory for others; a full run still finds a memory that waits from before."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        older = memory.store(ADAS_MOVE)["id"]
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        newer = memory.store("Bo: The release slipped to Friday. QA found two blockers in checkout.")["id"]
        assert memory.index_sentences(recent_only=True) == {"indexed": 1, "total": 1, "changed": 0}
        assert memory.index_sentences(recent_only=True) == {"indexed": 0, "total": 0, "changed": 0}
        assert [m for (m,) in memory.db.execute("SELECT memory_id FROM memory_sentences")] == [newer]
        assert memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        assert {m for (m,) in memory.db.execute("SELECT memory_id FROM memory_sentences")} == {older, newer}


def test_index_sentences_that_gives_way_to_a_caller_leaves_what_it_had_not_done_to_its_next_recent_run(
        db_path, clock, embedder):
    """The server's job runs ``in_background``, a batch at a time, pausing before each; a tool call stops its model
    run (ModelRunStopped). The batch stopped is not written, and it and the batches after it wait for the next
    run of recent writes, which the job starts once the call is over: nothing is lost. Each batch is embedded
    only after ``pause`` returns."""
    third = "Cy: The vendor call moved to Monday. Legal wants the contract first."
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as memory:
        ids = [memory.store(text)["id"] for text in (
            ADAS_MOVE, "Bo: The release slipped to Friday. QA found two blockers in checkout.", third)]
        paused = []

        def pause():  # the second batch's model run is stopped, as a tool call beginning then would stop it
            paused.append(len(paused))
            if len(paused) == 2:
                original = memory.embedder.embed

                def stopped(texts, *, in_background=False):
                    memory.embedder.embed = original
                    assert in_background
                    raise yourmemory.ModelRunStopped("a background model run gave way to a caller")
                memory.embedder.embed = stopped
        with pytest.raises(yourmemory.ModelRunStopped):
            memory.index_sentences(recent_only=True, batch_size=1, pause=pause, in_background=True)
        assert paused == [0, 1]
        assert [m for (m,) in memory.db.execute("SELECT memory_id FROM memory_sentences")] == [ids[0]]
        assert memory.index_sentences(recent_only=True, batch_size=1, pause=lambda: paused.append(None),
                                      in_background=True) == {"indexed": 2, "total": 2, "changed": 0}
        assert paused[2:] == [None, None]
        assert [m for (m,) in memory.db.execute("SELECT memory_id FROM memory_sentences ORDER BY memory_id")] == ids
        for wrong in (0, True, 1.5):
            with pytest.raises(yourmemory.InvalidInput, match="batch_size"):
                memory.index_sentences(batch_size=wrong)


class ChangingWhileSentencesEmbed:
    """The real model; the first ``embed`` runs ``meanwhile`` before it answers, as another process might."""

    def __init__(self, model, meanwhile=lambda: None):
        self.model, self.embed_one, self.embed_with_tokens = model, model.embed_one, model.embed_with_tokens
        self.meanwhile = meanwhile

    def embed(self, texts):
        vectors = self.model.embed(texts)
        meanwhile, self.meanwhile = self.meanwhile, lambda: None
        meanwhile()
        return vectors


def test_index_sentences_writes_nothing_for_a_text_changed_or_forgotten_while_it_embeds(db_path, clock, embedder):
    """The sentences of a memory's old text are not kept for its new one, nor for a forgotten memory; the new text
    waits for the next run."""
    model = ChangingWhileSentencesEmbed(embedder)
    with YourMemory(db_path, user="ada", clock=clock, embedder=model) as memory:
        changed, forgotten = (memory.store(text)["id"] for text in (
            ADAS_MOVE, "Bo: The release slipped to Friday. QA found two blockers in checkout."))
        model.meanwhile = lambda: (memory.update(changed, "Ada: We stayed in Paris after all. The office is new."),
                                   memory.forget(forgotten))
        assert memory.index_sentences() == {"indexed": 0, "total": 2, "changed": 2}
        assert memory.db.execute("SELECT count(*) FROM memory_sentences").fetchone()[0] == 0
        assert memory.index_sentences() == {"indexed": 1, "total": 1, "changed": 0}
        np.testing.assert_allclose(
            yourmemory.sentence_vectors(memory.db.execute("SELECT vectors FROM memory_sentences").fetchone()[0])[0],
            embedder.embed_one("Ada: We stayed in Paris after all.") / np.linalg.norm(
                embedder.embed_one("Ada: We stayed in Paris after all.")), atol=1e-6)
