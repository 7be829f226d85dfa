"""``evaluator label`` as a real server (a subprocess): it prints one URL per labeller on a
free loopback port, answers with its token, logs no case text, and with a certificate
answers HTTPS only."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from evaluator.data.sheet import read_journal, write_sheet_info
from tests.label_browser import Server
from tests.label_sheets import MARKER, make_single_sheet


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_it_prints_a_url_per_labeller_and_serves_loopback_with_no_log_of_case_text(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 4, hostile=True)
    with Server(sheet, ["ana", "ben"]) as server:
        assert set(server.urls) == {"ana", "ben"}
        assert len(set(server.urls.values())) == 2
        assert all(u.startswith("http://127.0.0.1:") for u in server.urls.values())
        assert all(len(line) <= 80 for line in server.printed)
        status, page = _get(server.urls["ana"])
        assert status == 200 and "Labelling as <strong>ana</strong>" in page
        assert "&lt;script&gt;" in page
        assert _get(server.urls["ana"].rsplit("/l/", 1)[0] + "/l/nope/")[0] == 403
    err = server.stop()
    assert "script" not in err and "/l/" not in err and "patient" not in err.lower()
    assert MARKER not in err


def _certificate(folder: Path) -> tuple[Path, Path]:
    crypto = pytest.importorskip("cryptography")
    del crypto
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_with_a_certificate_it_answers_https_only(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    cert, key = _certificate(tmp_path)
    with Server(sheet, ["ana"], "--host", "127.0.0.1", "--tls-cert", str(cert),
                "--tls-key", str(key)) as server:
        url = server.url
        assert url.startswith("https://127.0.0.1:")
        trusted = ssl.create_default_context(cafile=str(cert))
        status, page = _get(url, trusted)
        assert status == 200 and "Case 1 of 3" in page
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(url, timeout=30, context=ssl.create_default_context())
        port = int(url.split(":")[2].split("/")[0])
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        got = None
        try:
            plain.request("GET", url.replace("https://", "http://").split(str(port), 1)[1])
            got = plain.getresponse().status
        except (http.client.HTTPException, ConnectionError, OSError):
            pass
        finally:
            plain.close()
        assert got != 200  # plain HTTP gets no page
        assert list(read_journal(sheet)) == []


def test_sigkill_in_the_middle_of_saves_loses_no_acknowledged_label(tmp_path):
    """Saves sent back to back; the server SIGKILLed at an arbitrary moment among them:
    every save it acknowledged is in the journal, nothing is there twice, and the journal
    reads (a line torn by the kill, never acknowledged, is skipped)."""
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 10)
    server = Server(sheet, ["ana"])
    url = urllib.parse.urlsplit(server.url)
    acknowledged: list[tuple[int, int]] = []
    killer = threading.Timer(1.0, server.kill)
    killer.start()
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        for step in range(100_000):
            index, value = step % 10 + 1, step // 10 % 5 + 1  # a new value each round
            body = f"v.accuracy={value}&v.clarity={value}"
            connection.request("POST", f"{url.path}case/{index}", body=body, headers={
                "Origin": f"http://{url.netloc}",
                "Content-Type": "application/x-www-form-urlencoded"})
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 303
            acknowledged.append((index, value))
    except (ConnectionError, http.client.HTTPException, OSError):
        pass  # killed
    finally:
        killer.join()
        connection.close()
        server.stop()
    assert len(acknowledged) > 10
    entries = list(read_journal(sheet))
    written = [(e.case_id, e.criterion, e.value) for e in entries]
    ids = [json.loads(line)["case_id"]
           for line in (sheet / "review.jsonl").read_text().splitlines()]
    expected = [(ids[i - 1], c, v) for i, v in acknowledged for c in ("accuracy", "clarity")]
    # Each acknowledged save changed both values (the value cycles), so each is two lines,
    # in order; at most the one save in flight at the kill follows them.
    assert written[:len(expected)] == expected
    assert len(written) - len(expected) <= 2
    with Server(sheet, ["ana"]) as again:  # and it starts again on that journal
        assert _get(again.url)[0] == 200


def test_the_start_lines_give_each_labeller_her_own_count(tmp_path):
    sheet = tmp_path / "sheet"
    info = make_single_sheet(sheet, 6, labellers=["ana", "ben"])
    ids = [json.loads(line)["case_id"]
           for line in (sheet / "review.jsonl").read_text().splitlines()]
    write_sheet_info(sheet, info.model_copy(
        update={"assignment": {"ana": ids[:3], "ben": ids[2:]}}))
    with Server(sheet, ["ana", "ben"]) as server:
        printed = list(server.printed)
    assert printed[0] == "Labelling sheet (single, blind): 6 cases in the sheet."
    assert "  ana (3 cases):" in printed and "  ben (4 cases):" in printed
    assert set(server.urls) == {"ana", "ben"}
