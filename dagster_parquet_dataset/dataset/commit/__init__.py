"""Committing a new version: the one transaction (``transaction``: the live version past a tombstone,
retention, the first write's take-back, clean-up), every conditional write of the package
(``conditional``: reading and swapping ``manifest.json``, put-if-absent), the tombstone and the one
routine that swaps it in (``tombstone``), the manifest a commit makes (``new_version``), its retry
policy and backoff (``retry``), the expected owner (``owner``), which files clean-up may delete
(``nested``), the segments a commit writes (``segment_commit``), the checks of externally written
part entries (``external_entries``) and the live version a write may begin from, read once (``live``).

May import: ``errors``, ``storage.base``, ``dataset.manifest``, ``dataset._dataset_options``,
``format``, ``expressions``, ``io`` and each other. Never ``ops`` or the facade.
"""
