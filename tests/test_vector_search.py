"""Vector search: sketch candidates in RAM, exact cosine from SQLite, and the index following every writer.

The tests shrink the candidate pool (SKETCH_MIN_CANDIDATES, SKETCH_OVERSAMPLE) so that a sketch
that is missing or stale would make a search miss: with the default pool, a few dozen memories
are always searched exactly and the index could be wrong unnoticed.
"""
import numpy as np
import pytest

import yourmemory
from yourmemory import YourMemory, transaction

FACTS = [
    "The staging database runs Postgres 16 on a dedicated host",
    "Ada prefers tabs over spaces in Go code",
    "The CI pipeline runs on Buildkite with four agents",
    "Our frontend is built with Svelte and Vite",
    "Lisbon is where the design team meets every spring",
    "The API rate limit is 600 requests per minute per key",
    "Deployments are frozen on Fridays after noon",
    "The mobile app targets Android 10 and newer",
    "Grace owns the billing service and its alerts",
    "Backups of the main database are kept for 35 days",
    "The search cluster uses three Elasticsearch nodes",
    "Error budgets are reviewed every second Tuesday",
    "The data warehouse is BigQuery, loaded nightly by Airflow",
    "Secrets are stored in Vault and rotated every 90 days",
    "The team's on-call rotation changes on Mondays at 9am",
    "Customer support uses Zendesk with a four-hour response target",
]


def exact_order(memory, vector, scope="ada"):
    rows = memory.db.execute("SELECT memory_id, embedding FROM memory_vectors WHERE scope = ? AND active = 1",
                             (scope,)).fetchall()
    similarities = {memory_id: float(np.frombuffer(blob, dtype=np.float32) @ vector) for memory_id, blob in rows}
    return sorted(similarities, key=lambda memory_id: -similarities[memory_id])


def store_all(memory, facts=FACTS):
    return [memory.store(fact)["id"] for fact in facts]


@pytest.fixture
def small_pool(monkeypatch):
    """Three candidates per search: only a correct sketch puts the right memory among them."""
    monkeypatch.setattr(yourmemory, "SKETCH_MIN_CANDIDATES", 3)
    monkeypatch.setattr(yourmemory, "SKETCH_OVERSAMPLE", 1)
    monkeypatch.setattr(yourmemory, "CODE_MARGIN", 0)  # and the codes keep only what was asked for


def test_a_scope_within_the_candidate_pool_is_searched_exactly(memory, embedder):
    store_all(memory)
    for query in ("which database do we run?", "how long are backups kept?", "who is on call?"):
        vector = embedder.embed_one(query)
        found = memory._nearest(vector, ["ada"], 10)
        assert [memory_id for memory_id, _, _ in found] == exact_order(memory, vector)[:10]
        assert all(a[1] >= b[1] for a, b in zip(found, found[1:]))


def test_every_memory_finds_itself_first_through_a_three_candidate_pool(memory, embedder, small_pool):
    ids = store_all(memory)
    for memory_id, fact in zip(ids, FACTS):
        assert memory._nearest(embedder.embed_one(fact), ["ada"], 1)[0][:2] == (memory_id, pytest.approx(1.0))


def test_another_connection_sees_stores_updates_and_forgets(db_path, clock, embedder, small_pool):
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as writer, \
            YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as reader:
        ids = store_all(writer, FACTS[:8])
        assert reader._nearest(embedder.embed_one(FACTS[3]), ["ada"], 1)[0][0] == ids[3]  # the reader loads here

        late = writer.store(FACTS[12])["id"]
        assert reader._nearest(embedder.embed_one(FACTS[12]), ["ada"], 1)[0][0] == late

        writer.update(ids[0], "The office coffee machine takes oat milk only")
        assert reader._nearest(embedder.embed_one("The office coffee machine takes oat milk only"),
                               ["ada"], 1)[0][0] == ids[0]

        writer.forget(ids[5])
        assert ids[5] not in [m for m, _, _ in reader._nearest(embedder.embed_one(FACTS[5]), ["ada"], 3)]
        assert ids[5] not in reader.vectors.scope_of  # dropped from the sketches, not just filtered by SQLite
        for memory_id, content in writer.db.execute("SELECT id, content FROM memories WHERE status = 'active'"):
            # a removal moves the last row into the gap: its sketch and its code go together
            assert reader._nearest(embedder.embed_one(content), ["ada"], 1)[0][0] == memory_id


