"""A local mirror for tests and benchmarks: both source layouts, served on 127.0.0.1.

``layouts.build_site(pairs)`` generates the pages of both layouts (``link_site.build_link_site``
a small site for the generic spider); ``server.MirrorServer(site)`` serves them with a real
HTTP server. ``site.expected[spider]`` is the set of pairs a correct crawl of that layout
finds: everything on the allowed pages, once. The pairs are hand-written
(``pairs.HAND_PAIRS``), or a sample of the corpus read at run time (``pairs.corpus_pairs``);
no corpus text is in the repo.
"""
