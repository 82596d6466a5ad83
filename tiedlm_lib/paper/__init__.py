"""The executable paper: executing and rendering the sections (``build``; ``python -m tiedlm_lib.paper``), what a
section publishes (``report``), the claims ledger and its verdicts (``claims``, ``verdicts``), the findings,
glossary, scale card and testability table, the reported numbers (``reported``), ``make verify`` (``verify``) and
JupyterLab's settings (``lab``)."""
