"""A resident process (tracedoc.resident): the commands handed to it answer byte for byte as in a process of their
own, with the caller's folder, environment, exit codes and standard input; it refuses what it must not run, and the
command line then runs the command itself."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracedoc.resident import client, server, where, wire
from tracedoc.resident.server import Server

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "decode-eager" / "trace.json.gz"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="resident processes need Unix sockets")


def tracedoc(*args: str, env: dict[str, str], cwd: Path = ROOT, stdin: bytes | None = None
             ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tracedoc", *args], capture_output=True, cwd=cwd, env=env,
                          input=stdin, check=False, timeout=300)


@pytest.fixture
def resident_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of commands that hand their work to a resident process started for the test (its socket in
    a short private folder: a socket's path is limited to about 100 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="tdr-"))
    env = {**os.environ, "TRACEDOC_RESIDENT": "1", where.ENV_SOCKET: str(folder / "r.sock"),
           "TRACEDOC_CACHE_DIR": str(tmp_path / "cache")}
    started = tracedoc("resident", "start", "--idle-minutes", "10", env=env)
    assert started.returncode == 0, started.stderr
    try:
        yield env
    finally:
        tracedoc("resident", "stop", env=env)
        shutil.rmtree(folder, ignore_errors=True)


def answered(env: dict[str, str]) -> int:
    status = tracedoc("resident", "status", env=env).stdout.decode()
    return int(status.split(": ")[1].split(" commands")[0])


def test_a_report_from_the_resident_process_is_the_report_of_a_process_of_its_own(resident_env: dict[str, str]
                                                                                  ) -> None:
    own = tracedoc("analyze", str(SAMPLE), "--no-cache", "--format", "json", env={**resident_env,
                                                                                  "TRACEDOC_RESIDENT": "0"})
    assert answered(resident_env) == 0
    handed = tracedoc("analyze", str(SAMPLE), "--no-cache", "--format", "json", env=resident_env)
    assert answered(resident_env) == 1  # the command ran there, not here
    assert handed.returncode == own.returncode == 0
    assert handed.stdout == own.stdout and b'"findings"' in own.stdout
    text = tracedoc("analyze", str(SAMPLE), "--no-cache", env=resident_env)
    assert text.stdout == tracedoc("analyze", str(SAMPLE), "--no-cache",
                                   env={**resident_env, "TRACEDOC_RESIDENT": "0"}).stdout


def test_the_resident_process_runs_in_the_callers_folder_environment_and_streams(resident_env: dict[str, str],
                                                                                tmp_path: Path) -> None:
    cache = tmp_path / "own-cache"
    env = {**resident_env, "TRACEDOC_CACHE_DIR": str(cache)}
    relative = tracedoc("analyze", "decode-eager/trace.json.gz", "--format", "json", env=env, cwd=ROOT / "samples")
    assert relative.returncode == 0, relative.stderr
    assert list(cache.glob("*.duckdb")), "the store went to the caller's TRACEDOC_CACHE_DIR"
    from_stdin = tracedoc("analyze", "-", "--no-cache", "--format", "json", env=env, stdin=SAMPLE.read_bytes())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert b'"events": 35423' in from_stdin.stdout
    assert answered(resident_env) == 2


def test_exit_codes_and_errors_come_back_from_the_resident_process(resident_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    missing = tracedoc("analyze", str(tmp_path / "absent.json"), env=resident_env)
    assert missing.returncode == 2
    assert missing.stderr.decode().strip().endswith("absent.json: no such file or directory")
    assert len(missing.stderr.decode().strip().splitlines()) == 1
    failing = tracedoc("analyze", str(SAMPLE), "--no-cache", "--format", "json", "--fail-on", "info",
                       env=resident_env)
    assert failing.returncode == 1 and b'"severity"' in failing.stdout
    assert answered(resident_env) == 2


def test_a_resident_process_refuses_another_installation_and_changed_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "threads", lambda: 1)  # the test's process may hold threads of other tests
    serving = Server(Path("/nonexistent/r.sock"), 60.0, lambda line: None)
    asked = {"protocol": wire.PROTOCOL, "prefix": sys.prefix, "package": where.package_dir()}
    assert serving.refusal(asked) is None
    assert serving.refusal({**asked, "protocol": wire.PROTOCOL + 1}) == "another version of tracedoc asked"
    assert serving.refusal({**asked, "prefix": "/usr/local/another"}) == "another installation asked"
    monkeypatch.setattr(server, "threads", lambda: 3)
    assert serving.refusal(asked) == "the resident process holds 3 threads, and cannot fork safely: it stops"
    serving.digest = "the code as it was"
    assert (serving.refusal(asked) or "").startswith("tracedoc's code changed")


def test_the_command_runs_here_when_the_resident_process_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(tempfile.mkdtemp(prefix="tdr-"))
    path = folder / "r.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    asked: list[dict[str, object] | None] = []

    def refuse() -> None:
        conn, _ = listener.accept()
        with conn:
            message, fds = wire.receive(conn, max_fds=3)
            for fd in fds:
                os.close(fd)
            asked.append(message)
            wire.send(conn, {"refused": "another installation asked"})

    thread = threading.Thread(target=refuse)
    thread.start()
    monkeypatch.setenv(where.ENV_SOCKET, str(path))
    monkeypatch.setenv("TRACEDOC_RESIDENT", "1")
    try:
        assert client.run(["analyze", "trace.json"]) is None
    finally:
        thread.join(10)
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert asked and asked[0] is not None and asked[0]["argv"] == ["analyze", "trace.json"]
    assert asked[0]["cwd"] == os.getcwd()


def test_only_the_users_own_private_folder_and_the_commands_that_pay_are_handed_over(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    open_folder.chmod(0o777)
    assert not where.private_folder(open_folder)
    open_folder.chmod(0o700)
    assert where.private_folder(open_folder)
    link = tmp_path / "link"
    link.symlink_to(open_folder)
    assert not where.private_folder(link)  # a link may be anyone's, to a folder of the user's
    monkeypatch.setenv("TRACEDOC_RESIDENT", "1")
    assert client.wanted(["--debug", "analyze", "t.json"]) and client.wanted(["diff", "a", "b"])
    assert not client.wanted(["serve", "t.json"]) and not client.wanted(["resident", "start"])
    monkeypatch.setenv("TRACEDOC_RESIDENT", "0")
    assert not client.wanted(["analyze", "t.json"])


def test_the_command_lines_side_imports_nothing_of_the_analyser() -> None:
    loaded = subprocess.run([sys.executable, "-c", "import sys; import tracedoc.resident.client; "
                             "print(sorted(m for m in ('click', 'duckdb', '_duckdb', 'rich', 'tracedoc.cli') "
                             "if m in sys.modules))"], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_resident_process_keeps_one_thread_to_fork() -> None:
    done = subprocess.run([sys.executable, "-c", "from tracedoc.resident import server; server.warm(); "
                           "print(server.threads())"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"


def test_a_store_made_ahead_is_taken_once_and_reports_as_a_fresh_one(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The empty store a resident process makes before it forks (store.premake): the next store made in memory
    takes it, under the run's threads and memory cap, and reports as a store made afresh; a store made after that is
    a fresh one; and a cached store opened after another premake takes it in place of a connection of its own."""
    from tracedoc import analyze
    from tracedoc.limits import Limits
    from tracedoc.store import store as store_module
    from tracedoc.store.store import Store

    def report(**kwargs: object) -> dict[str, object]:
        made = analyze([SAMPLE], **kwargs).to_dict()  # type: ignore[arg-type]
        made.pop("tracedoc")
        return made

    fresh = report(use_cache=False)
    monkeypatch.setattr(store_module, "_premade", None)  # whatever the test leaves is dropped after it
    connections: list[str] = []
    connect = store_module.connect

    def counted(database: str, limits: Limits) -> object:
        connections.append(database)
        return connect(database, limits)

    monkeypatch.setattr(store_module, "connect", counted)

    store_module.premake()
    premade = store_module._premade
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "1")  # a job's CPUs, which DuckDB's default counts as the store is taken
    with Store.create(None, Limits(memory_bytes=256 << 20)) as store:
        assert store.con is premade and store_module._premade is None
        assert store.scalar("SELECT current_setting('async_threads')") > 0  # DuckDB's default again
        assert store.scalar("SELECT current_setting('memory_limit')") == "256.0 MiB"
        assert store.scalar("SELECT count(*) FROM gpu_activity") == 0
        made_afresh = connect(":memory:", Limits(memory_bytes=256 << 20))  # not counted: the function as it was
        assert store.scalar("SELECT current_setting('threads')") == store_module.scalar(
            made_afresh, "SELECT current_setting('threads')")  # 1 where the cap leaves every core: the job's
        made_afresh.close()
    monkeypatch.delenv("SLURM_CPUS_ON_NODE")
    assert connections == []
    assert report(use_cache=False) == fresh and connections == [":memory:"]  # taken once: this one is fresh

    store_module.premake()
    connections.clear()
    assert report(cache_dir=tmp_path) == fresh  # the store file made, then opened for the analyses
    assert len(connections) == 1 and connections[0].endswith(".duckdb")  # the file's own; the opening took it
    assert store_module._premade is None


