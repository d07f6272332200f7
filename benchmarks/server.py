"""The MCP server as a client sees it: time to answer initialize, RSS after real work.

    python benchmarks/server.py

Starts the installed `yourmemory` entry point over stdio with the mcp SDK client on a
fresh database, times initialize + tools/list (the model loads in the background),
then stores and recalls LoCoMo turns and reads the server's resident memory from
/proc (Linux). Medians over --runs launches.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import load_locomo, machine, median, write_results
from locomo import turn_units
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def entry_point() -> str:
    local = Path(sys.executable).parent / "yourmemory"
    return str(local) if local.exists() else shutil.which("yourmemory")


def server_pid() -> int | None:
    """The child of this process that runs yourmemory."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid() and "yourmemory" in (entry / "cmdline").read_text():
                    return int(entry.name)
            except (OSError, ValueError, IndexError):
                continue
    return None


def rss_mb(pid: int) -> dict:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}


async def one_launch(turns: list[str], questions: list[str], workdir: Path) -> dict:
    env = {**os.environ, "YOURMEMORY_DB": str(workdir / "server.db"), "YOURMEMORY_USER": "bench"}
    params = StdioServerParameters(command=entry_point(), args=[], env=env)
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        ready_s = time.perf_counter() - started
        for text in turns:
            await session.call_tool("store_memory", {"content": text, "importance": 0.7})
        for question in questions:
            await session.call_tool("recall_memory", {"query": question, "top_k": 5})
        memory = rss_mb(server_pid())
    return {"initialize_and_list_tools_s": round(ready_s, 3), "rss_mb_after_work": memory["VmRSS"],
            "peak_rss_mb": memory["VmHWM"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    turns = [content for _, content in turn_units(samples[0])][:100]
    questions = [q["question"] for q in samples[0]["qa"]][:50]
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="yourmemory-server-") as workdir:
            runs.append(asyncio.run(one_launch(turns, questions, Path(workdir))))
            print(runs[-1], file=sys.stderr)
    summary = {key: median([r[key] for r in runs]) for key in runs[0]}
    path = write_results("server.json", {"benchmark": "server", "machine": machine(), "stores": len(turns),
                                         "recalls": len(questions), "median": summary, "runs": runs})
    print(summary)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
