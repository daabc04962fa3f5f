"""The service's fixtures: the site's tiny real bundles (tests/serve/conftest.py)."""

from tests.serve.conftest import bad_bundle, bundle_a, vocab

__all__ = ["bad_bundle", "bundle_a", "vocab"]
