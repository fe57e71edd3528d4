"""``python -m dagster_parquet_dataset``: the ``dagster-parquet-dataset`` command line."""

from .cli import main

raise SystemExit(main())
