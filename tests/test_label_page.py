"""The labelling page (evaluator.label) through Starlette's TestClient: the token, Host and
origin checks, the security headers, escaping, blindness, --show-judge, pairwise order,
the journal, resuming, and the refusals at start."""

from __future__ import annotations

import json
import re
import shutil
import socket

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from evaluator.cli.main import cli
from evaluator.data.sheet import (
    CasesRef,
    FileRef,
    JournalEntry,
    SheetError,
    SheetInfo,
    append_label,
    journal_path,
    latest_labels,
    now,
    read_journal,
    read_sheet_info,
    write_sheet_info,
)
from evaluator.label.app import CSP, build_app
from evaluator.label.fields import input_title, rated_input
from evaluator.label.session import LabelError, LabelSession, shown_left
from evaluator.rubrics.load import load_rubric
from tests.label_sheets import (
    CONFIDENCE,
    EXPECTED,
    IMG,
    MARKER,
    SCRIPT,
    TRIAL_FIELDS,
    make_pairwise_sheet,
    make_single_sheet,
    sha256,
)

HOST = "127.0.0.1:8123"
ORIGIN = f"http://{HOST}"


def _client(session: LabelSession) -> TestClient:
    return TestClient(build_app(session, [HOST]), base_url=ORIGIN)


def _token(session: LabelSession, name: str = "ana") -> str:
    return next(t for t, p in session.labellers.items() if p.name == name)


def _post(client, token, index, data, origin=ORIGIN, **kw):
    headers = {"origin": origin} if origin else {}
    return client.post(f"/l/{token}/case/{index}", data=data, headers=headers,
                       follow_redirects=False, **kw)


@pytest.fixture
def sheet(tmp_path):
    folder = tmp_path / "sheet"
    make_single_sheet(folder, 10, hostile=True)
    return folder


