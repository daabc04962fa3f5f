"""The service's settings: one pydantic-settings class, read from ``DUILIAN_SERVE_*`` variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from data.paths import ROOT, data_dir, default_model_dir, graph_cache_dir, work_dir
from duilian.inputs import MAX_ASKED, MAX_CHARS, OVERSAMPLE
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, Runtime
from serve.db import store_url
from serve.logs import LogLevel, LogSetup


def _default_database_url() -> str:
    return f"sqlite:///{work_dir() / 'feedback.db'}"


def _default_known_pairs() -> Path | None:
    """The data stage's training pairs when they exist: the source of the known lower lines."""
    path = data_dir() / "train.tsv"
    return path if path.is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DUILIAN_SERVE_", protected_namespaces=())

    model_dir: Path = Field(default_factory=default_model_dir, description="the model bundle to serve")
    database_url: str = Field(
        default_factory=_default_database_url,
        description="SQLAlchemy URL of the feedback store: sqlite:///PATH (default work/feedback.db), or "
        "postgresql://user:password@host:port/database when several servers share one store",
    )
    known_pairs: Path | None = Field(
        default_factory=_default_known_pairs,
        description="upper<TAB>lower training pairs (plain or .gz) giving the known lower lines "
        "instead of the bundle's; None: the bundle's",
    )
    sensitive_words: Path | None = Field(
        default=None, description="an extra sensitive-word list (one a line)"
    )
    sensitive_allow: Path | None = Field(default=None, description="allow-list for the extra word list")
    banners: Path | None = Field(
        default=None,
        description="the 横批 table (banners.npz: make data writes work/data/banners.npz, python -m "
        "data.banners builds one from the corpora); None: the served bundle's, else no 横批",
    )
    web_dir: Path = ROOT / "web"

    max_chars: int = Field(default=MAX_CHARS, description="longest upper line accepted")
    max_candidates: int = Field(default=MAX_ASKED, description="most candidates one request may ask for")
    oversample: int = Field(
        default=OVERSAMPLE,
        description="extra candidates asked of the decoder for filtered ones (more if still short)",
    )
    max_body_bytes: int = Field(default=4096, description="larger request bodies are refused with 413")
    rate_limit_per_minute: float = Field(
        default=120, description="API requests per client and minute; 0 turns it off"
    )
    rate_limit_burst: int = Field(
        default=30, description="requests a client may send at once before it is limited"
    )
    cost_per_minute: float = Field(
        default=9000,
        ge=0,
        description="decode budget per client and minute, in characters × candidates (a 7-character "
        "line with 10 candidates costs 70, a 100-character one 1,000; serve/admission.py); over it "
        "429 with Retry-After; 0 turns it off",
    )
    cost_burst: int = Field(
        default=3000, ge=1, description="decode budget a client may spend at once (characters × candidates)"
    )
    long_line_chars: int = Field(
        default=33,
        ge=0,
        description="lines this long or longer (33: those decoded segment by segment, several times "
        "slower) are decoded in the long lane, behind shorter lines; 0: no lane",
    )
    long_lane_workers: int = Field(
        default=1,
        ge=1,
        description="decode threads that may decode long lines at once (fewer than decode_concurrency: "
        "the others keep to short lines)",
    )
    long_lane_pending: int = Field(
        default=4, ge=1, description="long lines waiting at most; beyond, 503 with Retry-After"
    )
    cache_size: int = Field(
        default=2048, description="generate results kept per model (beam search is deterministic)"
    )
    int8: bool = Field(default=SERVE_INT8, description="decode with int8 linear layers (faster on a CPU)")
    runtime: Runtime = Field(
        default=SERVE_RUNTIME,
        description="what runs the models: eager PyTorch, or their graphs exported to ONNX Runtime (faster)",
    )
    graph_cache: Path | None = Field(
        default_factory=graph_cache_dir,
        description="folder where the decode workers keep the ONNX graphs they export (and quantise), "
        "by the model's weights, the code and the library versions, so that a restart or a reload of "
        "the same bundle reads them instead of exporting again (default work/cache/onnx); empty or "
        "'off': none, every start exports",
    )
    torch_threads: int = Field(
        default=1, description="intra-op threads per decode; requests run side by side"
    )
    decode_concurrency: int = Field(default=2, description="decoding worker threads")
    decode_processes: int = Field(
        default=2,
        ge=0,
        description="worker processes that decode, each with its own copy of the model (0: the "
        "decoding threads run the model in the server process)",
    )
    worker_restart_wait: float = Field(
        default=30.0,
        gt=0,
        description="seconds a request waits for the decode workers to be restarted after one died, "
        "before it is answered 503",
    )
    max_batch: int = Field(default=16, description="most lines of one length decoded in one beam search")
    max_pending: int = Field(default=256, description="decodes waiting at most; beyond, requests get 503")
    admin_token: str | None = Field(
        default=None, description="token for POST /api/v1/admin/reload; None: disabled"
    )
    admin_rate_limit_per_minute: float = Field(
        default=6, description="admin requests per client and minute (tokens tried included); 0: off"
    )
    admin_rate_limit_burst: int = Field(default=5, description="admin requests a client may send at once")
    redis_url: str | None = Field(
        default=None,
        description="redis://host:port/db holding the rate limits' buckets, shared by every server "
        "given the same URL (replicas behind a load balancer: one client, one limit); None "
        "(default): each server limits in its own memory",
    )
    shared_cache: bool = Field(
        default=False,
        description="keep generate answers in the Redis of redis_url too, for a day, shared by every "
        "server given it (a second level behind each one's own result cache: replicas behind a load "
        "balancer)",
    )
    trusted_proxies: str = Field(
        default="",
        description="comma-separated addresses of reverse proxies whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed ('*': any); empty (default): none, the client is the socket peer",
    )
    log_level: LogLevel = Field(
        default="info", description="the least level logged (python -m serve --log-level)"
    )
    log_json: bool = Field(
        default=False,
        description="log one JSON object per line (time, level, logger, message, request_id, process), "
        "in the server and its decode workers alike; else plain text lines, with the request id too",
    )
    metrics: bool = Field(
        default=True, description="serve Prometheus metrics at GET /metrics (False: no such endpoint, 404)"
    )
    metrics_token: str | None = Field(
        default=None,
        description="if set, GET /metrics wants the header Authorization: Bearer <token> (else 401); "
        "None: anyone who reaches the server may read the metrics",
    )

    def log_setup(self) -> LogSetup:
        return LogSetup(self.log_level, self.log_json)

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, level: object) -> object:
        return level.lower() if isinstance(level, str) else level

    @field_validator("graph_cache", mode="before")
    @classmethod
    def _no_cache(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "off", "none"):
            return None
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str | None) -> str | None:
        if url and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("the Redis URL must start with redis://, rediss:// or unix://")
        return url or None  # empty: none

    @model_validator(mode="after")
    def _shared_needs_redis(self) -> Settings:
        if self.shared_cache and not self.redis_url:
            raise ValueError("shared_cache needs redis_url: the Redis the servers share")
        return self

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: str) -> str:
        store_url(url)  # ValueError: a clear message at start-up, not a trace at the first post
        return url


def settings_problems(error: ValidationError) -> str:
    """One line per bad setting, without the value given (a database URL may hold a password)."""
    return "\n".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
