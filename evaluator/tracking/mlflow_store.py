"""The one module that talks to MLflow: where to log, the switches set before ``import
mlflow``, and one run logged through the public ``MlflowClient``.

**Where.** ``--tracking-uri``, else MLflow's own ``MLFLOW_TRACKING_URI``, else
``./mlruns`` in the current folder as a ``file:`` URI (created 0700: an artifact may hold
case ids, and with ``--with-results`` case text). MLflow 3.17.2 keeps its file store "in
maintenance mode" and refuses it unless ``MLFLOW_ALLOW_FILE_STORE=true``, which is set here
for a local folder (the default or one given). MLflow's own default, ``sqlite:///mlflow.db``,
needs SQLAlchemy and Alembic, which the ``mlflow`` extra (mlflow-skinny) does not install, and
with SQLAlchemy 2.1 its store warns (``SADeprecationWarning``) as it loads: the file store
works with the client alone, and ``mlflow ui``/``mlflow server`` read it (with the same
switch) or ``mlflow migrate-filestore`` moves it into a database.

**Switches** (:func:`prepare_environment`, before mlflow is imported):
``MLFLOW_DISABLE_TELEMETRY=true`` (forced; :data:`evaluator.judges.offline.MLFLOW_TELEMETRY_ENV`:
MLflow sends usage telemetry from ``import mlflow`` otherwise, and honours ``DO_NOT_TRACK``
only when it is ``true``); MLflow's HTTP retries and timeout, which by default retry 7 times
with exponential backoff (minutes against a server that is down), set to 2 retries, backoff
factor 1 and a 10 s timeout unless the environment sets them; no "View run" lines on
stdout (the CLI prints its own line, on stderr); MLflow's own log at WARNING (it sets its
logger's level at import, INFO by default; ``MLFLOW_LOGGING_LEVEL`` overrides).

MLflow is imported inside the functions (the ``mlflow`` extra): ``import evaluator`` never
imports it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evaluator.common.errors import UserError
from evaluator.judges.offline import MLFLOW_TELEMETRY_ENV

MLFLOW_EXTRA_HINT = "pip install 'evaluator[mlflow]'"
DEFAULT_FOLDER = "mlruns"
# Defaults for a tracker that is down or slow: fail in seconds (the user's own values win).
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    # MLflow sets its own logger's level at import (INFO by default): warnings only.
    "MLFLOW_LOGGING_LEVEL": "WARNING",
}
# Database stores (MLflow's SQLAlchemy store), e.g. postgresql+psycopg2://.
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
# MLflow's limits per log_batch call.
BATCH_METRICS = 1000
BATCH_PARAMS_OR_TAGS = 100
_CREDENTIALS = re.compile(r"(//)[^/@\s]+@")


class TrackingError(UserError, ValueError):
    """Logging to the tracker failed or cannot start (a user error: the server, the URI,
    credentials, the extra). One line; never case text."""


class MlflowMissing(TrackingError):
    """The ``mlflow`` extra is not installed."""


@dataclass(frozen=True)
class Destination:
    """Where a run is logged: the URI given to MLflow, and whether it is the default."""

    uri: str
    default: bool

    @property
    def shown(self) -> str:
        """The URI as printed: user and password left out."""
        return redact(self.uri)

    @property
    def local_folder(self) -> Path | None:
        """The folder of a ``file:`` (or plain path) store, else None."""
        parts = urlsplit(self.uri)
        if parts.scheme == "file":
            return Path(parts.path)
        if parts.scheme == "":
            return Path(self.uri).absolute()
        return None


def redact(text: str) -> str:
    """``text`` with the user and password of every ``scheme://user:pass@host`` cut out."""
    return _CREDENTIALS.sub(r"\1***@", text)


def mlflow_available() -> bool:
    """Whether the ``mlflow`` extra is installed (without importing it: that takes seconds)."""
    return importlib.util.find_spec("mlflow") is not None


def require_mlflow() -> None:
    """Raise :class:`MlflowMissing` naming the install command unless mlflow is installed."""
    if not mlflow_available():
        raise MlflowMissing(f"MLflow tracking needs the mlflow extra: {MLFLOW_EXTRA_HINT}")


