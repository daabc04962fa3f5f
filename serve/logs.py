"""Log lines of the server and of its decode workers: one format for both, each line with the
request id it was written for.

The request id lives in a context variable: the request middleware (serve.observability) sets
it, every line logged while that request is handled carries it (the event loop's task, the
thread-pool threads FastAPI runs sync routes on, which copy the context), the decode batcher
sets it on its thread to the ids of the batch it decodes, and the decode workers set it from
what the server sends along with each batch (``request_id`` in ``serve.pool``).

``LogSetup`` is picklable: the server passes it to each decode worker process, which calls
``configure_logging`` with it before it loads its model.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TextIO

LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]
TRACE = 5  # uvicorn's level below debug
NO_REQUEST = "-"
REQUEST_ID: ContextVar[str] = ContextVar("request_id", default=NO_REQUEST)

# What a client's X-Request-ID may be to be taken as it is: the characters of UUIDs, hex and
# the usual trace ids, at most 128 of them. Anything else (spaces, quotes, control characters,
# non-ASCII, a kilobyte) would go into every log line and back in a header: a new one is made.
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def new_request_id() -> str:
    return uuid.uuid4().hex


def sane_request_id(value: str | None) -> bool:
    return value is not None and SANE_REQUEST_ID.fullmatch(value) is not None


class RequestIdFilter(logging.Filter):
    """Gives every record a ``request_id`` attribute (the formats name it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id,
    process (pid) and process_name (MainProcess, or SpawnProcess-N for a decode worker), and
    the traceback as ``exc_info`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", NO_REQUEST),
            "process": record.process,
            "process_name": record.processName,
        }
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is written (as logging's last resort
    does), so a replaced stderr (a test's capture) is never written to after it is closed."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr


@dataclass(frozen=True)
class LogSetup:
    level: LogLevel = "info"
    json: bool = False

    @property
    def numeric_level(self) -> int:
        return TRACE if self.level == "trace" else logging.getLevelNamesMapping()[self.level.upper()]


def configure_logging(setup: LogSetup) -> None:
    """One handler on the root logger, to stderr, in the chosen format, with the request id;
    the handler this function installed before (if any) is replaced, other handlers are left
    as they are. Loggers that propagate (uvicorn's too, when uvicorn is given no log config of
    its own) write through it, and so do Python's warnings."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if setup.json else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(setup.numeric_level)
    logging.captureWarnings(True)  # Python's warnings as log lines too (py.warnings), not bare text