def test_a_caller_that_sends_nothing_holds_the_resident_process_up_only_briefly(resident_env: dict[str, str]
                                                                                 ) -> None:
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(resident_env[where.ENV_SOCKET])
    try:
        handed = tracedoc("analyze", str(SAMPLE), "--no-cache", "--format", "json", env=resident_env)
    finally:
        silent.close()
    assert handed.returncode == 0 and b'"findings"' in handed.stdout
    assert answered(resident_env) == 1


def test_messages_are_read_whole_and_one_at_a_time() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        wire.send(theirs, {"pid": 12})
        wire.send(theirs, {"exit": 2})  # both waiting before the first is read: the second is not lost
        assert wire.receive(ours) == ({"pid": 12}, [])
        assert wire.receive(ours) == ({"exit": 2}, [])
        theirs.sendall((200_000).to_bytes(4, "big") + b"[" * 200_000)  # nested beyond Python's stack
        assert wire.receive(ours, within_s=2) == (None, [])
        theirs.sendall((100).to_bytes(4, "big") + b"{")  # cut short
        theirs.close()
        assert wire.receive(ours, within_s=2) == (None, [])


def test_a_killed_resident_process_leaves_commands_to_run_by_themselves(resident_env: dict[str, str]) -> None:
    status = tracedoc("resident", "status", env=resident_env).stdout.decode()
    os.kill(int(status.split()[2]), 9)
    handed = tracedoc("analyze", str(SAMPLE), "--no-cache", "--format", "json", env=resident_env)
    assert handed.returncode == 0 and b'"findings"' in handed.stdout  # its socket is left: refused, run here
    assert tracedoc("resident", "start", env=resident_env).returncode == 0  # and another takes its place
    assert answered(resident_env) == 0


