"""`tracedoc serve` refuses what it cannot serve before the server starts and before it prints anything: a port
another program listens on (one line, exit 2; another free port when --port was not given), and an input that
cannot be read (one line, exit 2, instead of a server whose pages say so)."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.cli import cli

EAGER = SAMPLES / "decode-eager"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port of 127.0.0.1 another program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The servers `tracedoc serve` would start (never started here): their loading, host and port."""
    calls: list[dict] = []

    def record(loading: object, host: str, port: int, show: bool) -> None:
        calls.append({"loading": loading, "host": host, "port": port})

    monkeypatch.setattr("tracedoc.dashboard.app.serve", record)
    monkeypatch.setattr("tracedoc.dashboard.diff.serve_diff", record)
    return calls


def serve(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["serve", *args, "--no-show"])
    return result.exit_code, result.stdout, result.stderr


def test_a_port_taken_is_one_line_before_anything_is_read(held_port: int, started: list[dict],
                                                          tmp_path: Path) -> None:
    for args in ([str(EAGER)], ["--diff", str(EAGER), str(SAMPLES / "decode-cudagraph")]):
        code, out, err = serve(*args, "--port", str(held_port), "--cache-dir", str(tmp_path))
        assert code == 2 and out == ""
        assert err == (f"Error: --port {held_port}: cannot listen on 127.0.0.1:{held_port} (Address already in use); "
                       "choose another port, or leave --port out to take a free one\n")
    assert not started and not list(tmp_path.iterdir())


def test_without_port_a_free_one_is_taken_when_the_default_is_held(started: list[dict], tmp_path: Path) -> None:
    with socket.socket() as holder:
        try:  # 5006, the default, held here (or already by another program)
            holder.bind(("127.0.0.1", 5006))
            holder.listen()
        except OSError:
            pass
        code, _, err = serve(str(EAGER), "--cache-dir", str(tmp_path))
    assert code == 0, err
    [server] = started
    assert server["port"] != 5006
    assert err == f"tracedoc dashboard at http://127.0.0.1:{server['port']}/ (Ctrl-C stops it)\n"
    with socket.socket() as s:  # the port handed to the server is free
        s.bind(("127.0.0.1", server["port"]))


def test_an_input_that_cannot_be_read_is_refused_before_the_server_starts(tmp_path: Path,
                                                                          started: list[dict]) -> None:
    """A real trace cut in half: recognised as a PyTorch trace, then failing to load."""
    bad = tmp_path / "trace.json"
    whole = gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes())
    bad.write_bytes(whole[: len(whole) // 2])
    for args in ([str(bad)], ["--diff", str(SAMPLES / "input-slow"), str(bad)]):
        code, out, err = serve(*args, "--cache-dir", str(tmp_path / "cache"))
        assert code == 2 and out == "", err
        assert err.startswith(f"Error: {bad}: truncated or malformed trace") and len(err.splitlines()) == 1
    assert not started


def test_a_good_input_is_read_into_the_cache_before_the_server_starts(tmp_path: Path, started: list[dict]) -> None:
    cache = tmp_path / "cache"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = serve(str(EAGER), "--cache-dir", str(cache), "--port", str(port))
    assert code == 0, err
    assert len(list(cache.glob("*.duckdb"))) == 1 and started[0]["port"] == port
    loading = started[0]["loading"]
    assert not loading.done.is_set()  # the analysis is the server's, in the background
    code, _, err = serve("--diff", str(EAGER), str(SAMPLES / "decode-cudagraph"), "--cache-dir", str(cache))
    assert code == 0, err
    assert len(list(cache.glob("*.duckdb"))) == 2  # each side in its own store


def test_an_unreadable_input_is_refused_before_the_dashboard_libraries_load(tmp_path: Path) -> None:
    """A truncated gzip is refused as `analyze` refuses it, without importing Panel, Bokeh or datashader first (they
    took some 6× analyze's time before the refusal): work bounded by what is imported, not by the clock."""
    import subprocess
    import sys
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [')[:20])
    script = ("import sys\nfrom tracedoc.cli import cli\n"
              f"try:\n    cli(['serve', {str(bad)!r}, '--no-show', '--cache-dir', {str(tmp_path / 'c')!r}])\n"
              "except SystemExit as e:\n"
              "    print('exit', e.code)\n"
              "print('loaded', sorted(m for m in ('panel', 'bokeh', 'datashader', 'holoviews') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert "corrupt or truncated gzip" in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stdout.splitlines()[-2:] == ["exit 2", "loaded []"], result.stdout


def test_help_names_every_page() -> None:
    """`serve --help` names each of the dashboard's pages (tracedoc.pages.PAGES: nine), memory and efficiency
    included."""
    from tracedoc.pages import PAGES
    text = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    assert len(PAGES) == 9
    assert f"The pages ({', '.join(p.module for p in PAGES)})" in text
