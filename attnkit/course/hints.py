"""An edition without hints: the notebooks' collapsible hints removed, and every checker told to
say only whether an answer passed (not which mistake it found, which often gives the fix away)."""

from __future__ import annotations

import re

HINT_BLOCK = re.compile(r"\n*<details>\s*<summary>\s*Hint\s*</summary>.*?</details>\n*", re.S)
CHECKER_CALL = re.compile(r"(\b(?:check_\w+|yours_if_it_passed)\()([^()]*)\)")


def without_hints(nb):
    """`nb` (changed in place) with no hint blocks and every check cell's checker call given hints=False."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = HINT_BLOCK.sub("\n\n", cell.source).strip("\n")
        elif "check" in cell.get("metadata", {}).get("tags", []):
            cell.source = CHECKER_CALL.sub(lambda m: f"{m.group(1)}{m.group(2)}, hints=False)", cell.source)
    nb.metadata.setdefault("attnkit", {})["hints"] = False
    return nb
