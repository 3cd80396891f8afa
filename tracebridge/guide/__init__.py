"""The migration guide, shipped inside the package: ``tracebridge guide KIND`` prints the
section a finding links to (``migration_guide/README.md#KIND`` in the source tree).

``migration_guide.md`` here is the repository's ``migration_guide/README.md`` (a link in the
source tree; a wheel holds the file itself), so an installed tracebridge has the guide too.
"""

from __future__ import annotations

import re
from importlib import resources

from ..errors import TracebridgeError

GUIDE_FILE = "migration_guide.md"


class GuideError(TracebridgeError):
    pass


def guide_text() -> str:
    return resources.files(__name__).joinpath(GUIDE_FILE).read_text(encoding="utf-8")


def sections(text: str | None = None) -> dict[str, str]:
    """Each ``### name`` section of the guide (the anchors findings link to), by name."""
    text = guide_text() if text is None else text
    found = {}
    parts = re.split(r"(?m)^(#{2,3}) (.+)$", text)
    for level, name, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        if level == "###":
            found[name.strip()] = f"### {name.strip()}\n\n{body.strip()}\n"
    return found


def section(kind: str) -> str:
    """The guide's section on ``kind`` (a finding's kind), or a one-line error naming them."""
    known = sections()
    if kind not in known:
        raise GuideError(f"no guide section {kind!r} (sections: {', '.join(known)})")
    return known[kind]
