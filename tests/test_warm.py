"""What a command imports and reads later is done ahead (tracedoc.warm): on a helper thread from the first step of
`tracedoc analyze`, once; what the helper could not do is left for the command to meet and report. And the empty
store an analysis without the cache makes, made on a helper thread while the command line imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "decode-eager" / "trace.json.gz"


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    assert done.stderr == ""
    return done.stdout.strip()


def test_the_first_step_starts_one_helper_that_imports_the_formats_renderer() -> None:
    said = run_python("""
        import sys, threading
        from tracedoc.warm import on_first_step
        steps = []
        step = on_first_step(steps.append, "md")
        print("tracedoc.render.markdown" in sys.modules)
        step("reading trace.json"); step("analysing")
        helpers = [t for t in threading.enumerate() if t.name == "tracedoc-warm"]
        for helper in helpers:
            helper.join()
        print(steps, len(helpers), "tracedoc.render.markdown" in sys.modules, "tracedoc.render.text" in sys.modules)
        """)
    assert said.splitlines() == ["False", "['reading trace.json', 'analysing'] 1 True False"]


def test_a_helper_that_fails_says_nothing() -> None:
    said = run_python("""
        import threading
        from tracedoc.warm import on_first_step
        from tracedoc import warm
        warm.ANALYSIS_IMPORTS = ("tracedoc.no_such_module",)
        on_first_step(lambda message: None, "md")("reading")
        for helper in [t for t in threading.enumerate() if t.name == "tracedoc-warm"]:
            helper.join()
        print("done")
        """)
    assert said == "done"


def test_asking_whether_a_format_has_a_renderer_imports_none() -> None:
    """The first step's helper imports the renderer: asking the registry for the format on the command's own thread
    (Mapping's membership would fetch the item) must not import it there first."""
    said = run_python("""
        import sys, threading
        imported_on = []

        class Spy:
            def find_spec(self, name, path=None, target=None):
                if name == "tracedoc.render.markdown":
                    imported_on.append(threading.current_thread().name)
                return None

        sys.meta_path.insert(0, Spy())
        from tracedoc.render.base import RENDERERS
        from tracedoc.warm import on_first_step
        print("md" in RENDERERS, "pdf" in RENDERERS, "tracedoc.render.markdown" in sys.modules)
        on_first_step(lambda message: None, "md")("reading")
        for helper in [t for t in threading.enumerate() if t.name == "tracedoc-warm"]:
            helper.join()
        print(imported_on)
        """)
    assert said.splitlines() == ["True False False", "['tracedoc-warm']"]


def test_an_analysis_without_the_cache_takes_the_store_made_aside_and_others_make_none() -> None:
    said = run_python("""
        from tracedoc.store import store
        from tracedoc.store.store import Store
        from tracedoc.warm import store_ahead
        for argv in (["analyze", "trace.json"], ["diff", "a.json", "b.json", "--no-cache"], ["--no-cache"],
                     ["analyze", "ranks/", "--no-cache", "--workers=2"], ["analyze", "--help", "--no-cache"]):
            store_ahead(argv)
            print(store._premaking is not None)
        store_ahead(["--debug", "analyze", "trace.json.gz", "--no-cache"])
        store.connect = None  # the store taken is the one made aside: connecting afresh would fail
        with Store.create(None) as made:
            print(store._premaking, store._premade, made.scalar("SELECT count(*) FROM gpu_activity"))
        """)
    assert said.splitlines() == ["False"] * 5 + ["None None 0"]


def test_the_command_line_hands_its_analysis_without_the_cache_the_store_made_aside() -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import atexit, sys
        from tracedoc.store import store
        taken = []
        take = store._take_premade
        store._take_premade = lambda limits: taken.append(take(limits)) or taken[-1]
        atexit.register(lambda: print([con is not None for con in taken], file=sys.stderr))
        sys.argv = ["tracedoc", "analyze", {str(SAMPLE)!r}, "--no-cache", "--format", "json"]
        from tracedoc.console import main
        main()
        """)], capture_output=True, text=True, env={**os.environ, "TRACEDOC_RESIDENT": "0"}, check=False)
    assert done.returncode == 0 and '"findings"' in done.stdout
    assert done.stderr.strip() == "[True]"  # one store made, and it was the one made aside


def slow_store_then_ctrl_c(finished: Path, wait: str) -> str:
    """A script that starts the store made aside, slowed to 0.3 s and writing ``finished`` once made, and whose
    ``wait`` for it (its last lines) Ctrl-C (a timer's signal) interrupts after 0.1 s."""
    return textwrap.dedent(f"""
        import os, signal, time
        from tracedoc.store import store
        from tracedoc.warm import store_ahead
        premake = store.premake

        def slow_premake():
            time.sleep(0.3)
            premake()
            open({str(finished)!r}, "w").close()

        def ctrl_c(signum, frame):
            raise KeyboardInterrupt

        store.premake = slow_premake
        wait_for_store = store_ahead(["analyze", "trace.json", "--no-cache"])
        signal.signal(signal.SIGALRM, ctrl_c)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        """) + textwrap.dedent(wait)


def test_a_command_that_ends_before_taking_the_store_made_aside_waits_for_it_even_after_ctrl_c(tmp_path: Path
                                                                                               ) -> None:
    """A process that ends while DuckDB starts a database on another thread aborts: the exit waits for the thread,
    also when Ctrl-C interrupted the store's wait for it (a ``join`` so interrupted marks the thread ended: Python
    3.11), and the command line's own wait at its end goes on through Ctrl-C."""
    finished = tmp_path / "made"
    for _ in range(3):
        finished.unlink(missing_ok=True)
        said = run_python(slow_store_then_ctrl_c(finished, """
            try:
                store.Store.create(None)
            except KeyboardInterrupt:
                print("interrupted")
            """))
        assert said == "interrupted" and finished.exists()
        finished.unlink()
        said = run_python(slow_store_then_ctrl_c(finished, f"""
            wait_for_store()
            print(os.path.exists({str(finished)!r}))
            """))
        assert said == "True"
    for _ in range(3):  # and without waiting at all: the process's end is the only wait
        run_python("from tracedoc.store import store; store.premake_aside()")
