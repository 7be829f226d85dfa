"""The local labelling page (``evaluator label SHEET_DIR``): clinicians label a sheet's cases
one at a time in a browser, blind to the judge by default, and every save is appended to
the sheet's journal (:mod:`evaluator.data.sheet`).

:mod:`~evaluator.label.session` holds what the page shows and saves (no web framework);
:mod:`~evaluator.label.app` is the Starlette application (tokens, Host/Origin checks,
security headers, the pages); :mod:`~evaluator.label.serve` starts uvicorn. Starlette and
uvicorn come with the ``label`` extra and are imported only by ``app`` and ``serve``.

May import: common, rubrics, data, analysis and itself.
"""
