"""The JSON report: the versioned contract scripts and CI rely on."""

from tracedoc.render.base import Renderer
from tracedoc.report import Report


class JsonRenderer(Renderer):
    name = "json"

    def render(self, report: Report) -> str:
        return report.to_json() + "\n"
