"""Wording shared by the renderers, the pages, the diff and the CLI: how a report's numbers, causes, findings and
strings from traces are written for people. The core and the pages read it here, not from the renderer package."""
