"""Write, read back and print a dataset on a local store (the README's run command).

Replaced by ``dagster dev`` on this project once the Dagster example lands.
"""

from __future__ import annotations

import os

import pyarrow as pa

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def main() -> None:
    datasets = ParquetDatasetStore(LocalStore(ROOT), max_rows_per_file=2)
    orders = pa.table(
        {
            "order_id": [1, 2, 3, 4, 5],
            "customer": ["ada", "grace", "ada", "linus", "grace"],
            "amount": [12.5, 99.0, 7.25, 42.0, 3.5],
        }
    )
    manifest = datasets.write_dataset(orders, "silver/orders", overwrite=True, run_id="quickstart")
    back = datasets.read_dataset("silver/orders", columns=["customer", "amount"])
    print(f"wrote version {manifest.version} of 'silver/orders' under {ROOT}: {manifest.parts}")
    print(back.to_pandas().to_string(index=False))
    print(open(os.path.join(ROOT, "silver", "orders", "manifest.json")).read())


if __name__ == "__main__":
    main()
