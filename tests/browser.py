"""Headless Chromium for the browser tests: Debian's chromium package driven by Playwright's Python API with that
executable (Playwright never downloads a browser of its own here; .ci/run installs the package)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",  # containers: small /dev/shm
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} "
                                                                 "(apt-get install chromium; .ci/run does)")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser, closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


SERVER_START_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(args: Sequence[str | Path], cache: Path, log: Path) -> Iterator[str]:
    """`tracedoc serve ARGS` on a free port of 127.0.0.1, stopped (killed if need be) on the way out."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tracedoc", "serve", *map(str, args), "--no-show", "--port",
                                 str(port), "--cache-dir", str(cache)], cwd=Path(__file__).resolve().parent.parent,
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + SERVER_START_S
            while True:
                assert proc.poll() is None, f"the server exited: {log.read_text()[-2000:]}"
                try:
                    with urllib.request.urlopen(url + "/", timeout=5):
                        break
                except OSError:
                    assert time.monotonic() < deadline, f"no server after {SERVER_START_S} s: {log.read_text()[-2000:]}"
                    time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
