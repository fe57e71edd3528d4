"""The on-storage format of a dataset, pure of any operation: names under a dataset's key (``layout``),
segments (``segments``), schema rules (``schema``), partition values (``partition``), per-file
statistics (``stats``), the comparable domain of values (``values``) and the data version
(``data_version``). The manifest itself is the public :mod:`dagster_parquet_dataset.dataset.manifest`.

May import: ``errors``, ``storage.base``, ``dataset.manifest`` and each other; ``segments`` also
imports ``expressions.segment_pruning`` for the min/max columns a segment carries. Never ``io``,
``commit``, ``ops`` or the facade.
"""
