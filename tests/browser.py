"""Headless Chromium for the browser tests: Debian's chromium package driven by Playwright's Python API with that
executable (Playwright never downloads a browser of its own here; .ci/run installs the package)."""

from __future__ import annotations

from collections.abc import Iterator
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