def test_a_request_without_a_valid_token_is_403(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    assert client.get(f"/l/{token}/case/1").status_code == 200
    for path in ("/", "/l/", "/favicon.ico", f"/l/{token[:-1]}/case/1",
                 f"/l/{token}x/case/1", "/l/static/label.js", "/static/label.js"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 403, path
        assert "patient" not in answer.text.lower()
    assert _post(client, "x" * 43, 1, {"v.accuracy": "3"}).status_code == 403
    assert not journal_path(sheet).exists()


def test_a_foreign_host_header_is_403(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    for host in ("evil.example", "evil.example:8123", "127.0.0.1:9999", "127.0.0.1"):
        assert client.get(f"/l/{token}/case/1", headers={"host": host}).status_code == 403
    assert client.get(f"/l/{token}/case/1", headers={"host": HOST}).status_code == 200


@pytest.mark.parametrize("headers", [
    {"origin": "http://evil.example"},
    {"origin": "null"},
    {"origin": "http://127.0.0.1:9999"},
    {"origin": "https://127.0.0.1:8123"},
    {"referer": "http://evil.example/page"},
    {},  # neither Origin nor Referer
])
def test_a_post_from_another_origin_is_403_and_saves_nothing(sheet, headers):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    answer = client.post(f"/l/{token}/case/1", data={"v.accuracy": "3"}, headers=headers,
                         follow_redirects=False)
    assert answer.status_code == 403
    assert not journal_path(sheet).exists()
    ok = client.post(f"/l/{token}/case/1", data={"v.accuracy": "3", "v.clarity": "3"},
                     headers={"referer": f"{ORIGIN}/l/{token}/case/1"}, follow_redirects=False)
    assert ok.status_code == 303


def test_every_response_carries_the_security_headers(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    answers = [client.get(f"/l/{token}/", follow_redirects=False),
               client.get(f"/l/{token}/case/1"), client.get(f"/l/{token}/done"),
               client.get(f"/l/{token}/static/label.js"), client.get("/nothing"),
               client.get(f"/l/{token}/case/1", headers={"host": "evil.example"}),
               _post(client, token, 1, {"v.accuracy": "9"}), _post(client, token, 1, {})]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert "default-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["referrer-policy"] in ("no-referrer", "same-origin")
        assert "set-cookie" not in answer.headers
    page = answers[1].text
    assert "<script>" not in page and " style=" not in page and "http://" not in page
    assert re.findall(r'<script src="([^"]+)"', page) == [f"/l/{token}/static/label.js"]


def test_case_text_is_escaped_and_runs_nothing(sheet):
    session = LabelSession(sheet, ["ana"])
    page = _client(session).get(f"/l/{_token(session)}/case/1").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=fetch(&#39;/x&#39;)&gt;" in page
    assert SCRIPT not in page and "<img" not in page and IMG not in page
    assert "&lt;0.&gt; A 58-year-old" in page  # the shared data's sentence markers too


def test_fields_have_readable_titles_and_the_answer_to_rate_its_own_box(sheet, tmp_path):
    """Each field under a title made from its input's name, never the raw name; the answer
    being rated (the input the rubric describes as "being evaluated") in its own box, after
    the context and before the choices."""
    session = LabelSession(sheet, ["ana"])
    page = _client(session).get(f"/l/{_token(session)}/case/1").text
    for name in TRIAL_FIELDS:
        assert name not in page, name
    for title in ("Patient profile", "Trial ID", "Trial title", "Eligibility criteria",
                  "Ground truth label", "Ground truth explanation"):
        assert f"<h2>{title} <span class=\"desc\">" in page, title
    answer = re.search(r'<section class="field answer" id="answer".*?</section>', page,
                       re.DOTALL)
    assert answer is not None
    assert "Workflow answer" in answer.group() and "&lt;script&gt;" in answer.group()
    assert page.index("Eligibility criteria") < answer.start() < page.index('id="label-form"')
    pair = tmp_path / "pair"
    make_pairwise_sheet(pair, 2)
    paired = LabelSession(pair, ["ana"])
    page = _client(paired).get(f"/l/{_token(paired)}/case/1").text
    assert '<h2>Reference report <span class="desc">' in page
    assert "reference_report" not in page and 'id="answer"' not in page


@pytest.mark.parametrize("name, title", [
    ("patient_profile", "Patient profile"), ("trial_id", "Trial ID"), ("Resp", "Resp"),
    ("DiagnosisAccuracy", "Diagnosis accuracy"), ("ECGText", "ECG text"),
    ("lead2_axis", "Lead2 axis"), ("Resp_A", "Resp A"), ("_", "_"),
])
def test_an_inputs_title_is_its_name_in_words(name, title):
    assert input_title(name) == title


def test_the_answer_to_rate_is_the_input_being_evaluated_and_never_a_guess(tmp_path):
    assert {name: rated_input(load_rubric(name)) for name in (
        "trial_eligibility", "ecg_interpretation", "pathology_report",
        "drug_monograph_similarity", "trial_eligibility_pairwise")} == {
        "trial_eligibility": "workflow_answer", "ecg_interpretation": "generated",
        "pathology_report": "generated_report", "drug_monograph_similarity": "Resp",
        "trial_eligibility_pairwise": None}  # a pair's two answers are shown side by side
    ecg = load_rubric("ecg_interpretation")
    unmarked = {n: f.model_copy(update={"description": "text"}) for n, f in ecg.inputs.items()}
    assert rated_input(ecg.model_copy(update={"inputs": unmarked})) is None
    # A rubric that marks none: every field is context, the answer among them.
    from evaluator.rubrics.load import BUILTIN_RUBRICS_DIR

    sheet = tmp_path / "sheet"
    info = make_single_sheet(sheet, 2)
    text = (BUILTIN_RUBRICS_DIR / "trial_eligibility.yaml").read_text()
    custom = text.replace("name: trial_eligibility\n", "name: our_trials\n").replace(
        "determination being evaluated.", "determination.")
    assert "being evaluated" not in custom
    (tmp_path / "our_trials.yaml").write_text(custom)
    write_sheet_info(sheet, info.model_copy(update={
        "rubric": "our_trials", "rubric_hash": sha256(tmp_path / "our_trials.yaml")}))
    session = LabelSession(sheet, ["ana"], rubrics_dirs=[tmp_path])
    page = _client(session).get(f"/l/{_token(session)}/case/1").text
    assert 'id="answer"' not in page and "To rate" not in page
    assert page.index("<h2>Workflow answer ") < page.index('id="label-form"')


def _label_everything(client, token, n, values=("4", "2")):
    bodies = []
    for i in range(1, n + 1):
        bodies.append(client.get(f"/l/{token}/case/{i}").text)
        answer = _post(client, token, i, {"v.accuracy": values[0], "v.clarity": values[1],
                                          "comment": "fine"})
        assert answer.status_code == 303, answer.text
        bodies.append(answer.text + json.dumps(dict(answer.headers)))
        bodies.append(client.get(answer.headers["location"]).text)
    return bodies


def test_a_blind_sheet_never_sends_the_judge(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    bodies = _label_everything(client, token, 10)
    bodies += [client.get(f"/l/{token}/case/{i}").text for i in range(1, 11)]
    bodies += [client.get(f"/l/{token}/done").text, client.get(f"/l/{token}/").text,
               client.get(f"/l/{token}/static/label.js").text,
               _post(client, token, 3, {"v.accuracy": "x"}).text]
    whole = "\n".join(bodies)
    assert "All 10 cases labelled" in whole
    for judge in (MARKER, str(EXPECTED), str(CONFIDENCE), "0.9877", "Judge:", "verdict"):
        assert judge not in whole, judge
    assert "<img" not in whole


def test_show_judge_is_refused_on_a_blind_sheet(sheet):
    with pytest.raises(LabelError, match="blind sheet: --show-judge is refused"):
        LabelSession(sheet, ["ana"], show_judge=True)


def test_show_judge_shows_the_verdict_only_after_her_save_and_records_it(tmp_path):
    folder = tmp_path / "open"
    make_single_sheet(folder, 4, blind=False)
    plain = LabelSession(folder, ["ana"])  # not blind, but no --show-judge: nothing shown
    assert 'class="verdict"' not in _client(plain).get(f"/l/{_token(plain)}/case/1").text
    session = LabelSession(folder, ["ana"], show_judge=True)
    client, token = _client(session), _token(session)
    before = client.get(f"/l/{token}/case/1").text
    assert 'class="verdict"' not in before and "Judge:" not in before
    partial = _post(client, token, 1, {"v.accuracy": "2"})  # one criterion of two: refused
    assert partial.status_code == 400 and 'class="verdict"' not in partial.text
    assert "not saved: clarity not answered" in partial.text
    assert 'class="verdict"' not in client.get(f"/l/{token}/case/1").text
    saved = _post(client, token, 1, {"v.accuracy": "2", "v.clarity": "5"})
    assert saved.headers["location"].endswith("/case/1")  # back to the case: the verdict
    after = client.get(saved.headers["location"]).text
    assert 'class="verdict"' in after and "Judge: <strong>1</strong>" in after
    assert MARKER not in after  # the verdict, not the reasoning
    changed = _post(client, token, 1, {"v.accuracy": "1", "v.clarity": "5"})
    assert changed.headers["location"].endswith("/case/2")
    entries = list(read_journal(folder))
    assert [(e.criterion, e.value, e.judge_seen) for e in entries] == [
        ("accuracy", 2, False), ("clarity", 5, False), ("accuracy", 1, True)]


def test_a_labeller_not_on_the_sheet_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "s"
    make_single_sheet(folder, 4, labellers=["ana", "ben"])
    LabelSession(folder, ["ana", "ben"])
    with pytest.raises(LabelError, match="'zoe' is not one of this sheet's labellers") as caught:
        LabelSession(folder, ["ana", "zoe"])
    assert "\n" not in str(caught.value)


def test_assignment_gives_each_labeller_her_cases_and_progress(tmp_path):
    folder = tmp_path / "s"
    info = make_single_sheet(folder, 6, labellers=["ana", "ben"])
    ids = [json.loads(line)["case_id"]
           for line in (folder / "review.jsonl").read_text().splitlines()]
    write_sheet_info(folder, info.model_copy(
        update={"assignment": {"ana": ids[:2] + ids[4:5], "ben": ids[2:]}}))
    session = LabelSession(folder, ["ana", "ben"])
    client, ana, ben = _client(session), _token(session, "ana"), _token(session, "ben")
    assert "0 of 3 labelled" in client.get(f"/l/{ana}/case/1").text
    assert "0 of 4 labelled" in client.get(f"/l/{ben}/case/1").text
    assert client.get(f"/l/{ana}/case/4").status_code == 404
    _post(client, ana, 3, {"v.accuracy": "3", "v.clarity": "3"})
    assert "1 of 3 labelled" in client.get(f"/l/{ana}/case/1").text
    assert [e.case_id for e in read_journal(folder)] == [ids[4], ids[4]]


def test_a_changed_label_is_a_new_line_and_an_unchanged_one_writes_nothing(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    _post(client, token, 1, {"v.accuracy": "4", "v.clarity": "2"})
    _post(client, token, 1, {"v.accuracy": "4", "v.clarity": "2"})
    _post(client, token, 1, {"v.accuracy": "5", "v.clarity": "2"})
    entries = list(read_journal(sheet))
    assert [(e.criterion, e.value) for e in entries] == [
        ("accuracy", 4), ("clarity", 2), ("accuracy", 5)]
    assert 'value="5" data-key="5" checked' in client.get(f"/l/{token}/case/1").text


def test_cannot_judge_needs_a_reason_and_a_value_must_be_on_the_scale(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    assert "needs a reason" in _post(client, token, 1, {"v.accuracy": "x"}).text
    assert _post(client, token, 1, {"v.accuracy": "9"}).status_code == 400
    assert _post(client, token, 1, {}).status_code == 400
    assert not journal_path(sheet).exists()
    _post(client, token, 1, {"v.accuracy": "x", "v.clarity": "3", "reason": "answer cut off"})
    entry = next(read_journal(sheet))
    assert (entry.value, entry.cannot_judge) == (None, "answer cut off")


def test_a_restart_resumes_at_the_first_unlabelled_case_with_new_tokens(sheet):
    first = LabelSession(sheet, ["ana"])
    client, token = _client(first), _token(first)
    for i in (1, 2, 3, 5):
        _post(client, token, i, {"v.accuracy": "4", "v.clarity": "4"})
    again = LabelSession(sheet, ["ana"])
    new = _token(again)
    assert new != token
    assert _client(again).get(f"/l/{token}/case/1").status_code == 403
    start = _client(again).get(f"/l/{new}/", follow_redirects=False)
    assert start.headers["location"] == f"/l/{new}/case/4"
    assert "4 of 10 labelled" in _client(again).get(start.headers["location"]).text


def test_pairwise_order_is_drawn_per_case_and_labels_are_stored_as_systems(tmp_path):
    folder = tmp_path / "pair"
    info = make_pairwise_sheet(folder, 8)
    session = LabelSession(folder, ["ana"])
    client, token = _client(session), _token(session)
    sides = []
    for i in range(1, 9):
        page = client.get(f"/l/{token}/case/{i}").text
        case_id = f"path-{i - 1:03d}"
        side = shown_left(info, "ana", case_id)
        sides.append(side)
        left = page.index('id="left"')
        assert page.index(f"System {side} report") > left
        assert "generated_report_a" not in page and "candidate A" not in page
        _post(client, token, i, {"v.critical_finding_concordance": "left",
                                 "v.overall_equivalence": "tie"})
    assert set(sides) == {"A", "B"}
    again = LabelSession(folder, ["ana"])
    assert [shown_left(again.info, "ana", f"path-{i:03d}") for i in range(8)] == sides
    entries = [e for e in read_journal(folder) if e.criterion == "critical_finding_concordance"]
    assert [e.value for e in entries] == sides
    assert [e.shown_left for e in entries] == sides
    assert {e.value for e in read_journal(folder) if e.criterion == "overall_equivalence"} == {"tie"}
    # The saved choice shows on the same side when she comes back.
    assert 'value="left" data-key="1" checked' in client.get(f"/l/{token}/case/1").text


def test_a_journal_of_another_sheet_is_refused(sheet):
    append_label(sheet, JournalEntry(labeller="ana", time=now(), case_id="c", criterion="accuracy",
                                     value=3, sheet="0" * 64, rubric_hash="r" * 64))
    with pytest.raises(LabelError, match="journal.jsonl line 1: saved on another draw"):
        LabelSession(sheet, ["ana"])


def test_a_changed_cases_file_or_a_sheet_without_cases_is_refused(sheet):
    info = read_sheet_info(sheet)
    cases = sheet / "cases.jsonl"
    cases.write_bytes(cases.read_bytes() + b"\n")
    with pytest.raises(SheetError, match="has changed since the run") as caught:
        LabelSession(sheet, ["ana"])
    assert "patient" not in str(caught.value).lower()
    write_sheet_info(sheet, info.model_copy(update={"cases": None}))
    with pytest.raises(SheetError, match="predates recorded case reading"):
        LabelSession(sheet, ["ana"])


def test_a_changed_review_jsonl_is_refused(sheet):
    with (sheet / "review.jsonl").open("a") as handle:
        handle.write('{"case_id": "extra"}\n')
    with pytest.raises(LabelError, match="changed since the sheet was drawn") as caught:
        LabelSession(sheet, ["ana"])
    # A new draw would strand the journal's labels (they carry this draw's fingerprint).
    assert "restore the review.jsonl" in str(caught.value)
    assert "draw the sheet again" not in str(caught.value)


@pytest.mark.parametrize("args, says", [
    (["--host", "10.1.2.3"], "--tls-cert and --tls-key"),
    (["--host", "0.0.0.0"], "listens on every address"),
    (["--host", "127.0.0.1", "--port", "BUSY"], "cannot serve on 127.0.0.1:"),
    (["--host", "10.1.2.3", "--tls-cert", "CERT"], "--tls-cert and --tls-key"),
    (["--show-judge"], "blind sheet: --show-judge is refused"),
    (["--labeller", "zoe"], "'zoe' is not one of this sheet's labellers"),
])
def test_the_cli_refuses_in_one_line_with_exit_2(tmp_path, args, says):
    folder = tmp_path / "s"
    make_single_sheet(folder, 3, labellers=["ana"])
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    swap = {"CERT": str(cert), "BUSY": str(busy.getsockname()[1])}
    args = [swap.get(a, a) for a in args]
    try:
        result = CliRunner().invoke(cli, ["label", str(folder), "--labeller", "ana", *args])
    finally:
        busy.close()
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.output


def test_the_cli_refuses_a_sheet_without_recorded_cases(tmp_path):
    folder = tmp_path / "s"
    info = make_single_sheet(folder, 3)
    write_sheet_info(folder, info.model_copy(update={"cases": None}))
    shutil.rmtree(folder / "cases.jsonl", ignore_errors=True)
    result = CliRunner().invoke(cli, ["label", str(folder), "--labeller", "ana"])
    assert result.exit_code == 2
    assert "predates recorded case reading" in result.output


def _ecg_sheet(folder):
    """A sheet on an aggregate (a number typed in): ecg_interpretation's DiagnosisAccuracy.
    Synthetic ECG texts."""
    folder.mkdir()
    cases = folder / "ecg.jsonl"
    cases.write_text("".join(json.dumps({"case_id": f"e{i}", "generated": f"sinus rhythm {i}",
                                         "groundtruth": "sinus rhythm"}) + "\n"
                             for i in range(2)))
    review = folder / "review.jsonl"
    review.write_text('{"case_id": "e0"}\n{"case_id": "e1"}\n')
    write_sheet_info(folder, SheetInfo(
        fingerprint=sha256(review), rubric="ecg_interpretation",
        rubric_hash=load_rubric("ecg_interpretation").source_sha256 or "", design="random",
        blind=True, criteria=["DiagnosisAccuracy"], results=[FileRef(path="r", sha256="0")],
        cases=CasesRef(path=str(cases), sha256=sha256(cases)), created=now()))


def test_an_aggregate_is_a_number_typed_in_or_cannot_judge(tmp_path):
    folder = tmp_path / "ecg"
    _ecg_sheet(folder)
    session = LabelSession(folder, ["ana"])
    client, token = _client(session), _token(session)
    page = client.get(f"/l/{token}/case/1").text
    assert 'name="v.DiagnosisAccuracy"' in page and "+2 / +1 / +0 per diagnosis" in page
    assert _post(client, token, 1, {"v.DiagnosisAccuracy": "nan"}).status_code == 400
    assert _post(client, token, 1, {"v.DiagnosisAccuracy": "0.75"}).status_code == 303
    assert 'name="v.DiagnosisAccuracy" value="0.75"' in client.get(f"/l/{token}/case/1").text
    _post(client, token, 2, {"v.DiagnosisAccuracy": "", "cj.DiagnosisAccuracy": "x",
                             "reason": "no rhythm strip"})
    assert [(e.value, e.cannot_judge) for e in read_journal(folder)] == [
        (0.75, None), (None, "no rhythm strip")]


def test_two_servers_on_one_sheet_lose_nothing(sheet):
    one, two = LabelSession(sheet, ["ana"]), LabelSession(sheet, ["ben"])
    clients = [(_client(one), _token(one, "ana")), (_client(two), _token(two, "ben"))]
    for i in range(1, 11):
        for client, token in clients:
            assert _post(client, token, i, {"v.accuracy": "3", "v.clarity": "4"}
                         ).status_code == 303
    entries = list(read_journal(sheet))
    assert len(entries) == 40
    assert len({(e.labeller, e.case_id, e.criterion) for e in entries}) == 40


def test_show_judge_on_a_pairwise_sheet_gives_the_verdict_in_screen_sides(tmp_path):
    folder = tmp_path / "pair"
    info = make_pairwise_sheet(folder, 2, blind=False)
    session = LabelSession(folder, ["ana"], show_judge=True)
    client, token = _client(session), _token(session)
    _post(client, token, 1, {"v.critical_finding_concordance": "tie",
                             "v.overall_equivalence": "tie"})
    page = client.get(f"/l/{token}/case/1").text
    judge = "A"  # the fixture's judge chose A on the first case
    side = "left" if shown_left(info, "ana", "path-000") == judge else "right"
    assert f"Judge: <strong>{side}</strong>" in page
    assert "Judge: <strong>A</strong>" not in page


def test_a_rubric_changed_since_the_draw_or_of_another_kind_is_refused(sheet):
    info = read_sheet_info(sheet)
    write_sheet_info(sheet, info.model_copy(update={"rubric_hash": "0" * 64}))
    with pytest.raises(LabelError, match="has changed since the sheet was drawn"):
        LabelSession(sheet, ["ana"])
    write_sheet_info(sheet, info.model_copy(update={"kind": "pairwise"}))
    with pytest.raises(LabelError, match="does not fit rubric"):
        LabelSession(sheet, ["ana"])


def test_two_servers_for_one_labeller_write_every_change_and_show_the_journal(sheet):
    """The same labeller on two servers: 2 via the first, 4 via the second, 2 via the first
    again. Each save is judged "unchanged" against the journal, not the server's memory, so
    the third is written (the journal's last is 2), and either server's page shows it."""
    one, two = LabelSession(sheet, ["ana"]), LabelSession(sheet, ["ana"])
    first, second = (_client(one), _token(one)), (_client(two), _token(two))
    for (client, token), value in ((first, "2"), (second, "4"), (first, "2")):
        assert _post(client, token, 1, {"v.accuracy": value, "v.clarity": "3"}
                     ).status_code == 303
    case_id = one.labellers[first[1]].cases[0]
    latest = latest_labels(read_journal(sheet))
    assert latest[("ana", case_id, "accuracy")].value == 2
    assert [e.value for e in read_journal(sheet) if e.criterion == "accuracy"] == [2, 4, 2]
    for client, token in (first, second):
        assert 'value="2" data-key="2" checked' in client.get(f"/l/{token}/case/1").text
    # A save the other server made is shown there too, and counts in its progress.
    assert _post(*second, 2, {"v.accuracy": "5", "v.clarity": "5"}).status_code == 303
    page = first[0].get(f"/l/{first[1]}/case/2").text
    assert 'value="5" data-key="5" checked' in page and "2 of 10 labelled" in page


def test_a_save_with_a_criterion_unanswered_is_refused_and_the_page_keeps_her_choices(sheet):
    session = LabelSession(sheet, ["ana"])
    client, token = _client(session), _token(session)
    answer = _post(client, token, 1, {"v.accuracy": "4", "comment": "half done"})
    assert answer.status_code == 400
    assert "not saved: clarity not answered" in answer.text
    assert 'value="4" data-key="4" checked' in answer.text  # what she chose, kept
    assert 'value="half done"' in answer.text
    assert not journal_path(sheet).exists()
    assert "0 of 10 labelled" in client.get(f"/l/{token}/case/1").text
    # Cannot judge with its reason under each criterion: each reason is that criterion's.
    assert _post(client, token, 1, {"v.accuracy": "x", "reason.accuracy": "answer cut off",
                                    "v.clarity": "x", "reason.clarity": "not in English"}
                 ).status_code == 303
    assert [(e.criterion, e.cannot_judge) for e in read_journal(sheet)] == [
        ("accuracy", "answer cut off"), ("clarity", "not in English")]
    page = client.get(f"/l/{token}/case/1").text
    assert 'name="reason.accuracy" value="answer cut off"' in page
    assert 'name="reason.clarity" value="not in English"' in page


def test_the_page_shows_each_levels_words_and_warns_that_reasons_may_hold_phi(sheet):
    session = LabelSession(sheet, ["ana"])
    page = _client(session).get(f"/l/{_token(session)}/case/1").text
    rubric = load_rubric("trial_eligibility")
    accuracy = next(f for f in rubric.output if f.key == "accuracy")
    for value, text in accuracy.levels.items():
        assert f"{value} <span class=\"level-text\">{text}</span>" in page
    assert "Reasons and comments stay on this computer" in page


@pytest.mark.parametrize("names, says", [
    ([""], "--labeller number 1 is empty"),
    (["ana", "b;c"], "--labeller number 2 holds ';'"),
    (["eve\n  mallory:"], "--labeller number 1 holds a control character"),
    (["ana", "ana"], "--labeller 'ana' is given twice"),
    (["x" * 65], "at most 64"),
])
def test_labeller_names_are_checked_as_review_checks_them(tmp_path, names, says):
    folder = tmp_path / "s"
    make_single_sheet(folder, 3)  # drawn without --labeller: any name would do
    args = [a for name in names for a in ("--labeller", name)]
    result = CliRunner().invoke(cli, ["label", str(folder), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.output


def test_a_custom_rubric_is_found_beside_the_results_or_named_with_rubrics_dir(tmp_path):
    """review prints the label command without --rubrics-dir: label finds the sheet's
    rubric file beside the results file it was drawn from (its hash must be the sheet's),
    and otherwise says to give --rubrics-dir."""
    from evaluator.rubrics.load import BUILTIN_RUBRICS_DIR

    sheet = tmp_path / "sheet"
    info = make_single_sheet(sheet, 2)
    text = (BUILTIN_RUBRICS_DIR / "trial_eligibility.yaml").read_text()
    custom = text.replace("name: trial_eligibility\n", "name: our_trials\n")
    (tmp_path / "runs").mkdir()
    rubric_file = tmp_path / "runs" / "our_trials.yaml"
    rubric_file.write_text(custom)
    write_sheet_info(sheet, info.model_copy(update={
        "rubric": "our_trials", "rubric_hash": sha256(rubric_file),
        "results": [FileRef(path="runs/results.jsonl", sha256="0" * 64)]}))
    assert LabelSession(sheet, ["ana"]).rubric.source_path == rubric_file.resolve()
    rubric_file.write_text(custom + "# edited\n")  # another file of that name: not it
    with pytest.raises(LabelError, match="give the folder of its file with --rubrics-dir"):
        LabelSession(sheet, ["ana"])
    elsewhere = tmp_path / "rubrics"
    elsewhere.mkdir()
    (elsewhere / "our_trials.yaml").write_text(custom)
    assert LabelSession(sheet, ["ana"], rubrics_dirs=[elsewhere]).rubric.name == "our_trials"


@pytest.mark.parametrize("scheme, port", [("http", 80), ("https", 443)])
def test_the_schemes_default_port_is_answered_as_a_browser_sends_it(sheet, scheme, port):
    """A browser leaves the scheme's default port out of Host and Origin: a page served on
    80 (or 443 with TLS) answers them, and host names are compared without regard to
    case; another port, or none where one is needed, is still refused."""
    session = LabelSession(sheet, ["ana"])
    token = _token(session)
    client = TestClient(build_app(session, [f"label.example:{port}"], scheme),
                        base_url=f"{scheme}://label.example")
    assert client.get(f"/l/{token}/case/1").status_code == 200
    assert client.get(f"/l/{token}/case/1",
                      headers={"host": f"LABEL.Example:{port}"}).status_code == 200
    saved = _post(client, token, 1, {"v.accuracy": "3", "v.clarity": "4"},
                  origin=f"{scheme}://Label.Example")
    assert saved.status_code == 303
    assert client.get(f"/l/{token}/case/1", headers={"host": "label.example:8080"}
                      ).status_code == 403
    other = TestClient(build_app(session, ["label.example:8443"], scheme),
                       base_url=f"{scheme}://label.example")
    assert other.get(f"/l/{token}/case/1").status_code == 403  # no port: not 8443's Host


@pytest.mark.parametrize("name, title", [
    ("eGFR", "eGFR"), ("SpO2", "SpO2"), ("HbA1cValue", "HbA1cValue"), ("IDs", "IDs"),
    ("icd10_code", "ICD10 code"), ("2nd_opinion", "2nd opinion"), ("serum_eGFR", "Serum eGFR"),
])
def test_a_clinical_name_in_mixed_case_keeps_its_case(name, title):
    assert input_title(name) == title


def test_a_reference_judged_against_is_not_the_answer_to_rate(tmp_path):
    """Only an input described as "being evaluated" (or judged), the words ending what the
    description says, is the answer: "the answer is being judged against" describes the
    reference."""
    ecg = load_rubric("ecg_interpretation")
    inputs = dict(ecg.inputs)
    inputs["generated"] = inputs["generated"].model_copy(
        update={"description": "The model's ECG interpretation."})
    inputs["groundtruth"] = inputs["groundtruth"].model_copy(
        update={"description": "The clinician's interpretation the answer is being judged "
                               "against."})
    assert rated_input(ecg.model_copy(update={"inputs": inputs})) is None
    inputs["generated"] = inputs["generated"].model_copy(
        update={"description": "The interpretation being judged, from the new model."})
    assert rated_input(ecg.model_copy(update={"inputs": inputs})) == "generated"
