"""The Panel app of `tracedoc serve`: one route per page of tracedoc.pages.PAGES under a navigation bar.

The data loads on a background thread (tracedoc/dashboard/source.py); until it is ready every page shows what is
being done, then draws itself. A failure shows as a one-line message in the page, never as a traceback.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from types import ModuleType

import panel as pn

from tracedoc.dashboard.panes import html_pane, sections_view
from tracedoc.dashboard.source import BackgroundLoad, Loading
from tracedoc.dashboard.views import overview_view, timeline_missing, timeline_view
from tracedoc.errors import first_line
from tracedoc.pages import empty, overview, page_modules, timeline
from tracedoc.pages.fragments import Html, esc, message_html
from tracedoc.report import Report

POLL_MS = 300


def route(page: ModuleType) -> str:
    """The page's URL path: the first page (the overview) is the root."""
    return "/" if page is page_modules()[0] else f"/{page.ROUTE}"


# The pages drawn with widgets of their own (tracedoc.dashboard.views), by route; every other page is its sections.
WIDGET_VIEWS: dict[str, Callable[[Report, Loading], pn.viewable.Viewable]] = {
    overview.ROUTE: lambda report, loading: overview_view(report, loading.timeline),
    timeline.ROUTE: lambda report, loading: timeline_view(
        loading.timeline, pn.state.session_args if pn.state.curdoc else None, report),
}
# Why a page drawn from the store has nothing to show, by route (the others say it from the report, with their
# has_data and EMPTY: pages.empty).
STORE_PAGE_MISSING: dict[str, Callable[[Loading], str | None]] = {
    timeline.ROUTE: lambda loading: timeline_missing(loading.timeline, loading.report),
}


def navigation(current: ModuleType, empty_pages: dict[ModuleType, str] | None = None) -> Html:
    """The navigation bar: a link per page, the current one in bold; a page without data for these inputs
    (``empty_pages``: page → why) greyed out, not a link, the reason on hover."""
    empty_pages = empty_pages or {}
    links = []
    for p in page_modules():
        weight = ' style="font-weight:700"' if p is current else ""
        if p in empty_pages:
            links.append(f'<span class="off" aria-disabled="true" title="{esc(empty_pages[p])}"{weight}>'
                         f"{esc(p.TITLE)}</span>")
        else:
            links.append(f'<a href=".{route(p)}"{weight}>{esc(p.TITLE)}</a>')
    return Html(f'<h1 style="margin-top:0.4rem">tracedoc</h1><nav>{"".join(links)}</nav>')


def empty_pages(loading: Loading) -> dict[ModuleType, str]:
    """The pages without data for what was loaded, each with the sentence saying why (none before it is loaded or
    when it failed: then every page says so itself)."""
    report = loading.report
    if loading.error is not None or report is None:
        return {}
    pages = page_modules()
    out = {p: why for p in pages[1:] if p.ROUTE not in STORE_PAGE_MISSING and (why := empty.why_empty(p, report))}
    out.update({p: why for p in pages if (missing := STORE_PAGE_MISSING.get(p.ROUTE)) is not None
                and (why := missing(loading)) is not None})
    return out


def body(loading: Loading, page: ModuleType) -> pn.viewable.Viewable:
    """The page's content once loading is over: the page, or the message saying why there is none."""
    if loading.error is not None or loading.report is None:
        return html_pane(message_html(f"Could not load the input: {loading.error}", "error"))
    if (view := WIDGET_VIEWS.get(page.ROUTE)) is not None:
        return view(loading.report, loading)
    return sections_view(page.sections(loading.report))


def drawn(draw: Callable[[], pn.viewable.Viewable], failure: str) -> pn.viewable.Viewable:
    """``draw()``, or the one line saying why it failed (``failure``: what could not be drawn), so that a page that
    cannot draw itself leaves the others working; the traceback goes to the server's log in debug mode."""
    try:
        return draw()
    except Exception as exc:
        if os.environ.get("TRACEDOC_DEBUG"):
            traceback.print_exc()
        return html_pane(message_html(f"{failure}: {first_line(exc)}", "error"))


def with_progress(loading: BackgroundLoad, draw: Callable[[], pn.viewable.Viewable],
                  header: pn.viewable.Viewable | None = None,
                  failure: str = "This page could not be drawn") -> pn.viewable.Viewable:
    """One browser session's view: ``draw()`` once ``loading`` is over (``failure`` in the one line shown if it
    fails), its progress until then. Once the browser shows the drawn page, ``loading.shown`` is set."""
    content = pn.Column(sizing_mode="stretch_width")
    layout = pn.Column(*([header] if header is not None else []), content, sizing_mode="stretch_width",
                       styles={"max-width": "1400px", "margin": "0 auto", "padding": "0 1rem"})

    def show() -> None:
        content.objects = [drawn(draw, failure)]
        pn.state.onload(loading.shown.set)  # once the browser has the page (at once outside a server)

    if loading.done.is_set():
        show()
        return layout
    status = html_pane(Html(f'<p class="note">{esc(loading.status)}…</p>'))
    content.objects = [pn.Row(pn.indicators.LoadingSpinner(value=True, size=24), status)]

    def poll() -> None:
        if loading.done.is_set():
            callback.stop()
            show()
        else:
            status.object = f'<p class="note">{esc(loading.status)}…</p>'

    callback = pn.state.add_periodic_callback(poll, period=POLL_MS)
    return layout


def page_app(loading: Loading, page: ModuleType) -> pn.viewable.Viewable:
    """One browser session's view of a page, with the loading progress until the data is there; once it is, the
    navigation greys out the pages without data."""
    nav = html_pane(navigation(page))

    def draw() -> pn.viewable.Viewable:
        nav.object = navigation(page, empty_pages(loading)).markup
        return body(loading, page)

    return with_progress(loading, draw, nav)


def serve_routes(loading: BackgroundLoad, routes: dict[str, Callable[[], pn.viewable.Viewable]],
                 titles: dict[str, str], host: str, port: int, show: bool) -> None:
    """Start ``loading`` and serve ``routes`` (path → a function Panel calls once per browser session) until
    interrupted; on a loopback address only pages of this server may open its websocket."""
    loading.start()
    loopback = host in ("127.0.0.1", "localhost", "::1")
    origins = [f"{h}:{port}" for h in ("127.0.0.1", "localhost", host)] if loopback else ["*"]
    pn.serve(routes, address=host, port=port, show=show, title=titles, websocket_origin=origins, print=False,
             verbose=bool(os.environ.get("TRACEDOC_DEBUG")))


def serve(loading: Loading, host: str, port: int, show: bool) -> None:
    """Start loading and serve the pages until interrupted."""
    def session(page: ModuleType) -> Callable[[], pn.viewable.Viewable]:
        return lambda: page_app(loading, page)  # a plain function: Panel calls it once per browser session

    pages = page_modules()
    serve_routes(loading, {route(p): session(p) for p in pages}, {route(p): f"tracedoc · {p.TITLE}" for p in pages},
                 host, port, show)
