"""Filters and what they prune, all pure (no I/O): filters in DNF and the Arrow row filter
(``filters``), file pruning from statistics and partition values (``pruning``), vectorized pruning
over a segment table (``segment_pruning``), merge-key checks, pruning and matching (``merge_keys``),
and mapping rows to a run's partition keys by column values (``row_locator``).

May import: ``errors``, ``format`` and each other. Never ``io``, ``commit``, ``ops``, the facade or a store.
"""
