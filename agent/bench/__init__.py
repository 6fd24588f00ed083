"""Every benchmark Brisk has and what only benchmarks use; nothing in the product imports it.

``python -m agent bench`` runs ``ab.py`` (Brisk vs stock over real WebRTC), which then runs the
barge-in call (``barge_in.py``), the per-processor overhead (``overhead.py``) and the phone
front end (``phone.py``). ``ab_corpus.py`` reads the business's graded A/B turns,
``corpus.py`` renders spoken turns, ``listening.py`` hears the answers at the caller,
``meters.py`` counts each call's LLM tokens and CPU seconds, ``report.py`` summarises and prints
the A/B results (``graded.py`` grades them and splits them by path; ``plot.py`` draws them),
``stats.py`` holds the statistics every bench shares, ``scripted_llm.py`` is the loopback
OpenAI-compatible server and ``reference_llm.py`` the capable cloud LLM it plays.
Imports go one way: ``ab.py`` uses the others, and none of them imports ``ab.py``.
"""
