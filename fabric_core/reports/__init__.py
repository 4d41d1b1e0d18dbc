"""Headless reports: runs of the model whose result is a table, a document or a verdict.

The top of the core: these modules build fabrics, run them and summarise what happened.
They may import any other core package; no core module outside ``reports`` imports them
(``tests/test_layout_graph.py`` checks it).

* ``run``: ``run_for`` (``fabtop run``) and ``summarise``, the run report of a snapshot.
* ``compare``: one scenario on several fabric profiles side by side (``fabtop compare``).
* ``storage``: the storage paths side by side (``fabtop storage-report``, docs/STORAGE.md).
* ``bringup``: the two-step IBGDA bring-up check (``fabtop check ibgda``).
* ``endpoints_doc``: the endpoint model's tables (docs/ENDPOINTS.md).
* ``record``: record a run and replay it, digest by digest (``fabtop replay``).
"""
