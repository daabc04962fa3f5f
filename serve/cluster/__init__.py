"""Several servers behind HAProxy: ``python -m serve.cluster up --replicas 3`` (docs/ARCHITECTURE.md)."""
