"""Runs: :func:`evaluator.run.runner.evaluate` wires cases, a rubric and a judge together,
asked with three objects (:mod:`.task`: ``Task``, ``Judge``, ``RunOptions``). The validation
and resume plan before judging (:mod:`.resume`), the manifest that says what
produced a results file (:mod:`.manifest`), one public judging step (:mod:`.judging`) shared
by the two engines that stand side by side over it (:mod:`.local_engine` in this process,
:mod:`.ray_engine` on a Ray cluster), juries of several judges (:mod:`.jury`), and the
``validate`` check of every rubric and models.yaml. :mod:`.engines` names the engines and
holds the Ray options without importing Ray.

May import every layer below it: :mod:`evaluator.common`, :mod:`evaluator.rubrics`,
:mod:`evaluator.judges`, :mod:`evaluator.data` and :mod:`evaluator.analysis`. Ray is
imported only by :mod:`.ray_engine`, which is loaded only when ``engine="ray"`` is chosen.
"""
