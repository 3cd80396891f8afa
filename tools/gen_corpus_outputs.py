"""Record what ``summary``, ``advise``, ``doctor`` and ``compare`` print as JSON for the
corpus' files: ``tests/data/corpus_outputs/`` (tests/helpers/corpus_outputs.py says why).

    .venv/bin/python tools/gen_corpus_outputs.py          # corpus: ../shared/corpus or TRACEBRIDGE_CORPUS
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    sys.path.insert(0, str(REPO))
    from tests.conftest import run_cli
    from tests.helpers.corpus_outputs import RECORDED, outputs
    corpus = Path(os.environ.get("TRACEBRIDGE_CORPUS", REPO.parent / "shared" / "corpus"))
    if not corpus.is_dir():
        print(f"no corpus at {corpus}: set TRACEBRIDGE_CORPUS", file=sys.stderr)
        return 2
    if RECORDED.exists():
        shutil.rmtree(RECORDED)
    RECORDED.mkdir(parents=True)
    for name, text in outputs(corpus, run_cli):
        (RECORDED / name).write_text(text)
        print(f"wrote {RECORDED.relative_to(REPO) / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
