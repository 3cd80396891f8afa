"""Computing on traces, one room per question: ``common`` (the parts every question shares),
``run`` (what one run is), ``graphs`` (how two recorded graphs correspond), ``compare``
(how two runs differ), ``findings`` (why a run is slow) and ``hosts`` (many hosts at once).
Each room's ``__init__`` says what it answers and what it may import
(tests/test_analysis_imports.py holds the table)."""
