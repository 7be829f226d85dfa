"""The settings of a server judge in models.yaml: an OpenAI-compatible HTTP server the site
already runs (``vllm serve``, SGLang, llama.cpp's server, TGI). Imports nothing heavy.

The address is checked by the PHI guard (:mod:`evaluator.judges.backends.server_guard`)
when the file is read; the API key is never in the file: an environment variable's name or
a file readable by its owner alone, read when the judge starts (:meth:`ServerSettings.api_key`).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from evaluator.common.errors import UserError
from evaluator.judges.backends.server_guard import (
    ServerAddress,
    check_allow_host,
    check_server_url,
)
from evaluator.judges.models_file import JudgeSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# A key file larger than this is not an API key.
MAX_KEY_BYTES = 4096


class ApiKeyRefused(UserError, ValueError):
    """The judge's API key cannot be read as its settings say (the message names where the
    key should be, never the key)."""


class ServerSettings(JudgeSpec):
    """A judge served over HTTP (evaluator.judges.backends.server_backend)."""

    NOT_TAKEN: ClassVar[dict[str, str]] = {
        "api_key": "a key is never written in models.yaml: name an environment variable "
                   "(api_key_env) or a file only you can read (api_key_file)",
        "engine": "engine holds vLLM's engine settings; a server judge's engine is the "
                  "server's",
        "fill_threads": "fill_threads sets the transformers backend's mask fill; the server "
                        "constrains its own decoding",
        "threads": "threads sets torch's CPU threads; a server judge computes on its server",
    }
    RUNS_ON: ClassVar[str] = "its server"
    # A refused api_key (or any other error) never echoes what was written.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)
    #: The settings that decide a verdict: the served model and how the schema is sent;
    #: :meth:`identity` adds the server's address(es).
    IDENTIFYING: ClassVar[tuple[str, ...]] = ("backend", "max_model_len", "system_role",
                                              "served_model", "structured_output")

    # One server (base_url), or the replicas of one served model (base_urls), sharing the
    # requests: e.g. http://127.0.0.1:8000/v1 (the path up to /chat/completions).
    base_url: str | None = None
    base_urls: list[str] | None = Field(default=None, min_length=1, max_length=64)
    # The model name the server serves (its /v1/models id, vllm serve's --served-model-name).
    served_model: str = Field(min_length=1, max_length=256)
    api_key_env: str | None = None
    api_key_file: Path | None = None
    ca_bundle: Path | None = None
    timeout_s: float = Field(default=300.0, gt=0.0, le=3600.0)
    connect_timeout_s: float = Field(default=10.0, gt=0.0, le=300.0)
    # Requests open at once (over all replicas); default: the run's batch size.
    in_flight: int | None = Field(default=None, ge=1, le=1024)
    retries: int = Field(default=4, ge=0, le=10)
    allow_hosts: list[str] = Field(default_factory=list, max_length=64)
    # An HTTP(S) proxy to reach the server through, checked as the server is; None: none at
    # all (never one from the environment).
    proxy: str | None = None
    # How the schema goes to the server: vLLM's own ``structured_outputs`` field, or the
    # OpenAI ``response_format`` (json_schema) other servers take.
    structured_output: Literal["vllm", "openai"] = "vllm"
    # Top log-probabilities asked for at every token, for score distributions (0: none;
    # vLLM's default --max-logprobs is 20), and the least coverage a distribution read from
    # them must have to be written (evaluator.judges.backends.server_logprobs).
    top_logprobs: int = Field(default=20, ge=0, le=20)
    min_coverage: float = Field(default=0.99, ge=0.0, le=1.0)

    @field_validator("allow_hosts")
    @classmethod
    def _allow_hosts(cls, hosts: list[str]) -> list[str]:
        return [check_allow_host(host) for host in hosts]

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, name: str | None) -> str | None:
        if name is not None and not _ENV_NAME.match(name):
            raise ValueError("api_key_env names an environment variable (letters, digits, "
                             "underscores), not the key itself")
        return name

    @field_validator("api_key_file", "ca_bundle")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_absolute():
            raise ValueError("give an absolute path")
        return path

    @model_validator(mode="after")
    def _server_settings(self) -> ServerSettings:
        if (self.base_url is None) == (self.base_urls is None):
            raise ValueError("a server judge needs exactly one of base_url (one server) or "
                             "base_urls (replicas of one served model)")
        if self.api_key_env is not None and self.api_key_file is not None:
            raise ValueError("give at most one of api_key_env and api_key_file")
        for key, default in (("path", None), ("embedded", None), ("dtype", "auto"),
                             ("device", "auto")):
            if getattr(self, key) != default:
                raise ValueError(f"a server judge's model, dtype and device are its "
                                 f"server's: remove {key!r} from this judge")
        urls = self.urls()
        if len(set(urls)) != len(urls):
            raise ValueError("base_urls names a server twice")
        self.addresses()
        if self.proxy is not None:
            check_server_url(self.proxy, self.allow_hosts, setting="proxy")
        return self

    def urls(self) -> list[str]:
        """The base URLs as written: one, or the replicas."""
        return [self.base_url] if self.base_url is not None else list(self.base_urls or ())

    def addresses(self) -> list[ServerAddress]:
        """Every base URL checked by the PHI guard (raises ``AddressRefused``)."""
        return [check_server_url(url, self.allow_hosts,
                                 setting="base_url" if self.base_url else f"base_urls[{i}]")
                for i, url in enumerate(self.urls())]

    def identity(self) -> dict[str, Any]:
        """The common settings, the served model, how the schema is sent and the servers'
        addresses (sorted: replicas share requests in any order), so that two servers never
        share a resume key."""
        return {**super().identity(),
                "servers": sorted(address.url for address in self.addresses())}

    def api_key(self) -> str | None:
        """The API key (None: none configured), read now from the environment variable or
        the key file. A key file must be a regular file owned by this user that no one else
        may read or write (mode 0600 or stricter); otherwise :class:`ApiKeyRefused`."""
        if self.api_key_env is not None:
            value = os.environ.get(self.api_key_env, "").strip()
            if not value:
                raise ApiKeyRefused(f"api_key_env: the environment variable "
                                    f"{self.api_key_env} is not set (or empty)")
            return value
        if self.api_key_file is None:
            return None
        return read_key_file(self.api_key_file)


def read_key_file(path: Path) -> str:
    """The key in ``path`` (stripped), after checking that only its owner, this user, can
    read or change it; a symbolic link, another owner or a mode looser than 0600 is
    refused in one line."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ApiKeyRefused(f"api_key_file {path}: cannot open it ({exc.strerror}; a "
                            "symbolic link is refused)") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ApiKeyRefused(f"api_key_file {path}: not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise ApiKeyRefused(f"api_key_file {path}: owned by another user; the key file "
                                "must be yours")
        if info.st_mode & 0o077:
            raise ApiKeyRefused(f"api_key_file {path}: mode {stat.S_IMODE(info.st_mode):04o} "
                                "lets others read or change it; chmod 600 it")
        data = handle.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        raise ApiKeyRefused(f"api_key_file {path}: larger than {MAX_KEY_BYTES} bytes; not a "
                            "key")
    try:
        key = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ApiKeyRefused(f"api_key_file {path}: not an ASCII key") from None
    if not key or any(ch.isspace() or not ch.isprintable() for ch in key):
        raise ApiKeyRefused(f"api_key_file {path}: empty, or more than one line")
    return key
