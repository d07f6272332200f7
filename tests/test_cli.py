"""The installed `yourmemory` command line, run as a real subprocess against a database in tmp_path.

Memories are made through the library with the real model; the CLI (real clock) must then see them.
"""
import functools
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import installed_entry_point

import yourmemory
from yourmemory import YourMemory

DAY = 86400.0
USER = "tester"
FADED = ("The nightly export job failed with a timeout on the legacy FTP server",
         "The Windows installer crashed because the code signing certificate expired")
STRONG = "Ada prefers dark roast coffee in the morning"




@pytest.fixture
def cli(tmp_path):
    """cli(*args, module=False): run the installed command (or `python -m yourmemory`) outside the repo."""
    db = tmp_path / "memory.db"
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": USER,
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()

    def run(*args, module=False):
        command = [sys.executable, "-m", "yourmemory", *args] if module else [installed_entry_point(), *args]
        return subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=600)

    run.db = db
    return run


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def config_blocks(stdout: str) -> dict[str, str]:
    """`# Client` headings followed by that client's config."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^# ([^\n]+)\n(.*?)(?=^# |\Z)", stdout, re.M | re.S)}


def assert_configs_launch(stdout: str, executable: str, args: list[str]) -> None:
    """Every client's config launches ``executable`` with ``args`` (the database and user in force)."""
    blocks = config_blocks(stdout)
    named = {client: next((text for heading, text in blocks.items() if heading.startswith(client)), None)
             for client in ("Claude Code", "Claude Desktop", "Cursor", "Cline")}
    assert all(named.values()), f"missing client configs in:\n{stdout}"
    model_dir = os.environ.get("YOURMEMORY_MODEL_DIR")  # a model installed elsewhere must be found there too
    env = {"YOURMEMORY_MODEL_DIR": str(Path(model_dir).expanduser().absolute())} if model_dir else {}
    assert named["Claude Code"] == " ".join(["claude mcp add yourmemory", *(f"-e {k}={v}" for k, v in env.items()),
                                             "--", executable, *args])
    for client in ("Claude Desktop", "Cursor", "Cline"):
        entry = json.loads(named[client])["mcpServers"]["yourmemory"]
        assert entry["command"] == executable and entry["args"] == args, client
        assert entry.get("env", {}) == env, client
        assert Path(entry["command"]).is_absolute()


def make_faded_and_strong(db, embedder, clock) -> tuple[list[int], int]:
    """Two failures last used ~400 days ago (far below the prune floor) and one fresh, important fact."""
    clock.now = time.time() - 400 * DAY
    with YourMemory(db, user=USER, clock=clock, embedder=embedder) as memory:
        faded = [memory.store(text, importance=0.1, category="failure")["id"] for text in FADED]
        clock.now = time.time()
        strong = memory.store(STRONG, importance=0.9, category="fact")["id"]
    return faded, strong


def reported_ids(stdout: str) -> list[int]:
    match = re.search(r"Pruned (\d+) faded memories(?: \(ids ([\d, ]+)\))?", stdout)
    assert match, f"no prune report in:\n{stdout}"
    ids = [int(i) for i in (match.group(2) or "").split(",") if i.strip()]
    assert int(match.group(1)) == len(ids)
    return ids


def recalled_ids(db, embedder, query: str) -> list[int]:
    with YourMemory(db, user=USER, embedder=embedder) as memory:
        return [m["id"] for m in memory.recall(query, top_k=10)["memories"]]


def test_config_prints_every_client_config_with_the_absolute_executable(cli):
    stdout = ok(cli("config"))
    assert_configs_launch(stdout, installed_entry_point(), ["--db", str(cli.db), "--user", USER])
    assert not cli.db.exists(), "config should not need or create the database"