# Stores MLflow's client reaches: a server, a folder, a database (with the full package).
KNOWN_SCHEMES = ("http", "https", "file", *DATABASE_SCHEMES, "databricks")
_HOST_PORT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*:\d+(/.*)?")


def destination(tracking_uri: str | None) -> Destination:
    """``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else ``./mlruns`` here as a ``file:``
    URI (see the module docstring). A value that is neither a URI MLflow's client knows nor
    a plain folder is refused (:class:`TrackingError`): ``host:5000`` without ``http://``
    would otherwise become a local folder of that name, and the run would never reach the
    server the user meant."""
    given = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
    if not given:
        return Destination((Path.cwd() / DEFAULT_FOLDER).as_uri(), default=True)
    uri = given.strip()
    where = "--tracking-uri" if tracking_uri else "MLFLOW_TRACKING_URI"
    shown = redact(uri)
    if _HOST_PORT.fullmatch(uri):
        raise TrackingError(f"{where} {shown!r} has no scheme: for a tracking server write "
                            f"http://{shown} (or https://)")
    scheme = urlsplit(uri).scheme.partition("+")[0].lower()
    if scheme and scheme not in KNOWN_SCHEMES:
        raise TrackingError(f"{where} {shown!r}: MLflow's client has no {scheme!r} store; "
                            "give http(s)://HOST:PORT for a server, a folder, or a database "
                            "URI (sqlite:, postgresql:, ...): see docs/mlflow.md")
    if not scheme and ":" in uri:
        raise TrackingError(f"{where} {shown!r} is neither a URI nor a folder name (a ':' "
                            "without a scheme); for a server write http(s)://HOST:PORT")
    return Destination(uri, default=False)


def prepare_environment(where: Destination) -> None:
    """Set the switches (module docstring) before mlflow is imported; if it already is
    (a Python caller imported it), its telemetry client is set up again, now disabled."""
    os.environ.update(MLFLOW_TELEMETRY_ENV)
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if where.local_folder is not None:
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    if "mlflow" in sys.modules:
        # Imported here: the mlflow extra; only when the caller already imported it.
        from mlflow.telemetry import get_telemetry_client, set_telemetry_client

        if get_telemetry_client() is not None:
            set_telemetry_client()


def _private_folder(folder: Path) -> None:
    """Create the local store's folder 0700 (MLflow would make it world-readable)."""
    if not folder.exists():
        try:
            folder.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise TrackingError(f"cannot create the MLflow store {folder}: {exc.strerror}; "
                                "run where you can write, or give --tracking-uri") from None


def _check_database_client(where: Destination) -> None:
    """A database URI needs SQLAlchemy, which the client-only extra lacks: say so plainly
    (MLflow's own error talks about its model registry)."""
    scheme = urlsplit(where.uri).scheme.partition("+")[0]
    if scheme in DATABASE_SCHEMES and importlib.util.find_spec("sqlalchemy") is None:
        raise TrackingError(
            f"the tracking URI {where.shown} is a database, which needs the full mlflow "
            "package (SQLAlchemy; the mlflow extra installs the client only): pip install "
            "mlflow==3.17.2, or log to a server (--tracking-uri http://...) or a folder")


def _exceptions() -> tuple[type[BaseException], ...]:
    """What MLflow's client raises for a tracker that fails (not for a bug of ours)."""
    # Imported here: the mlflow extra (requests comes with it).
    import requests
    from mlflow.exceptions import MlflowException

    return MlflowException, requests.RequestException, OSError


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def describe_failure(exc: BaseException, where: Destination) -> str:
    """One line for a tracker failure: what happened at which URI and what to do."""
    # Imported here: the mlflow extra (requests comes with it).
    import requests

    again = "then run `evaluator log` on the results file again"
    chain = _chain(exc)
    if any(isinstance(e, (requests.ConnectionError, requests.Timeout)) for e in chain):
        kind = ("timed out" if any(isinstance(e, requests.Timeout) for e in chain)
                else "connection failed")
        return (f"cannot reach the MLflow tracking server at {where.shown} ({kind}): check "
                f"that it is running and the URI (--tracking-uri or MLFLOW_TRACKING_URI), "
                f"{again}")
    code = str(getattr(exc, "error_code", ""))
    if code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
        return (f"the MLflow tracking server at {where.shown} refused the request ({code}): "
                "check the credentials (MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, "
                f"or MLFLOW_TRACKING_TOKEN) and your permissions there, {again}")
    if isinstance(exc, OSError) and not isinstance(exc, requests.RequestException):
        return (f"MLflow store {where.shown}: {exc.strerror or type(exc).__name__}"
                f"{f' ({exc.filename})' if exc.filename else ''}; {again}")
    message = " ".join(str(getattr(exc, "message", exc)).split())
    if len(message) > 300:
        message = message[:297] + "..."
    return f"MLflow at {where.shown}: {redact(message) or type(exc).__name__}; {again}"


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]