def test_a_rolled_back_write_leaves_nothing_behind_in_the_index(memory, embedder, small_pool):
    ids = store_all(memory, FACTS[:6])
    ghost = embedder.embed_one("A memory that was never committed")
    with pytest.raises(RuntimeError):
        with memory._lock, transaction(memory.db):
            memory.db.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (999, ?, 'ada', 1)",
                              (yourmemory.vector_blob(ghost),))
            assert memory._nearest(ghost, ["ada"], 1) == []  # no memory row: the index saw the vector, recall must not
            assert 999 in memory.vectors.scope_of
            raise RuntimeError("abort")
    # The next write reuses the rolled-back change's sequence number; the index must not take it for the one it saw.
    real = memory.store(FACTS[10])["id"]
    assert memory._nearest(embedder.embed_one(FACTS[10]), ["ada"], 1)[0][0] == real
    assert 999 not in memory.vectors.scope_of
    assert set(memory.vectors.scope_of) == set(ids) | {real}


def test_a_reader_that_fell_behind_the_pruned_log_loads_again(db_path, clock, embedder, small_pool):
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as writer, \
            YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as reader:
        store_all(writer, FACTS[:4])
        reader._nearest(embedder.embed_one(FACTS[0]), ["ada"], 1)
        late = writer.store(FACTS[14])["id"]
        writer.db.execute("DELETE FROM vector_changes")  # what pruning does to a reader VECTOR_LOG_KEPT changes behind
        later = writer.store(FACTS[15])["id"]
        assert reader._nearest(embedder.embed_one(FACTS[14]), ["ada"], 1)[0][0] == late
        assert reader._nearest(embedder.embed_one(FACTS[15]), ["ada"], 1)[0][0] == later


