"""What a command imports and reads later is done ahead (tracedoc.warm): on a helper thread from the first step of
`tracedoc analyze`, once; what the helper could not do is left for the command to meet and report."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
