"""`make cluster` / `python -m serve.cluster up --replicas 3`: the site as N replicas of
``python -m serve`` behind HAProxy on http://127.0.0.1:8080, sharing one PostgreSQL for the
feedback and one Redis for the rate limits and a shared result cache, until Ctrl-C.

Each replica is a whole server (its decode workers, its result cache, its /metrics) on its own
port; HAProxy checks /api/v1/health, takes a dead or degraded replica out of rotation and sends
a request a dead replica never answered to another. A replica that exits is started again.
Without --database-url / --redis-url a PostgreSQL (data kept in FOLDER/postgres) and a
redis-server are started too. The other server settings come from DUILIAN_SERVE_* as for
`make serve` (DUILIAN_SERVE_ADMIN_TOKEN, DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE, ...)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from data.paths import work_dir
from serve.__main__ import port
from serve.cluster.deployment import Cluster, ClusterSetup
from serve.logs import LogSetup, configure_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.cluster", description=__doc__)
    parser.add_argument("verb", choices=["up"], help="up: start everything, run until Ctrl-C")
    parser.add_argument("--replicas", type=int, default=3, help="servers behind the proxy (default 3)")
    parser.add_argument("--port", type=port, default=8080, help="the proxy's port (default 8080)")
    parser.add_argument(
        "--replica-port", type=port, default=8101, help="the first replica's port, then +1 (default 8101)"
    )
    parser.add_argument("--model", type=Path, help="model bundle folder (default models/default)")
    parser.add_argument("--database-url", help="a PostgreSQL to share (default: one of its own)")
    parser.add_argument("--redis-url", help="a Redis to share (default: a redis-server of its own)")
    parser.add_argument(
        "--folder", type=Path, help="configuration, logs, PostgreSQL data (default work/cluster)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.replicas <= 32:
        parser.error("--replicas: 1 to 32")
    configure_logging(LogSetup("info", False))

    folder = args.folder or work_dir() / "cluster"
    setup = ClusterSetup(
        folder=folder,
        replicas=args.replicas,
        port=args.port,
        replica_ports=[args.replica_port + i for i in range(args.replicas)],
        model=args.model,
        database_url=args.database_url,
        redis_url=args.redis_url,
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        cluster = Cluster(setup).start()
    except (OSError, RuntimeError) as e:
        print(f"cluster did not start: {e}", file=sys.stderr)
        return 2
    try:
        print(f"site: {cluster.url}  (HAProxy, configuration {folder / 'haproxy.cfg'})")
        for r in cluster.replicas:
            print(f"replica {r.name}: {r.url}  (log {r.log}, metrics {r.url}/metrics)")
        store = f"PostgreSQL in {folder / 'postgres'}" if cluster.postgres else "the one given"
        print(f"feedback store: {store}")
        redis = "a redis-server of its own" if cluster.redis else "the Redis given"
        print(f"rate limits, shared result cache: {redis}")
        print("Ctrl-C stops everything", flush=True)
        while not done.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
