"""Rubrics: the rubric file format, its Jinja2 rendering into chat messages, the output
schema and token budget built from it, and the aggregates computed from a verdict.

A rubric is data (a YAML file in ``prompts/`` or a user's folder); everything here is a pure
function of that file and of one case's fields. The bottom layer: it imports only
:mod:`evaluator.common` and nothing else of the evaluator.
"""