@pytest.mark.parametrize("seed", range(3))
def test_whatever_a_caller_sends_is_a_message_or_none(seed: int) -> None:
    """Random bytes, cut JSON, lengths that lie: each read ends in a message or None, never an error."""
    rng = random.Random(seed)
    valid = wire.encode({"ask": "run", "argv": ["analyze", "t.json"], "env": {"A": "b" * 50}})
    for _ in range(200):
        kind = rng.randrange(4)
        if kind == 0:
            data = rng.randbytes(rng.randrange(1, 64))
        elif kind == 1:
            data = valid[:rng.randrange(1, len(valid))]
        elif kind == 2:
            body = rng.randbytes(rng.randrange(0, 40))
            data = rng.randrange(0, 1 << 32).to_bytes(4, "big") + body
        else:
            flipped = bytearray(valid)
            flipped[rng.randrange(4, len(flipped))] ^= 1 << rng.randrange(8)
            data = bytes(flipped)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with ours, theirs:
            theirs.sendall(data)
            theirs.close()
            message, fds = wire.receive(ours, within_s=1)
        assert fds == [] and (message is None or isinstance(message, dict))


def test_a_closed_standard_stream_is_run_here_with_one_line(resident_env: dict[str, str]) -> None:
    python = f"{sys.executable} -m tracedoc"
    closed_in = subprocess.run(["bash", "-c", f"exec <&- {python} analyze -"], capture_output=True, cwd=ROOT,
                               env=resident_env, timeout=120, check=False)
    closed_out = subprocess.run(["bash", "-c", f"exec >&- {python} analyze {SAMPLE} --no-cache"],
                                stderr=subprocess.PIPE, cwd=ROOT, env=resident_env, timeout=120, check=False)
    assert (closed_in.returncode, closed_in.stderr.decode().strip()) == (
        2, "Error: -: standard input is closed; pipe a trace into it (tracedoc analyze - < trace.json)")
    assert (closed_out.returncode, closed_out.stderr.decode().strip()) == (
        2, "Error: standard output is closed: give --out FILE")
    assert answered(resident_env) == 0  # neither was handed over: the socket would have taken the closed stream