def test_the_change_log_keeps_only_the_recent_changes(memory):
    memory.db.execute(
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
           INSERT INTO memory_vectors (memory_id, embedding, scope, active)
           SELECT 100000 + i, zeroblob(:bytes), 'nobody', 0 FROM n""",
        {"count": yourmemory.VECTOR_LOG_KEPT + 50, "bytes": 4 * yourmemory.EMBEDDING_DIM})
    assert memory.db.execute("SELECT count(*) FROM vector_changes").fetchone()[0] == yourmemory.VECTOR_LOG_KEPT


def test_a_vector_of_the_wrong_size_is_refused_by_the_table(memory):
    with pytest.raises(yourmemory.database_errors(), match="CHECK"):
        memory.db.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (1, ?, 'ada', 1)",
                          (b"\0" * 100,))


def test_upgrading_a_version_5_database_keeps_every_vector(tmp_path, clock, embedder):
    """A database written before migration 6 (vectors in sqlite-vec's vec0) opens with its vectors in place."""
    path = tmp_path / "old.db"
    conn = yourmemory.open_raw(path)
    for migration in yourmemory.MIGRATIONS[:5]:
        for statement in yourmemory._split_sql(migration):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 5")
    vectors = {i + 1: embedder.embed_one(fact) for i, fact in enumerate(FACTS[:5])}
    for memory_id, fact in zip(vectors, FACTS):
        conn.execute("""INSERT INTO memories (id, user_id, content, category, importance, token_count, created_at,
                                              updated_at, last_accessed_at) VALUES (?, 'ada', ?, 'fact', 0.5, ?, ?, ?, ?)""",
                     (memory_id, fact, len(fact.split()), clock.now, clock.now, clock.now))
        conn.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (?, ?, 'ada', 1)",
                     (memory_id, yourmemory.vector_blob(vectors[memory_id])))
    conn.close()
    with YourMemory(path, user="ada", clock=clock, embedder=embedder) as memory:
        assert memory.db.execute("PRAGMA user_version").fetchone()[0] == yourmemory.SCHEMA_VERSION
        stored = dict(memory.db.execute("SELECT memory_id, embedding FROM memory_vectors"))
        assert {m: np.frombuffer(b, dtype=np.float32).tolist() for m, b in stored.items()} == \
            {m: v.tolist() for m, v in vectors.items()}
        assert memory.recall("Which CI system do we use?", top_k=1)["memories"][0]["id"] == 3
        assert memory.doctor()["ok"]


def test_loading_the_index_up_front_reads_every_active_vector_and_no_other(memory):
    ids = store_all(memory, FACTS[:6])
    memory.forget(ids[1])
    fresh = YourMemory(memory.path, user="ada", clock=memory.clock, embedder=memory.embedder)
    with fresh:
        assert fresh.vectors.scope_of == {}
        fresh.load_vector_index()
        assert fresh.vectors.scope_of == {memory_id: "ada" for memory_id in ids if memory_id != ids[1]}


def test_the_sketch_stage_returns_exactly_the_n_nearest_sketches_ties_included(monkeypatch):
    """The first stage counts Hamming distances block by block and picks candidates by their histogram.
    Distances are small integers and tie often, so it must still return n distinct ids, none farther
    than any it left out. Small blocks here, so that 3,000 sketches cross many block boundaries."""
    monkeypatch.setattr(yourmemory, "SKETCH_CHUNK", 256)
    rng = np.random.default_rng(7)
    sketches = yourmemory._ScopeSketches()
    vectors = np.sign(rng.standard_normal((3000, yourmemory.EMBEDDING_DIM))).astype(np.float32)
    vectors[1000:1400] = vectors[0]  # 400 identical sketches: a tie straddling every cut below
    for memory_id, vector in enumerate(vectors, start=1):
        sketches.put(memory_id, vector)
    query = yourmemory.sketch(vectors[0])
    distance = {memory_id: int(np.bitwise_count(yourmemory.sketch(vector) ^ query).sum())
                for memory_id, vector in enumerate(vectors, start=1)}
    for n in (1, 50, 399, 401, 2999):
        found = sketches.nearest(vectors[0], n)
        assert len(found) == len(set(found)) == n
        left_out = set(distance) - set(found)
        assert max(distance[m] for m in found) <= min(distance[m] for m in left_out)
    assert sorted(sketches.nearest(vectors[0], 3000)) == sorted(distance)  # a pool as big as the scope: all


def sign_centre(memory, scope="ada"):
    """The centre recall discounts, computed afresh from every active vector in SQLite."""
    rows = memory.db.execute("SELECT embedding FROM memory_vectors WHERE scope = ? AND active = 1", (scope,))
    signs = np.sign(np.stack([np.frombuffer(blob, dtype=np.float32) for blob, in rows])).sum(axis=0)
    return signs / np.linalg.norm(signs)


def test_the_centre_of_a_scope_follows_stores_updates_forgets_and_supersedes(db_path, clock, embedder):
    """Recall discounts memories close to the centre of everything, kept in RAM from the sketches: it must
    stay exact through every change another connection makes, and through a reload."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as writer, \
            YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as reader:
        ids = store_all(writer, FACTS[:8])
        reader.load_vector_index()
        assert reader.vectors.centre(["ada"]) == pytest.approx(sign_centre(writer), abs=1e-6)
        writer.store(FACTS[12])
        writer.update(ids[0], "The office coffee machine takes oat milk only")
        writer.forget(ids[5])
        assert writer.store("Our frontend is now built with SolidStart instead of Svelte")["action"] == "supersede"
        reader.vectors.refresh(reader.db)
        assert reader.vectors.centre(["ada"]) == pytest.approx(sign_centre(writer), abs=1e-6)
        assert reader.vectors.centre(["nobody"]) is None and reader.vectors.centre([]) is None
