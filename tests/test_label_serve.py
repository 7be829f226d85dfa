"""``evaluator label`` as a real server (a subprocess): it prints one URL per labeller on a
free loopback port, answers with its token, logs no case text, and with a certificate
answers HTTPS only; a POST's body is read no further than its limit, and no request leaves a
traceback. ``--host`` is judged on the address bind would use: every address is refused
however it is spelt, before anything is bound."""

from __future__ import annotations

import datetime
import errno
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.sheet import read_journal, write_sheet_info
from evaluator.label import serve
from evaluator.label.session import LabelError
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


# --host: every spelling of every address is refused, before anything is bound.
EVERY_ADDRESS = ["0", "0.0.0.0", "00", "0.0", "0x0", "000.000.000.000", "::", "::0", "[::]",
                 "0000::", "0:0:0:0:0:0:0:0", "::ffff:0.0.0.0", "[::ffff:0:0]", ""]


@pytest.fixture
def no_bind(monkeypatch) -> list:
    """socket.bind recorded and refused: what a test asserts nothing asked for."""
    bound: list = []

    def record(sock, address):
        bound.append(address)
        raise OSError(errno.EADDRNOTAVAIL, "recorded by the test")

    monkeypatch.setattr(socket.socket, "bind", record)
    return bound


def _label_cli(tmp_path: Path, *args: str) -> str:
    """``evaluator label`` with a certificate and ``args``: exit 2 with one line, returned."""
    folder = tmp_path / "s"
    if not folder.exists():
        make_single_sheet(folder, 3)
    cert, key = _certificate(tmp_path)
    result = CliRunner().invoke(cli, ["label", str(folder), "--labeller", "ana",
                                      "--tls-cert", str(cert), "--tls-key", str(key), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("host", EVERY_ADDRESS)
def test_every_spelling_of_every_address_is_refused_with_tls_and_nothing_is_bound(
        tmp_path, no_bind, host):
    line = _label_cli(tmp_path, "--host", host)
    assert "listens on every address" in line, line
    assert f"--host {host or repr(host)} " in line
    assert no_bind == []


@pytest.mark.parametrize("answers", [[("0.0.0.0", 0)], [("10.1.2.3", 0), ("::", 0, 0, 0)]])
def test_a_name_that_resolves_to_every_address_is_refused(tmp_path, no_bind, monkeypatch,
                                                          answers):
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):
        if host == "anywhere.example":
            return [(socket.AF_INET6 if ":" in a[0] else socket.AF_INET, socket.SOCK_STREAM,
                     6, "", a) for a in answers]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    line = _label_cli(tmp_path, "--host", "anywhere.example")
    assert line.startswith("error: --host anywhere.example listens on every address"), line
    assert no_bind == []


def test_a_resolver_that_does_not_answer_is_not_waited_for(tmp_path, no_bind, monkeypatch):
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):
        numeric = (args[4] if len(args) > 4 else 0) & socket.AI_NUMERICHOST
        if host == "slow.example" and not numeric:
            time.sleep(5)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr(serve, "RESOLVE_SECONDS", 0.3, raising=False)
    started = time.monotonic()
    line = _label_cli(tmp_path, "--host", "slow.example")
    assert "--host slow.example did not resolve within 0.3 s" in line, line
    assert time.monotonic() - started < 4
    assert no_bind == []


@pytest.mark.parametrize("host", ["evil host", "a\nb", "[127.0.0.1]", "[label.example]",
                                  "-x.example", "label.example.123", "label_x", "<broadcast>",
                                  "127.0.0.1:8443", "0.0.0.0."])
def test_a_host_that_is_neither_an_address_nor_a_name_is_refused(tmp_path, no_bind, host):
    line = _label_cli(tmp_path, "--host", host)
    assert "is neither an address nor a host name" in line, line
    assert no_bind == []


@pytest.mark.parametrize("host, loopback, name", [
    ("127.1", True, "127.0.0.1"), ("0x7f.1", True, "127.0.0.1"),
    ("2130706433", True, "127.0.0.1"), ("localhost", True, "localhost"),
    ("LocalHost", True, "localhost"), ("::ffff:127.0.0.1", True, "[::ffff:7f00:1]"),
    ("[0:0::1]", True, "[::1]"), ("10.1.2.3", False, "10.1.2.3"),
    ("::ffff:10.1.2.3", False, "[::ffff:a01:203]"), ("0.0.0.1", False, "0.0.0.1"),
])
def test_loopback_is_judged_on_the_address_that_is_bound(host, loopback, name):
    address = serve.resolve(host)
    assert address.loopback is loopback and address.name == name
    if not loopback:
        with pytest.raises(LabelError, match="--tls-cert and --tls-key"):
            serve.check_listen(serve.Listen(host))
        return
    assert serve.check_listen(serve.Listen(host)) == address
    if address.ip.version == 4:  # (IPv6 may be off here)
        sock = serve.bind(address, 0)
        try:
            assert sock.getsockname()[0] == str(address.ip)
        finally:
            sock.close()


