"""The corpus' JSON outputs of ``summary``, ``advise``, ``doctor`` and ``compare`` are
those recorded in tests/data/corpus_outputs/, byte for byte: a refactor changes none of
them (tests/helpers/corpus_outputs.py). A change meant to alter them records them again
with tools/gen_corpus_outputs.py, and the recordings' diff shows what it altered."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.helpers.corpus_outputs import RECORDED, outputs


@pytest.mark.parametrize("threads", ["as chosen", "from the first row"])
def test_corpus_outputs_are_the_recorded_ones(corpus, monkeypatch, threads):
    """``threads``: the corpus's files are small, below the sizes from which the read's
    per-event work and a summary's step breakdown take a second thread; the second run
    makes them take it for any size, and the outputs must not change."""
    if threads != "as chosen":
        from tracebridge import _fork
        from tracebridge.analysis.run import summary
        monkeypatch.setattr(_fork, "HALVES_MIN_ROWS", 0)
        monkeypatch.setattr(summary, "THREADED_MIN_ROWS", 0)
    made = dict(outputs(corpus, run_cli))
    assert sorted(made) == sorted(p.name for p in RECORDED.glob("*.json")), "record them: tools/gen_corpus_outputs.py"
    changed = [name for name, text in made.items() if (RECORDED / name).read_text() != text]
    assert not changed, f"{len(changed)} outputs changed ({', '.join(changed[:5])}); if meant, run " \
                        "tools/gen_corpus_outputs.py and review the diff of tests/data/corpus_outputs/"
