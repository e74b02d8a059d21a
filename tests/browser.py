"""Headless Chromium for the browser tests: Debian's chromium package driven by Playwright's Python API with that
executable (Playwright never downloads a browser of its own here; .ci/run installs the package)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",  # containers: small /dev/shm
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

_no_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} "
                                                               "(apt-get install chromium; .ci/run does)")


def needs_chromium(test: Callable[..., Any]) -> Callable[..., Any]:
    """A browser test: skipped without Chromium, and marked slow (a quick local run deselects it with
    -m 'not slow'; .ci/run runs it)."""
    return pytest.mark.slow(_no_chromium(test))


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
LOAD_S = 300  # analysing the served traces, on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PAGE_TEXT_JS = """() => { const out = [];
  const walk = (node) => { if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) out.push(child.textContent.trim());
      else if (child.nodeType === Node.ELEMENT_NODE && !['SCRIPT', 'STYLE'].includes(child.tagName)) walk(child); } };
  walk(document.body); return out.join(' | '); }"""


def page_text(page: Any) -> str:
    """What a page shows as text, shadow roots included (Panel draws its panes in them); for failure messages."""
    try:
        return page.evaluate(PAGE_TEXT_JS)[:3000]
    except Exception as exc:  # the page itself may be what failed
        return f"(could not read the page: {exc})"


@contextmanager
def served(args: Sequence[str | Path], cache: Path, log: Path) -> Iterator[str]:
    """`tracedoc serve ARGS` on a free port of 127.0.0.1, stopped (killed if need be) on the way out."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tracedoc", "serve", *map(str, args), "--no-show", "--port",
                                 str(port), "--cache-dir", str(cache)], cwd=Path(__file__).resolve().parent.parent,
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "TRACEDOC_DEBUG": "1"})  # tracebacks into the log
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
            # Then until the data is loaded (the server says so on stderr): the pages' waits are for drawing only.
            while "tracedoc serve: " not in log.read_text(errors="replace"):
                assert proc.poll() is None, f"the server exited: {log.read_text()[-2000:]}"
                assert time.monotonic() < deadline + LOAD_S, f"not loaded after {LOAD_S} s: {log.read_text()[-2000:]}"
                time.sleep(0.25)
            try:
                yield url
            except Exception as exc:  # a failed wait in the page says little without what the server said
                exc.add_note(f"server log ({log}), its end:\n{log.read_text(errors='replace')[-3000:]}")
                raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
