"""Parts in and out of a store: encoding Arrow data into Parquet parts (``encode``), verified reads of
the parts a manifest selects (``read_parts``), lazy ``pyarrow.dataset`` scans (``scan``), the one check
of a part against its manifest entry (``part_check``), verifying a version (``verify_parts``), dataset
keys against their store (``key_checks``) and the bounded I/O thread pool (``parallel``).

May import: ``errors``, ``storage.base``, ``dataset.manifest``, ``format``, ``expressions`` and each
other. Never ``commit``, ``ops`` or the facade.
"""
