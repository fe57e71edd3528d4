"""The ``dagster-parquet-dataset`` command line: look inside datasets and keep them healthy.

Run ``dagster-parquet-dataset --help`` (or ``python -m dagster_parquet_dataset --help``).
It uses the dataset layer only, so it works with a plain install (``pip install
dagster-parquet-dataset``, plus the ``s3`` extra for ``s3://`` stores).
"""

from ._main import main

__all__ = ["main"]
