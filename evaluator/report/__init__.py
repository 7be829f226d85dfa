"""Reports: one self-contained HTML page over one or more results files. :mod:`.build`
gathers the data (summaries, worst cases, agreement with labels), :mod:`.decision` the
page's first section (the answer in sentences and figures), :mod:`.text` adds case text
for ``--show-text``, :mod:`.plots` draws the SVG plots (matplotlib, the ``report`` extra,
imported inside the functions; the decision's two in :mod:`.decision_plots`), :mod:`.notes` words the page's short notes and :mod:`.html`
renders ``templates/report.html.j2``.
:mod:`.export` writes a results file as a flat Parquet table (pyarrow, the ``parquet``
extra, imported inside the functions; its columns in :mod:`.export_columns`), and
:mod:`.targets` says where either may be written.

May import :mod:`evaluator.common`, :mod:`evaluator.rubrics`, :mod:`evaluator.data`,
:mod:`evaluator.analysis`, for the manifests beside the results :mod:`evaluator.run`, and
for a study's block (first on its page) :mod:`evaluator.study`.
"""
