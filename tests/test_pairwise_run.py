"""Pairwise judging (issue 26), the run side: pairwise rubrics as data, pairs from one file or
two files joined on case id, both orders judged in one batch, the reconciled record, the
choices' exact probabilities, resume, and the one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.analysis.pairwise.pairwise import reconcile
from evaluator.cli.main import cli
from evaluator.data.cases import InputFileError, InputProblem
from evaluator.data.pairs import iter_pairs
from evaluator.data.results import iter_records
from evaluator.judges.backends import Generation
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.backends.value_walk import classify
from evaluator.judges.models_file import JudgeConfigError, JudgeSpec
from evaluator.rubrics.load import load_rubric, load_rubric_file
from evaluator.rubrics.rubric import RubricError
from evaluator.rubrics.schema import output_json_schema
from evaluator.run.pairing import to_candidate
from evaluator.run.runner import evaluate
from tests.conftest import BUILTIN, ROOT, run_options, write_jsonl

PAIRWISE = "trial_eligibility_pairwise"
CHOICES = ("hallucination", "accuracy", "clarity")
SHARED = {"patient_profile": "A 58-year-old woman with chest pain.", "trial_id": "NCT001",
          "trial_title": "A trial", "eligibility_criteria": "Adults with angina.",
          "ground_truth_label": "Likely Eligible"}


def _verdict(choice: str) -> str:
    body = {}
    for key in CHOICES:
        body[key] = choice
        body[f"{key}_reasoning"] = "because"
    return json.dumps(body, separators=(",", ":"))


class ScriptedJudge(FakeBackend):
    """Chooses by looking at the two answers in each prompt: ``rule(first, second)``
    returns ``"A"`` (the answer shown first), ``"B"`` or ``"tie"``."""

    def __init__(self, rule):
        super().__init__(record_calls=True)
        self.rule = rule

    def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
        self.calls.append((list(chats), json_schema, sampling, {}))
        out = []
        for chat in chats:
            text = chat[-1]["content"]
            first = text.split("ANSWER A:", 1)[1].split("ANSWER B:", 1)[0]
            second = text.split("ANSWER B:", 1)[1].split("Compare the two", 1)[0]
            verdict = _verdict(self.rule(first.strip(), second.strip()))
            out.append(Generation(text=verdict, finish_reason="stop", prompt_tokens=10,
                                  completion_tokens=len(verdict)))
        return out


def _pairs_file(tmp_path: Path, answers: list[tuple[str, str]]) -> Path:
    rows = [dict(SHARED, case_id=f"c{i}", gpt=a, llama=b) for i, (a, b) in enumerate(answers)]
    return write_jsonl(tmp_path / "pairs.jsonl", rows)


def _run(tmp_path: Path, backend, input_path: Path, **task):
    options = dict(rubric=PAIRWISE, input_path=input_path, output_path=tmp_path / "out.jsonl",
                   judge_spec=JudgeSpec(backend="fake"), backend=backend)
    if "versus" not in task:
        options["mapping"] = {"answer_a": "gpt", "answer_b": "llama"}
    options.update(task)
    return evaluate(*run_options(**options))


def _records(tmp_path: Path):
    return list(iter_records(tmp_path / "out.jsonl"))


# --- the rubric format ----------------------------------------------------------------------

def test_the_builtin_pairwise_rubric_keeps_the_originals_keys_as_choices():
    rubric = load_rubric(PAIRWISE)
    absolute = load_rubric("trial_eligibility")
    assert rubric.pairwise and rubric.candidates == ("answer_a", "answer_b")
    assert [f.key for f in rubric.output] == [f.key for f in absolute.output]
    schema = output_json_schema(rubric)
    for key in CHOICES:
        assert schema["properties"][key]["enum"] == ["A", "B", "tie"]
    assert not absolute.pairwise and absolute.candidates is None


@pytest.mark.parametrize("name", BUILTIN)
def test_each_pairwise_builtin_mirrors_its_absolute_rubric(name):
    """<name>_pairwise: the absolute rubric's inputs with its generated text split into two
    required candidates; each score of the original a choice under the same key (a list of
    items: one choice, then ``<key>_reasoning``), each string kept; the same chat settings."""
    from evaluator.rubrics.rubric import ChoiceCriterion, IntegerCriterion, ItemsCriterion

    absolute, rubric = load_rubric(name), load_rubric(f"{name}_pairwise")
    assert rubric.pairwise and rubric.candidates is not None
    assert all(rubric.inputs[c].required for c in rubric.candidates)
    others = {k: v.required for k, v in rubric.inputs.items() if k not in rubric.candidates}
    generated = [k for k in absolute.inputs if k not in others]
    assert len(generated) == 1
    assert others == {k: v.required for k, v in absolute.inputs.items() if k != generated[0]}
    expected = []
    for field in absolute.output:
        if isinstance(field, (IntegerCriterion, ItemsCriterion)):
            expected.append((field.key, "choice"))
            if isinstance(field, ItemsCriterion):
                expected.append((f"{field.key}_reasoning", "string"))
        else:
            expected.append((field.key, "string"))
    assert [(f.key, f.type) for f in rubric.output] == expected
    assert all(f.ties for f in rubric.output if isinstance(f, ChoiceCriterion))
    assert rubric.chat_template_kwargs == absolute.chat_template_kwargs
    assert (rubric.system is None) == (absolute.system is None)
    assert not rubric.aggregates and not rubric.pass_thresholds


BASE = """
format_version: 1
name: {name}
title: t
inputs:
  reference: {{description: r}}
  one: {{description: a}}
  two: {{description: b}}