def test_a_loopback_address_spelt_another_way_is_linked_and_answered_as_browsers_send_it(
        tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    with Server(sheet, ["ana"], "--host", "0x7f.1") as server:
        url = urllib.parse.urlsplit(server.url)
        assert url.hostname == "127.0.0.1"  # what a browser sends for 0x7f.1 too
        assert _get(server.url)[0] == 200
        connection = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
        connection.request("GET", url.path, headers={"Host": f"0x7f.1:{url.port}"})
        assert connection.getresponse().status == 403
        connection.close()


# A POST's body: read no further than 64 KiB, a form only, and no traceback for any request.
def _raw_post(url: str, head: dict[str, str], chunks: int = 0, size: int = 1 << 20,
              hang_up: bool = False, wait: float = 10) -> tuple[bytes, int]:
    """A POST to case 1 sent by hand: ``chunks`` chunks of ``size`` bytes (chunked), sent
    until the server answers; (the answer's head, how many chunks were sent by then).
    ``hang_up``: close the connection after the chunks, before the body's end."""
    split = urllib.parse.urlsplit(url)
    sock = socket.create_connection((split.hostname, split.port), timeout=wait)
    headers = {"Host": split.netloc, "Origin": f"http://{split.netloc}",
               "Content-Type": "application/x-www-form-urlencoded", **head}
    request = f"POST {split.path}case/1 HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    answer = bytearray()
    answered = threading.Event()

    def read() -> None:
        try:
            while b"\r\n\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer.extend(data)
        except OSError:
            pass
        finally:
            answered.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    chunk = f"{size:x}\r\n".encode() + b"a" * size + b"\r\n"
    try:
        sock.sendall(request.encode())
        while sent < chunks and not answered.is_set():
            sock.sendall(chunk)
            sent += 1
        if hang_up:
            time.sleep(0.3)
            sock.close()
            return bytes(answer), sent
        if sent == chunks and chunks:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server closed the connection: its answer is read below
    answered.wait(wait)
    sock.close()
    return bytes(answer).partition(b"\r\n\r\n")[0], sent


def _no_traceback(server: Server) -> None:
    err = server.stop()
    assert "Traceback" not in err and "ClientDisconnect" not in err, err
    assert "Exception in ASGI application" not in err, err


def test_a_chunked_body_is_answered_at_the_limit_not_read_whole(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    with Server(sheet, ["ana"]) as server:
        # 200 MiB chunked, with a valid token and origin: answered after the first MiBs.
        started = time.monotonic()
        answer, sent = _raw_post(server.url, {"Transfer-Encoding": "chunked"}, chunks=200)
        assert sent < 200 and time.monotonic() - started < 10, (sent, answer)
        assert answer.startswith(b"HTTP/1.1 413 "), answer
        assert b"connection: close" in answer.lower()
        assert _get(server.url)[0] == 200  # still serving
    assert list(read_journal(sheet)) == []
    _no_traceback(server)


def test_a_content_length_over_the_limit_is_answered_before_the_body(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    with Server(sheet, ["ana"]) as server:
        answer, _ = _raw_post(server.url, {"Content-Length": str(200 << 20)}, wait=5)
        assert answer.startswith(b"HTTP/1.1 413 "), answer
    _no_traceback(server)


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    with Server(sheet, ["ana"]) as server:
        answer, _ = _raw_post(server.url, {"Transfer-Encoding": "chunked"}, chunks=1,
                              size=10_000, hang_up=True)
        assert answer == b""
        time.sleep(0.5)
        assert _get(server.url)[0] == 200  # still serving
    assert list(read_journal(sheet)) == []
    _no_traceback(server)


def test_only_a_form_and_a_case_number_of_ascii_digits_are_taken(tmp_path):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 10)
    with Server(sheet, ["ana"]) as server:
        url = urllib.parse.urlsplit(server.url)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)

        def post(case: str, content_type: str) -> tuple[int, str]:
            connection.request("POST", f"{url.path}case/{case}",
                               body="v.accuracy=3&v.clarity=3", headers={
                                   "Origin": f"http://{url.netloc}",
                                   "Content-Type": content_type})
            answer = connection.getresponse()
            text = answer.read().decode()
            if answer.getheader("connection", "").lower() == "close":
                connection.close()
            return answer.status, text

        form = "application/x-www-form-urlencoded"
        for content_type in ("text/plain; x=form-urlencoded", "text/x-form-urlencoded",
                             "application/x-www-form-urlencoded-not", "multipart/form-data"):
            assert post("1", content_type) == (400, "not a form of this page\n"), content_type
        for case in ("1_0", "+1", "%201", "1%20", "%D9%A1", "%EF%BC%91", "-1", "0", "11",
                     "1e0", "9" * 5000):
            assert post(case, form) == (404, "no such case\n"), case
            assert _get(f"{server.url}case/{case}")[0] == 404, case
        assert list(read_journal(sheet)) == []
        assert post("1", "Application/X-WWW-Form-Urlencoded; charset=UTF-8")[0] == 303
        assert post("01", form)[0] == 303
        assert _get(f"{server.url}case/10")[0] == 200
        connection.close()
    assert len(list(read_journal(sheet))) == 2
    _no_traceback(server)