def test_config_carries_the_database_user_and_model_it_was_given(tmp_path):
    """Without settings the clients launch the defaults; --db, --user and $YOURMEMORY_MODEL_DIR given to
    `config` reach the printed configs, so the client's server uses the same database, user and model."""
    plain = {k: v for k, v in os.environ.items() if not k.startswith("YOURMEMORY_")}
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    defaults = config_blocks(ok(run([installed_entry_point(), "config"], env=plain)))
    entry = json.loads(next(t for h, t in defaults.items() if h.startswith("Cursor")))["mcpServers"]["yourmemory"]
    assert entry["args"] == [] and "env" not in entry

    db, models = tmp_path / "team memory.db", tmp_path / "models"
    given = config_blocks(ok(run([installed_entry_point(), "--db", str(db), "--user", "ada", "config"],
                                 env={**plain, "YOURMEMORY_MODEL_DIR": str(models)})))
    entry = json.loads(next(t for h, t in given.items() if h.startswith("Cursor")))["mcpServers"]["yourmemory"]
    assert entry["args"] == ["--db", str(db), "--user", "ada"]
    assert entry["env"] == {"YOURMEMORY_MODEL_DIR": str(models)}
    claude = next(t for h, t in given.items() if h.startswith("Claude Code"))
    assert claude == (f"claude mcp add yourmemory -e YOURMEMORY_MODEL_DIR={models} -- {installed_entry_point()} "
                      f"--db '{db}' --user ada")


def test_stats_counts_active_memories_per_category_with_a_strength_histogram(cli, embedder):
    with YourMemory(cli.db, user=USER, embedder=embedder) as memory:
        for text, importance, category in [
                ("The project database is Postgres 16", 0.5, "fact"),
                ("Ada lives in Lisbon", 0.5, "fact"),
                ("The release build failed because the disk on the runner was full", 0.9, "failure"),
                ("Always run the migrations before deploying the API", 0.3, "strategy")]:
            assert memory.store(text, importance=importance, category=category)["action"] == "store"
    with YourMemory(cli.db, user="someone-else", embedder=embedder) as memory:
        memory.store("Bob keeps his notes in Obsidian", category="assumption")

    report = json.loads(ok(cli("stats", "--json")))
    assert report["user"] == USER and Path(report["database"]) == cli.db
    assert report["memories"] == {"active": 4, "superseded": 0, "pruned": 0}
    assert report["categories"] == {"fact": 2, "assumption": 0, "failure": 1, "strategy": 1}
    assert report["strength"] == {"0.00-0.05": 0, "0.05-0.20": 0, "0.20-0.40": 1,
                                  "0.40-0.60": 2, "0.60-0.80": 0, "0.80-1.00": 1}

    text = ok(cli("stats"))
    assert "4 active, 0 superseded, 0 pruned" in text
    for category, count in report["categories"].items():
        assert re.search(rf"^\s+{category}\s+{count}$", text, re.M), f"{category} {count} missing:\n{text}"
    assert re.search(r"^\s+0\.40-0\.60\s+#+\s+2$", text, re.M), text
    assert re.search(r"^\s+0\.60-0\.80\s+0$", text, re.M), text


def test_prune_reports_faded_ids_which_recall_then_skips_and_restore_brings_back(cli, embedder, clock):
    faded, strong = make_faded_and_strong(cli.db, embedder, clock)

    pruned = reported_ids(ok(cli("prune")))
    assert sorted(pruned) == sorted(faded) and strong not in pruned
    with YourMemory(cli.db, user=USER, embedder=embedder) as memory:
        assert [memory.get(i)["status"] for i in faded] == ["pruned", "pruned"]
        assert memory.get(strong)["status"] == "active"
    assert faded[0] not in recalled_ids(cli.db, embedder, "nightly export job FTP timeout")
    assert faded[1] not in recalled_ids(cli.db, embedder, "Windows installer signing certificate")

    restored = ok(cli("restore", str(faded[0])))
    assert f"Restored memory {faded[0]}" in restored and FADED[0] in restored
    found = recalled_ids(cli.db, embedder, "nightly export job FTP timeout")
    assert found[0] == faded[0]
    assert faded[1] not in found

    again = reported_ids(ok(cli("prune")))
    assert faded[0] not in again, "a restored memory is fresh again and must not be pruned at once"


def test_python_dash_m_prune_uses_the_installed_module_outside_the_repo(cli, embedder, clock):
    faded, strong = make_faded_and_strong(cli.db, embedder, clock)
    stdout = ok(cli("prune", module=True))
    assert sorted(reported_ids(stdout)) == sorted(faded)
    assert "yourmemory restore ID" in stdout
    with YourMemory(cli.db, user=USER, embedder=embedder) as memory:
        assert memory.get(strong)["status"] == "active"
        assert {memory.get(i)["status"] for i in faded} == {"pruned"}