@dataclass(frozen=True)
class LoggedIds:
    """The run MLflow created: its id, its experiment's id and where to see it."""

    run_id: str
    experiment_id: str
    location: str


def _experiment_id(client: Any, name: str) -> str:
    # Imported here: the mlflow extra.
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return str(client.create_experiment(name))
        except MlflowException as exc:  # created meanwhile by another run being logged
            if getattr(exc, "error_code", "") != "RESOURCE_ALREADY_EXISTS":
                raise
            found = client.get_experiment_by_name(name)
    if found.lifecycle_stage != "active":
        raise TrackingError(f"the MLflow experiment {name!r} was deleted: restore it in "
                            "MLflow, or choose another name with --experiment")
    return str(found.experiment_id)


def _location(where: Destination, experiment_id: str, run_id: str) -> str:
    folder = where.local_folder
    if folder is not None:
        return str(folder / experiment_id / run_id)
    if urlsplit(where.uri).scheme in ("http", "https"):
        parts = urlsplit(where.shown)
        base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"{where.shown} (experiment {experiment_id}, run {run_id})"


def log_to_mlflow(where: Destination, experiment: str, run_name: str, *,
                  params: Mapping[str, str], metrics: Mapping[str, float],
                  tags: Mapping[str, str],
                  artifacts: Sequence[tuple[Path, str | None]]) -> LoggedIds:
    """Log one finished run: create (or find) ``experiment``, create a run named
    ``run_name`` with ``tags``, log ``params`` and ``metrics`` (step 0) in batches, upload
    each ``(file, artifact folder)`` of ``artifacts`` and mark the run FINISHED. A failure
    after the run was created marks it FAILED (when the tracker still answers). Raises
    :class:`TrackingError` (one line) for a tracker that cannot be reached, refuses or
    fails, and :class:`MlflowMissing` without the extra."""
    require_mlflow()
    _check_database_client(where)
    prepare_environment(where)
    if where.local_folder is not None:
        _private_folder(where.local_folder)
    # Imported here: the mlflow extra, after prepare_environment (telemetry, retries).
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    failures = _exceptions()
    run_id: str | None = None
    client: Any = None
    try:
        client = MlflowClient(tracking_uri=where.uri)
        experiment_id = _experiment_id(client, experiment)
        run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags))
        run_id = run.info.run_id
        stamp = int(time.time() * 1000)
        metric_rows = [Metric(key, float(value), stamp, 0) for key, value in metrics.items()]
        param_rows = [Param(key, value) for key, value in params.items()]
        for batch in _batches(metric_rows, BATCH_METRICS):
            client.log_batch(run_id, metrics=list(batch))
        for batch in _batches(param_rows, BATCH_PARAMS_OR_TAGS):
            client.log_batch(run_id, params=list(batch))
        for path, folder in artifacts:
            client.log_artifact(run_id, str(path), artifact_path=folder)
        client.set_terminated(run_id, "FINISHED")
    except TrackingError:
        raise
    except ImportError as exc:  # a database URI without SQLAlchemy (the client-only extra)
        raise TrackingError(
            f"the tracking URI {where.shown} needs {exc.name or 'a module'}, which the mlflow "
            "extra (mlflow-skinny, the client) does not install: pip install mlflow (the full "
            "package) for a database store, or log to a server (--tracking-uri http://...) or "
            "a folder") from None
    except failures as exc:
        message = describe_failure(exc, where)
        if run_id is not None:
            try:
                client.set_terminated(run_id, "FAILED")
                message += f" (MLflow run {run_id} is marked FAILED)"
            except failures:
                pass
        raise TrackingError(message) from None
    return LoggedIds(run_id, experiment_id, _location(where, experiment_id, run_id))
