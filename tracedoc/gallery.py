"""Regenerate the report gallery: tracedoc's Markdown and JSON reports for every sample.

    python -m tracedoc.gallery            # samples/ -> reports/
    python -m tracedoc.gallery --only memory-leak memory-oom   # those samples' reports (and the index) alone

So a reader can see what tracedoc says about each sample without installing it, and a changed diagnosis shows
up as a reviewed diff (tests/test_gallery.py compares the committed reports with fresh ones).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tracedoc import strict_json
from tracedoc.api import analyze
from tracedoc.render import RENDERERS
from tracedoc.report import Report


def sample_dirs(samples: Path) -> list[Path]:
    """Sample folders: those with an expected.yaml."""
    return sorted(p.parent for p in samples.glob("*/expected.yaml"))


def gallery_report(sample: Path) -> Report:
    """The report of one sample, with paths relative to the repository so the gallery is portable (ingested afresh:
    a cached store keeps the paths of whichever run ingested the same bytes first)."""
    report = analyze([sample], use_cache=False)
    for item in report.inputs:
        item.path = str(Path(item.path).relative_to(sample.parent.parent)) if Path(item.path).is_absolute() \
            else item.path
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="?", type=Path, default=Path("samples"))
    parser.add_argument("reports", nargs="?", type=Path, default=Path("reports"))
    parser.add_argument("--diffs-only", action="store_true", help="write only the diffs of the fix pairs")
    parser.add_argument("--only", nargs="+", metavar="SAMPLE", help="write only these samples' reports (the "
                        "others' rows of the index are read from their committed reports; no diffs)")
    args = parser.parse_args()
    from tracedoc.diff.gallery import write_diff_gallery

    if not args.only:
        for line in write_diff_gallery(args.samples, args.reports / "diffs"):
            print(line)
    if args.diffs_only:
        return
    unknown = set(args.only or ()) - {p.name for p in sample_dirs(args.samples)}
    if unknown:
        parser.error(f"no such sample: {', '.join(sorted(unknown))}")
    args.reports.mkdir(parents=True, exist_ok=True)
    index = ["# tracedoc report gallery", "", "What tracedoc concludes about each bundled sample "
             "(regenerate with `python -m tracedoc.gallery`).", "", "| sample | findings | report |", "|---|---|---|"]
    for sample in sample_dirs(args.samples):
        committed = args.reports / f"{sample.name}.json"
        if args.only and sample.name not in args.only and committed.exists():
            fired = {f["rule"] for f in strict_json.loads(committed.read_text()).get("findings") or []}
        else:
            report = gallery_report(sample)
            (args.reports / f"{sample.name}.md").write_text(RENDERERS["md"]().render(report))
            data = report.to_dict()
            data.pop("tracedoc")  # the version would make every release a diff
            committed.write_text(strict_json.dumps(data, indent=1, sort_keys=True) + "\n")
            fired = {f.rule for f in report.findings}
            print(f"{sample.name}: {len(report.findings)} finding(s)")
        rules = ", ".join(sorted(f"`{rule}`" for rule in fired)) or "none"
        index.append(f"| {sample.name} | {rules} | [md]({sample.name}.md) · [json]({sample.name}.json) |")
    index += ["", "Each problem sample against its fixed twin: [diffs/](diffs/README.md) (`tracedoc diff`)."]
    (args.reports / "README.md").write_text("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