def test_setup_with_a_cached_model_is_idempotent_and_prints_configs(cli):
    if not yourmemory.model_installed():
        pytest.fail(f"the embedding model is not installed in {yourmemory.model_dir()}: run `yourmemory setup`")
    for attempt in (1, 2):
        result = cli("setup")
        stdout = ok(result)
        assert re.search(r"^Model:\s+.+ \(cached\)$", stdout, re.M), f"run {attempt}:\n{stdout}"
        assert str(cli.db) in stdout and f"user {USER}, 0 memories" in stdout
        assert "downloading" not in result.stderr and "[1/4]" not in result.stderr
        assert_configs_launch(stdout, installed_entry_point(), ["--db", str(cli.db), "--user", USER])
    assert cli.db.exists()
    with YourMemory(cli.db, user=USER) as memory:
        assert memory.stats()["memories"]["active"] == 0
    assert "token sketches" not in stdout


def test_setup_on_a_database_from_before_token_sketches_says_to_reindex(cli, embedder):
    with YourMemory(cli.db, user=USER, embedder=embedder) as memory:
        for text in ("The build uses Bazel", "CI runs on Buildkite"):
            memory.store(text)
        memory.db.execute("DELETE FROM memory_tokens")
    assert ("2 memories in it (every user's) have no token sketches, stored by an older version: "
            "`yourmemory reindex` adds them" in ok(cli("setup")))
    ok(cli("reindex"))
    assert "token sketches" not in ok(cli("setup"))


def test_restore_of_an_unknown_id_fails_with_a_clear_message_and_no_traceback(cli):
    yourmemory.connect(cli.db).close()
    result = cli("restore", "424242")
    assert result.returncode != 0
    assert "424242" in result.stderr and result.stderr.startswith("yourmemory: error:"), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_audit_of_a_memory_with_no_entries_says_so_rather_than_printing_nothing(cli):
    yourmemory.connect(cli.db).close()
    assert ok(cli("audit", "--memory", "999")).strip() == "No audit entries for memory 999."


@pytest.mark.parametrize("command", [["stats"], ["export"], ["doctor"], ["audit"], ["prune"], ["restore", "1"],
                                     ["backup", "{tmp}/backup.db"], ["agent", "list"], ["agent", "revoke", "coder"],
                                     ["reindex"]])
def test_a_command_that_reads_a_database_refuses_a_path_with_none_and_creates_nothing(tmp_path, command):
    typo = tmp_path / "typo" / "memroy.db"
    env = {**os.environ, "YOURMEMORY_USER": USER, "YOURMEMORY_HOME": str(tmp_path / "home")}
    result = subprocess.run([installed_entry_point(), "--db", str(typo), *[a.format(tmp=tmp_path) for a in command]],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"yourmemory: error: no database at {typo}"), result.stderr
    assert not (tmp_path / "typo").exists() and not (tmp_path / "backup.db").exists()


@pytest.mark.parametrize("args, says", [
    (["export", "-o", "{folder}"], "output: {folder} is a folder"),
    (["export", "-o", "{blocker}/out.jsonl"], "output: cannot create the folder {blocker}"),
    (["export", "-o", ""], "output: must be a file path"),
    (["--db", "{blocker}/memory.db", "agent", "register", "coder"],
     "cannot create the folder {blocker} for the database"),
    (["--db", "", "stats"], "--db must not be empty"),
    (["--user", "  ", "stats"], "--user must not be empty"),
    (["audit", "--limit", "99999999999999999999999"], "limit: must be a positive integer"),
    (["agent", "register", "coder", "--read", "public"], "--read: must be"),  # the option, not can_read
])
def test_a_file_or_option_problem_is_one_line_naming_it(cli, tmp_path, args, says):
    folder, blocker = tmp_path / "exports", tmp_path / "blocker"
    folder.mkdir()
    blocker.write_text("a file where a folder should be")
    yourmemory.connect(cli.db).close()
    result = cli(*[a.format(folder=folder, blocker=blocker) for a in args])
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("yourmemory: error: ") and says.format(folder=folder, blocker=blocker) in \
        result.stderr, result.stderr
    assert not list(tmp_path.rglob("*.partial"))


BINDING_PROBLEMS = [("bogus", "$YOURMEMORY_SQLITE must be auto, sqlite3 or sqlean, not 'bogus'")]
if not hasattr(sqlite3.Connection, "enable_load_extension"):  # this machine's Python, as macOS's
    BINDING_PROBLEMS.append(("sqlite3", "$YOURMEMORY_SQLITE=sqlite3, but this Python's sqlite3 cannot load"))


