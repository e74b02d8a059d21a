"""The attribution's causes are one table (tracedoc/causes.py): the SQL that produces them names the same causes,
each with a label and a colour of its own, so no cause falls back to its raw id or the grey of unknown ones."""

from __future__ import annotations

import re

from tracedoc.causes import CAUSES, OTHER_COLOR
from tracedoc.store.modules import module_file


def test_the_sql_produces_exactly_the_causes_of_the_table() -> None:
    sql = module_file("attribution.time").read_text()
    listed = set(re.findall(r"^--   ([a-z_]+)\s{2,}", sql, re.MULTILINE))  # the header's list of causes
    assert listed == {c.id for c in CAUSES}
    assert all(f"'{c.id}'" in sql for c in CAUSES)


def test_each_cause_has_its_own_label_and_colour() -> None:
    assert len({c.label for c in CAUSES}) == len({c.color for c in CAUSES}) == len(CAUSES)
    assert OTHER_COLOR not in {c.color for c in CAUSES}