template: "{{{{ reference | fence }}}} {{{{ one | fence }}}} {{{{ two | fence }}}}"
"""


@pytest.mark.parametrize(("extra", "message"), [
    ("kind: pairwise\noutput: [{key: better, type: choice}]\n", "names its two candidate"),
    ("kind: pairwise\ncandidates: [one, one]\noutput: [{key: better, type: choice}]\n",
     "two different inputs"),
    ("kind: pairwise\ncandidates: [one, three]\noutput: [{key: better, type: choice}]\n",
     "not declared"),
    ("kind: pairwise\ncandidates: [one, two]\noutput: [{key: why, type: string, max_length: 9}]\n",
     "at least one output of 'type: choice'"),
    (("kind: pairwise\ncandidates: [one, two]\noutput: [{key: better, type: choice}, "
      "{key: s, type: integer, range: [1, 5]}]\n"), "choices and strings only"),
    ("output: [{key: better, type: choice}]\n", "only a rubric with 'kind: pairwise'"),
    ("candidates: [one, two]\noutput: [{key: s, type: integer, range: [1, 5]}]\n",
     "belongs to a rubric with 'kind: pairwise'"),
])
def test_a_pairwise_rubric_that_breaks_a_rule_is_refused_in_one_line(tmp_path, extra, message):
    path = tmp_path / "mine.yaml"
    path.write_text(BASE.format(name="mine") + extra, encoding="utf-8")
    with pytest.raises(RubricError, match=message) as info:
        load_rubric_file(path)
    assert "\n" not in str(info.value)


def test_a_rubric_without_ties_allows_only_a_and_b(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(BASE.format(name="mine") + "kind: pairwise\ncandidates: [one, two]\n"
                    "output: [{key: better, type: choice, ties: false}]\n", encoding="utf-8")
    schema = output_json_schema(load_rubric_file(path))
    assert schema["properties"]["better"]["enum"] == ["A", "B"]


# --- reconciliation -------------------------------------------------------------------------

def test_positions_map_back_to_candidates_and_a_flip_is_inconsistent():
    assert to_candidate("A", "A") == "A" and to_candidate("A", "B") == "B"
    assert to_candidate("B", "B") == "A" and to_candidate("tie", "B") == "tie"
    assert reconcile("A", "A") == "A" and reconcile("tie", "tie") == "tie"
    assert reconcile("A", "B") == "inconsistent" and reconcile("A", "tie") == "inconsistent"


@pytest.mark.parametrize(("rule", "outcome"), [
    (lambda first, second: "A", "inconsistent"),                 # always the first shown
    (lambda first, second: "B", "inconsistent"),                 # always the second shown
    (lambda first, second: "A" if "good" in first else "B", "A"),  # honest: the good answer
    (lambda first, second: "tie", "tie"),
])
def test_both_orders_are_judged_in_one_batch_and_reconciled(tmp_path, rule, outcome):
    backend = ScriptedJudge(rule)
    path = _pairs_file(tmp_path, [("a good answer", "a poor answer"),
                                  ("another good one", "another poor one")])
    result = _run(tmp_path, backend, path, batch_size=8)
    assert len(backend.calls) == 1 and len(backend.calls[0][0]) == 4  # 2 pairs x 2 orders
    records = _records(tmp_path)
    assert [r.status for r in records] == ["ok", "ok"]
    for record in records:
        assert record.record_version == 3
        assert record.scores == {key: outcome for key in CHOICES}
        assert record.pairwise.outcome == record.scores
        assert [o.first for o in record.pairwise.orders] == ["A", "B"]
        assert record.pairwise.systems == {"A": "gpt", "B": "llama"}
    first, second = records[0].pairwise.orders
    assert first.verdict["accuracy"] == rule("a good answer", "a poor answer")
    assert second.verdict["accuracy"] == rule("a poor answer", "a good answer")
    assert result.summary.status_counts == {"ok": 2}


def test_each_order_shows_the_other_candidate_first(tmp_path):
    backend = ScriptedJudge(lambda first, second: "A")
    _run(tmp_path, backend, _pairs_file(tmp_path, [("alpha text", "beta text")]))
    prompts = [chat[-1]["content"] for chat in backend.calls[0][0]]
    assert prompts[0].index("alpha text") < prompts[0].index("beta text")
    assert prompts[1].index("beta text") < prompts[1].index("alpha text")
    record = _records(tmp_path)[0]
    assert record.pairwise.lengths == {"A": len("alpha text"), "B": len("beta text")}
    assert record.pairwise.orders[0].choices["accuracy"] == "A"   # alpha shown first, chosen
    assert record.pairwise.orders[1].choices["accuracy"] == "B"   # beta shown first, chosen


def test_choice_probabilities_are_kept_per_order_in_candidate_terms(tmp_path):
    backend = FakeBackend()  # always writes "A" (the first shown) with probability 0.7
    _run(tmp_path, backend, _pairs_file(tmp_path, [("x1", "y1")]))
    first, second = _records(tmp_path)[0].pairwise.orders
    assert first.probabilities["accuracy"]["A"] == pytest.approx(0.7)
    assert second.probabilities["accuracy"]["B"] == pytest.approx(0.7)   # B was shown first
    assert list(second.probabilities["accuracy"]) == ["A", "B", "tie"]


def test_an_order_that_fails_fails_the_pair_and_says_which_order(tmp_path):
    backend = FakeBackend([_verdict("A"), Generation(text='{"hallu', finish_reason="length")])
    _run(tmp_path, backend, _pairs_file(tmp_path, [("x1", "y1")]))
    record = _records(tmp_path)[0]
    assert record.status == "truncated" and record.scores is None
    assert record.reason.startswith("the order swapped (B first): ")
    assert record.pairwise.orders[0].status == "ok"
    assert record.pairwise.orders[1].raw_output == '{"hallu'


def test_a_resumed_pairwise_run_judges_nothing_twice(tmp_path):
    path = _pairs_file(tmp_path, [("x1", "y1"), ("x2", "y2")])
    _run(tmp_path, FakeBackend(), path, limit=1)
    backend = FakeBackend()
    _run(tmp_path, backend, path)
    assert sum(len(call[0]) for call in backend.calls) == 2  # only the second pair, 2 orders
    assert [r.case_id for r in _records(tmp_path)] == ["c0", "c1"]


# --- two files joined on case id ------------------------------------------------------------

def _two_files(tmp_path: Path, a_rows: list[dict], b_rows: list[dict]) -> tuple[Path, Path]:
    return (write_jsonl(tmp_path / "gpt4o.jsonl", a_rows),
            write_jsonl(tmp_path / "llama.jsonl", b_rows))


def test_two_files_are_joined_on_case_id_and_nothing_is_dropped(tmp_path):
    a_rows = [dict(SHARED, case_id=f"c{i}", answer=f"gpt {i}") for i in range(4)]
    b_rows = [dict(SHARED, case_id="c2", answer="llama 2"),
              dict(SHARED, case_id="c0", answer="llama 0"),
              dict(SHARED, case_id="c1", answer="llama 1", patient_profile="someone else"),
              dict(SHARED, case_id="c9", answer="llama 9")]
    a, b = _two_files(tmp_path, a_rows, b_rows)
    _run(tmp_path, FakeBackend(), a, versus=b, answer_column="answer")
    records = {r.case_id: r for r in _records(tmp_path)}
    assert set(records) == {"c0", "c1", "c2", "c3", "c9"}
    assert records["c0"].status == records["c2"].status == "ok"
    assert records["c0"].pairwise.systems == {"A": "gpt4o", "B": "llama"}
    assert records["c0"].pairwise.lengths == {"A": len("gpt 0"), "B": len("llama 0")}
    differs = records["c1"]
    assert differs.status == "input_error" and "'patient_profile'" in differs.reason
    assert "differs between gpt4o.jsonl and llama.jsonl" in differs.reason
    assert "someone else" not in differs.reason
    assert records["c3"].status == "input_error" and "no case with this id in llama.jsonl" \
        in records["c3"].reason
    assert records["c9"].status == "input_error" and "no case with this id in gpt4o.jsonl" \
        in records["c9"].reason and records["c9"].input_file.endswith("llama.jsonl")


def test_a_bad_row_in_the_second_file_is_an_input_error_of_its_case(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="  ")])
    items = list(iter_pairs(a, b, load_rubric(PAIRWISE), answer_column="answer"))
    assert len(items) == 1 and isinstance(items[0], InputProblem)
    assert "llama.jsonl (line 1)" in items[0].message and items[0].field == "answer"


def test_the_second_file_with_a_repeated_id_is_refused(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="x"), dict(SHARED, case_id="c0",
                                                                     answer="y")])
    with pytest.raises(InputFileError, match="llama.jsonl: duplicate case ids"):
        list(iter_pairs(a, b, load_rubric(PAIRWISE), answer_column="answer"))


@pytest.mark.parametrize(("task", "message"), [
    (dict(versus="SELF", answer_column="answer"), "is the --input file itself"),
    (dict(versus="B", answer_column="answer", mapping={"answer_a": "x"}),
     "names the candidates"),
    (dict(versus="B"), "go together"),
    (dict(samples=2, temperature=0.5), "self-consistency samples are for absolute"),
    (dict(systems=("same", "same")), "both candidates would be called"),
])
def test_pairwise_options_that_cannot_work_are_refused_before_judging(tmp_path, task, message):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="llama")])
    if "versus" in task:
        task["versus"] = a if task["versus"] == "SELF" else b
    backend = FakeBackend()
    with pytest.raises((InputFileError, JudgeConfigError), match=message):
        _run(tmp_path, backend, a, **task)
    assert not backend.calls and not (tmp_path / "out.jsonl").exists()


def test_pairwise_options_on_an_absolute_rubric_are_refused(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="llama")])
    with pytest.raises(JudgeConfigError, match="only for a pairwise rubric"):
        _run(tmp_path, FakeBackend(), a, rubric="trial_eligibility", versus=b,
             answer_column="answer")


def test_the_cli_runs_two_files_and_refuses_bad_options_in_one_line(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="llama")])
    models = tmp_path / "models.yaml"
    models.write_text("default: fake\njudges:\n  fake: {backend: fake}\n", encoding="utf-8")
    common = ["run", "-r", PAIRWISE, "-i", str(a), "--models-file", str(models),
              "--no-progress", "-o", str(tmp_path / "out.jsonl")]
    ok = CliRunner().invoke(cli, [*common, "--versus", str(b), "--answer-column", "answer",
                                  "--systems", "new,old"])
    assert ok.exit_code == 0, ok.output
    assert _records(tmp_path)[0].pairwise.systems == {"A": "new", "B": "old"}
    for extra, message in ((["--systems", "one"], "--systems: give two names"),
                           (["--versus", str(b)], "go together")):
        bad = CliRunner().invoke(cli, [*common[:-1], str(tmp_path / "o2.jsonl"), *extra])
        assert bad.exit_code == 2
        assert bad.output.strip().count("\n") == 0 and message in bad.output


def test_a_jury_does_not_run_a_pairwise_rubric(tmp_path):
    from evaluator.judges.models_file import JurySpec
    from evaluator.run.jury import evaluate_jury

    path = _pairs_file(tmp_path, [("x", "y")])
    task, judge, how = run_options(rubric=PAIRWISE, input_path=path,
                                   output_path=tmp_path / "out.jsonl")
    with pytest.raises(JudgeConfigError, match="judged by one judge"):
        evaluate_jury(task, "panel", JurySpec(judges=["a", "b"]), judge, how)


# --- the choices' exact probabilities -------------------------------------------------------

@pytest.mark.parametrize(("written", "before", "expected"), [
    (b'"', b"", "expand"),
    (b'"A', b"", "A"),        # only "A" starts with "A: the grammar must close it
    (b'"t', b"", "tie"),
    (b'"A"', b"", "A"),
    (b'"B",', b"", "B"),
    (b'"x', b"", "invalid"),
    (b':"B', b":", "B"),
    (b'x', b":", "inconsistent"),
])
def test_classify_reads_a_choice_as_a_json_string(written, before, expected):
    assert classify(written, before, ("A", "B", "tie")) == expected


def test_choice_probabilities_on_the_real_model_match_a_brute_force_enumeration(tiny_backend):
    """The tiny model's P(A), P(B), P(tie) at each choice of a pairwise verdict, from the
    walk (through the run), against the definition: every allowed token path expanded
    until the JSON string closes, one unpadded forward pass per node."""
    import numpy as np
    import torch
    from llguidance import LLMatcher

    from evaluator.judges.backends import Sampling
    from evaluator.rubrics.render import render_messages
    from evaluator.rubrics.schema import max_new_tokens

    rubric = load_rubric(PAIRWISE)
    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    fields = dict(SHARED, ground_truth_explanation="", answer_a="Eligible.", answer_b="No.")
    gen = tiny_backend.generate([render_messages(rubric, fields)], schema_text,
                                Sampling(max_new_tokens=max_new_tokens(schema)), {})[0]
    from evaluator.judges.backends import ScoreAnchor
    from evaluator.rubrics.score_paths import choice_slots, value_offsets

    scores = json.loads(gen.text)
    offsets = value_offsets(rubric, scores, gen.text)
    anchors = [ScoreAnchor(s.path, offsets[s.path], s.allowed)
               for s in choice_slots(rubric, scores)]
    got = tiny_backend.score_distributions(schema_text, [gen], [anchors])[0]
    processor = tiny_backend._processor(schema_text)
    llg = processor.tokenizer
    starts = np.cumsum([0] + [len(llg.decode_bytes([t])) for t in gen.token_ids])
    for anchor, dist in zip(anchors, got):
        k = int(np.searchsorted(starts, anchor.offset, side="right")) - 1
        before = gen.text.encode()[int(starts[k]):anchor.offset]
        matcher = LLMatcher(llg, processor.grammar, log_level=0)
        assert matcher.consume_tokens(list(gen.token_ids[:k]))
        expected: dict[str, float] = {}

        def walk(ids, matcher, written, mass, before=before, expected=expected):
            with torch.inference_mode():
                logits = tiny_backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
            lp = torch.log_softmax(logits.float(), -1).numpy().astype(np.float64)
            bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8),
                                 bitorder="little")[:llg.vocab_size]
            allowed = np.flatnonzero(bits)
            p = np.exp(lp[allowed] - lp[allowed].max())
            p /= p.sum()
            for token, pt in zip(allowed.tolist(), p):
                text = written + llg.decode_bytes([token])
                tail = text[len(before):] if text.startswith(before) else None
                done = [v for v in ("A", "B", "tie")
                        if tail is not None and tail.startswith(f'"{v}"'.encode())]
                if done:
                    expected[done[0]] = expected.get(done[0], 0.0) + mass * pt
                elif mass * pt > 1e-12:
                    child = matcher.deep_copy()
                    assert child.consume_token(token)
                    walk(ids + [token], child, text, mass * pt)

        walk(list(gen.prompt_ids) + list(gen.token_ids[:k]), matcher, b"", 1.0)
        assert dist is not None and dist.coverage == pytest.approx(1.0)
        assert set(dist.probabilities) == set(expected) == {"A", "B", "tie"}
        for value, p in expected.items():
            assert dist.probabilities[value] == pytest.approx(p, abs=2e-5), value


def test_the_real_model_judges_a_pair_in_both_orders_through_the_run(tmp_path, tiny_backend):
    path = _pairs_file(tmp_path, [("Likely Eligible: meets all criteria.", "Not Eligible.")])
    _run(tmp_path, tiny_backend, path, judge_spec=JudgeSpec(backend="tiny-random"))
    record = _records(tmp_path)[0]
    assert record.status == "ok", record.reason
    for order in record.pairwise.orders:
        for key in CHOICES:
            probs = order.probabilities[key]
            assert sum(probs.values()) == pytest.approx(1.0)
            assert max(probs, key=probs.get) == order.choices[key]  # greedy: the argmax


def test_the_absolute_builtins_are_unchanged():
    """The pairwise rubric is a new file; the four originals' files are untouched, but for
    the level texts (``levels``) the labelling page shows, added later: copied from each
    file's own prompt (tests/test_rubric.py checks the words), they change nothing else."""
    import subprocess

    import yaml

    base = "1b1d0ab~1"
    changed = subprocess.run(["git", "diff", "--name-only", base, "--", "prompts/"],
                             cwd=ROOT, capture_output=True, text=True, check=False)
    if changed.returncode != 0:
        pytest.skip("not a git checkout with this history")

    def without_levels(text: str) -> dict:
        data = yaml.safe_load(text)
        for field in data.get("output", []):
            field.pop("levels", None)
        return data

    for name in changed.stdout.split():
        if name.endswith("_pairwise.yaml"):
            continue
        before = subprocess.run(["git", "show", f"{base}:{name}"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
        assert without_levels((ROOT / name).read_text()) == without_levels(before), name


def test_choice_probabilities_are_read_from_the_logits_kept_while_generating(tiny_backend):
    """The transformers path keeps the logits where a choice is written, so a pairwise
    verdict's probabilities need no forward pass, and equal the ones recomputed."""
    from dataclasses import replace

    from evaluator.judges.backends import Sampling, ScoreAnchor
    from evaluator.rubrics.render import render_messages
    from evaluator.rubrics.schema import max_new_tokens
    from evaluator.rubrics.score_paths import choice_slots, value_offsets

    rubric = load_rubric(PAIRWISE)
    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    fields = dict(SHARED, ground_truth_explanation="", answer_a="Eligible.", answer_b="No.")
    gens = tiny_backend.generate([render_messages(rubric, fields)] * 2, schema_text,
                                 Sampling(max_new_tokens=max_new_tokens(schema),
                                          temperature=1.0, seed=4), {})
    anchors = []
    for gen in gens:
        verdict = json.loads(gen.text)
        offsets = value_offsets(rubric, verdict, gen.text)
        anchors.append([ScoreAnchor(s.path, offsets[s.path], s.allowed)
                        for s in choice_slots(rubric, verdict)])
    assert all(len(g.step_logits) >= 3 for g in gens)
    asked = []
    original = tiny_backend._next_token_dists

    def spy(contexts, bases, allowed):
        asked.extend(contexts)
        return original(contexts, bases, allowed)

    tiny_backend._next_token_dists = spy
    try:
        kept = tiny_backend.score_distributions(schema_text, gens, anchors)
    finally:
        del tiny_backend._next_token_dists
    recomputed = tiny_backend.score_distributions(
        schema_text, [replace(g, step_logits=None) for g in gens], anchors)
    assert asked == []  # every choice read from the kept logits
    for row, again in zip(kept, recomputed):
        for dist, other in zip(row, again):
            assert dist.probabilities == pytest.approx(other.probabilities, abs=2e-5)


@pytest.mark.parametrize("command", [
    ["agree", "{out}", "--labels", "{labels}", "--label-field", "accuracy"],
    ["estimate", "{out}", "--labels", "{labels}", "--label-field", "accuracy"],
    ["review", "{out}", "--out", "{dir}/review"],
    ["report", "{out}", "--html", "{dir}/report.html"],
])
def test_commands_that_read_scores_refuse_a_pairwise_file_in_one_line(tmp_path, command):
    _run(tmp_path, FakeBackend(), _pairs_file(tmp_path, [("x", "y")]))
    labels = tmp_path / "labels.csv"
    labels.write_text("case_id,accuracy\nc0,3\n", encoding="utf-8")
    args = [a.format(out=tmp_path / "out.jsonl", labels=labels, dir=tmp_path) for a in command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().count("\n") == 0
    assert "holds pairwise verdicts" in result.output and "evaluator compare" in result.output


def test_the_run_summary_of_a_pairwise_rubric_shows_win_rates_and_the_swap_guard(tmp_path):
    """The summary written at the end of a run (and `evaluator summary`): per criterion the
    outcomes, A's win rate, the position consistency and bias; text within 80 columns."""
    from evaluator.analysis.summary.text import format_summary

    answers = [(f"a good answer {i}", f"a poor answer {i}") for i in range(6)]
    honest = _run(tmp_path, ScriptedJudge(lambda first, second: "A" if "good" in first
                                          else "B"), _pairs_file(tmp_path, answers))
    block = honest.summary.pairwise
    assert block.systems == {"A": "gpt", "B": "llama"}
    accuracy = block.criteria["accuracy"]
    assert (accuracy.n, accuracy.a_wins, accuracy.inconsistent) == (6, 6, 0)
    assert accuracy.win_rate["value"] == 1.0
    assert accuracy.position_consistency["value"] == 1.0
    assert accuracy.position_bias["value"] == 0.5
    first = _run(tmp_path, FakeBackend(), _pairs_file(tmp_path, answers), force_new=True)
    accuracy = first.summary.pairwise.criteria["accuracy"]
    assert accuracy.inconsistent == 6 and accuracy.win_rate["value"] == 0.5
    assert accuracy.position_consistency["value"] == 0.0
    assert accuracy.position_bias["value"] == 1.0
    text = format_summary(first.summary)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "accuracy" in text and "gpt" in text
    on_disk = json.loads((tmp_path / "out.summary.json").read_text())
    assert on_disk["pairwise"]["criteria"]["accuracy"]["inconsistent"] == 6


def _mostly_longer(first: str, second: str) -> str:
    """The longer answer 80% of the time, the same choice in both orders (the draw is
    keyed on the pair, not on the order)."""
    import zlib

    draw = zlib.crc32("".join(sorted((first, second))).encode()) % 100
    longer = "A" if len(first) > len(second) else "B"
    return longer if draw < 80 else ("B" if longer == "A" else "A")


@pytest.mark.parametrize(("rule", "biased"), [
    (_mostly_longer, True),
    (lambda first, second: "A" if "good" in first else "B", False),  # the good one
])
def test_a_judge_that_prefers_the_longer_answer_shows_a_length_bias(tmp_path, rule, biased):
    """End to end: pairs of random lengths, judged in both orders by a scripted judge, then
    `compare`: the longer-preferring judge's length slope CI is above 0 and the longer
    answer's win rate CI above 0.5; the honest one's (quality independent of length)
    cover 0 and 0.5."""
    import random

    from evaluator.analysis.pairwise.compare import compare

    rng = random.Random(7)
    answers = []
    for i in range(80):
        good, poor = "good " + "x" * rng.randint(5, 400), "poor " + "y" * rng.randint(5, 400)
        answers.append((good, poor) if i % 2 else (poor, good))
    _run(tmp_path, ScriptedJudge(rule), _pairs_file(tmp_path, answers))
    report = compare([tmp_path / "out.jsonl"], criteria=["accuracy"], resamples=500)
    length = report.comparisons[0]["length_bias"]
    assert report.comparisons[0]["position_consistency"]["value"] == 1.0
    low, high = length["slope"]["ci95"]
    longer_low, longer_high = length["longer_wins"]["ci95"]
    if biased:
        assert low > 0 and longer_low > 0.5
    else:
        assert low < 0 < high and longer_low < 0.5 < longer_high


def test_a_judge_that_always_prefers_the_longer_answer_is_not_hidden_by_separation(tmp_path):
    """Always the longer answer: the length model has no finite estimate (a note says so),
    and the longer answer's win rate, 1, shows the bias."""
    from evaluator.analysis.pairwise.compare import compare

    answers = [("a" * (10 + 7 * i), "b" * (300 - 5 * i)) for i in range(30)]
    _run(tmp_path, ScriptedJudge(lambda first, second: "A" if len(first) > len(second)
                                 else "B"), _pairs_file(tmp_path, answers))
    length = compare([tmp_path / "out.jsonl"], criteria=["accuracy"],
                     resamples=200).comparisons[0]["length_bias"]
    assert length["slope"]["value"] is None and "separable" in length["note"]
    assert length["longer_wins"]["value"] == 1.0 and length["longer_wins"]["ci95"][0] > 0.85


def test_the_dev_set_pairs_both_generators_and_analyses_a_run(tmp_path, capsys):
    """benchmarks/pairwise_devset.py: the 53 pairs both generators answered, the truth from
    generator_correct, and the figures of a (fake-judge) pairwise run of them."""
    import importlib.util

    from tests.conftest import SHARED_DATA

    if not SHARED_DATA.is_file():
        pytest.skip("the shared dev data is not here (../shared/data)")
    spec = importlib.util.spec_from_file_location("pairwise_devset",
                                                  ROOT / "benchmarks" / "pairwise_devset.py")
    devset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(devset)
    counts = devset.build(tmp_path)
    assert counts["pairs"] == 53
    assert counts["truth_A"] + counts["truth_B"] + counts["truth_tie"] == 53
    truth = (tmp_path / "truth.csv").read_text().splitlines()
    assert truth[0] == "case_id,preferred" and len(truth) == 54
    _run(tmp_path, FakeBackend(), tmp_path / "cases_gpt4o.jsonl",
         versus=tmp_path / "cases_llama.jsonl", answer_column="workflow_answer", limit=12)
    figures = devset.analyse(tmp_path, [tmp_path / "out.jsonl"])
    accuracy = figures["files"]["out.jsonl"]["accuracy"]
    assert accuracy["consistency"] == 0.0 and accuracy["position_bias"] == 1.0
    assert accuracy["outcomes"]["inconsistent"] == 12
    printed = capsys.readouterr().out
    first = json.loads((tmp_path / "cases_gpt4o.jsonl").read_text().splitlines()[0])
    for field in ("patient_profile", "workflow_answer", "case_id"):
        assert first[field][:40] not in printed  # counts and rates only


# --- the hostile review's findings (session 10) ---------------------------------------------

def test_versus_refuses_files_without_case_ids_instead_of_pairing_by_line(tmp_path):
    """Rows without an id get `line-N`: two such files would be joined line by line, the
    answers of different cases judged against each other."""
    a, b = _two_files(tmp_path, [dict(SHARED, answer="gpt 1"), dict(SHARED, answer="gpt 2")],
                      [dict(answer="llama 2"), dict(answer="llama 1")])
    with pytest.raises(InputFileError, match="no case id in column 'case_id'.*--id-column"):
        list(iter_pairs(a, b, load_rubric(PAIRWISE), answer_column="answer"))
    a, b = _two_files(tmp_path, [dict(SHARED, answer="gpt 1")],
                      [dict(case_id="c1", answer="llama 1")])
    with pytest.raises(InputFileError, match=r"gpt4o.jsonl line 1: no case id"):
        list(iter_pairs(a, b, load_rubric(PAIRWISE), answer_column="answer"))


def test_a_missing_answer_column_points_to_answer_column_not_map(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt"),
                                 dict(SHARED, case_id="c1", answer="gpt")],
                      [dict(SHARED, case_id="c0", reply="llama"),
                       dict(SHARED, case_id="c1", answer="llama")])
    items = list(iter_pairs(a, b, load_rubric(PAIRWISE), answer_column="answer"))
    problem = next(i for i in items if isinstance(i, InputProblem))
    assert "--answer-column" in problem.message and "--map" not in problem.message


def test_one_file_under_two_names_is_refused_everywhere(tmp_path):
    import os

    from evaluator.analysis.pairwise.compare import CompareError, compare

    a, _ = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")], [])
    linked = tmp_path / "linked.jsonl"
    os.link(a, linked)
    with pytest.raises(JudgeConfigError, match="is the --input file itself"):
        _run(tmp_path, FakeBackend(), a, versus=linked, answer_column="answer",
             systems=("x", "y"))
    path = _pairs_file(tmp_path, [("x", "y")])
    _run(tmp_path, FakeBackend(), path)
    os.link(tmp_path / "out.jsonl", tmp_path / "again.jsonl")
    with pytest.raises(CompareError, match="the same results file is given twice"):
        compare([tmp_path / "out.jsonl", tmp_path / "again.jsonl"])


def test_names_that_do_not_fit_say_where_they_came_from(tmp_path):
    a, b = _two_files(tmp_path, [dict(SHARED, case_id="c0", answer="gpt")],
                      [dict(SHARED, case_id="c0", answer="llama")])
    long_a = tmp_path / ("g" * 101 + ".jsonl")
    a.rename(long_a)
    with pytest.raises(JudgeConfigError, match="come from the file .* with --systems"):
        _run(tmp_path, FakeBackend(), long_a, versus=b, answer_column="answer")


def test_a_system_name_with_a_line_break_is_not_a_valid_record(tmp_path):
    from pydantic import ValidationError

    from evaluator.data.results import PairwiseResult

    with pytest.raises(ValidationError, match="printable"):
        PairwiseResult(systems={"A": "x\nforged line", "B": "y"}, lengths={"A": 1, "B": 1},
                       orders=[{"first": "A", "status": "ok"}, {"first": "B", "status": "ok"}])


def test_long_names_and_keys_stay_whole_and_within_80_columns(tmp_path):
    from evaluator.analysis.pairwise.compare import compare
    from evaluator.analysis.pairwise.text import format_comparison
    from evaluator.analysis.summary.text import format_summary
    from tests.pairwise_world import pair_record, write_records

    stem = "a-system-name-long-enough-to-need-a-line-of-its-own-"
    names = [stem + "one", stem + "two", stem + "three"]
    files = []
    for i, (x, y) in enumerate([(0, 1), (1, 2), (0, 2)]):
        records = [pair_record(f"c{k}", "A" if k % 3 else "B", "A" if k % 3 else "B",
                               systems=(names[x], names[y])) for k in range(12)]
        files.append(write_records(tmp_path / f"p{i}.jsonl", records))
    report = compare(files, resamples=100)
    text = format_comparison(report)
    assert max(map(len, text.splitlines())) <= 80
    for name in names:
        assert name in text  # whole, never cut to a common prefix
    result = _run(tmp_path, FakeBackend(), _pairs_file(tmp_path, [("x", "y")]),
                  systems=("s" * 100, "t" * 100))
    assert max(map(len, format_summary(result.summary).splitlines())) <= 80


def test_equal_strengths_share_a_rank_and_all_ties_get_a_wilson_interval(tmp_path):
    from evaluator.analysis.pairwise.bradley_terry import Battles, bradley_terry
    from evaluator.analysis.pairwise.pairwise import win_rate

    battles = [Battles("x", "y", ["tie"] * 10), Battles("y", "z", ["tie"] * 10),
               Battles("x", "z", ["tie"] * 10)]
    result = bradley_terry(battles, resamples=100)
    # Every resample is all ties, so every strength is exactly 0: a point, not a 95% CI.
    assert result["note"].startswith("no interval for x, y, z: every resample gave the same")
    assert [s["ci95"] for s in result["systems"]] == [None, None, None]
    assert [s["rank"] for s in result["systems"]] == [1, 1, 1]
    rate = win_rate(["inconsistent"] * 53)
    assert rate["value"] == 0.5 and rate["ci95"][0] < 0.4 < 0.6 < rate["ci95"][1]
    assert "Wilson" in rate["method"]