@pytest.mark.parametrize("binding, says", BINDING_PROBLEMS)
def test_a_sqlite_binding_that_cannot_work_is_one_line_naming_the_variable(tmp_path, binding, says):
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "memory.db"), "YOURMEMORY_USER": USER,
           "YOURMEMORY_HOME": str(tmp_path / "home"), "YOURMEMORY_SQLITE": binding}
    result = subprocess.run([installed_entry_point(), "stats"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"yourmemory: error: {says}"), result.stderr
    assert not (tmp_path / "memory.db").exists()


def test_a_blank_user_in_the_environment_is_refused_not_taken_for_the_default(tmp_path):
    env = {**os.environ, "YOURMEMORY_DB": str(tmp_path / "memory.db"), "YOURMEMORY_USER": "   ",
           "YOURMEMORY_HOME": str(tmp_path / "home")}
    result = subprocess.run([installed_entry_point(), "stats"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("yourmemory: error: YOURMEMORY_USER: must not be blank"), result.stderr


SHOW_THE_PARSE_SETUP = """
import json, sys, yourmemory
code = yourmemory.main(sys.argv[1:])
print(json.dumps({"code": code, "threads": yourmemory.openblas_threads(),
                  "blis": yourmemory.nlp().get_pipe("tok2vec").model.ops.use_blis}))
"""


@pytest.mark.parametrize("variable, value, threads, blis", [
    (None, None, 1, False),
    ("OPENBLAS_NUM_THREADS", "", 1, False),  # empty: OpenBLAS reads no count from it either
    ("OPENBLAS_NUM_THREADS", "2", 2, True),
    ("OMP_NUM_THREADS", "2", 2, True),
])
def test_import_parses_through_one_openblas_thread_unless_the_environment_sets_a_count(
        tmp_path, embedder, variable, value, threads, blis):
    """`serve` and `import` own their process: numpy's OpenBLAS gets one thread, and spaCy's matrix products go
    through it rather than through its bundled blis (faster stores); a count the environment sets is obeyed."""
    if yourmemory.openblas_threads() is None:
        pytest.skip("no OpenBLAS bundled with this numpy (Accelerate, MKL, a system's): nothing to hold to one thread")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if threads > cores:
        pytest.skip(f"OpenBLAS caps the count at the {cores} core(s) this test may use")
    with YourMemory(tmp_path / "source.db", user=USER, embedder=embedder) as source:
        source.store("The release train leaves every second Thursday")
        (tmp_path / "memories.jsonl").write_text(yourmemory.export_records(source, "memories"), encoding="utf-8")
    env = {name: setting for name, setting in os.environ.items() if name not in yourmemory.BLAS_THREAD_VARIABLES}
    env.update({"YOURMEMORY_DB": str(tmp_path / "memory.db"), "YOURMEMORY_USER": USER,
                "YOURMEMORY_HOME": str(tmp_path / "home"), **({variable: value} if variable else {})})
    result = subprocess.run([sys.executable, "-c", SHOW_THE_PARSE_SETUP, "import", str(tmp_path / "memories.jsonl")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "lessons, 1 memories;" in result.stdout, result.stdout
    assert json.loads(result.stdout.splitlines()[-1]) == {"code": 0, "threads": threads, "blis": blis}


WARM_UP_AS_SERVE_DOES = """
import json, sys, yourmemory
with yourmemory.YourMemory(sys.argv[1], user="tester") as memory:
    yourmemory.WarmUp(memory).run()
    print(json.dumps({"threads": yourmemory.openblas_threads(),
                      "blis": yourmemory.nlp().get_pipe("tok2vec").model.ops.use_blis}))
"""


def test_the_servers_warm_up_holds_openblas_to_one_thread_before_spacy_loads(tmp_path):
    """`serve` sets the thread count in its warm-up thread, so that importing numpy for it does not hold up the
    answer to `initialize`; spaCy, loaded next in the same thread, goes through OpenBLAS."""
    if yourmemory.openblas_threads() is None:
        pytest.skip("no OpenBLAS bundled with this numpy (Accelerate, MKL, a system's): nothing to hold to one thread")
    env = {name: setting for name, setting in os.environ.items() if name not in yourmemory.BLAS_THREAD_VARIABLES}
    env["YOURMEMORY_HOME"] = str(tmp_path / "home")
    result = subprocess.run([sys.executable, "-c", WARM_UP_AS_SERVE_DOES, str(tmp_path / "memory.db")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"threads": 1, "blis": False}
