"""The throwaway PostgreSQL of the feedback store's tests: ``serve.cluster.postgres``, which the
cluster deployment (python -m serve.cluster) runs too."""

from serve.cluster.postgres import USER, LocalPostgres, postgres_bindir

__all__ = ["USER", "LocalPostgres", "postgres_bindir"]
