"""Committing a new version: the one transaction (``transaction``: reading the live version,
conditional writes of ``manifest.json``, retention, tombstones, clean-up), its retry policy and
backoff (``retry``), the expected owner (``owner``), which files clean-up may delete (``nested``),
the segments a commit writes (``segment_commit``) and the checks of externally written part entries
(``external_entries``).

May import: ``errors``, ``storage.base``, ``dataset.manifest``, ``dataset._dataset_options``,
``format``, ``expressions``, ``io`` and each other. Never ``ops`` or the facade.
"""
