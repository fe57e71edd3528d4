"""One module per dataset operation, each committing through the one transaction (:mod:`..commit.transaction`);
write, overwrite, append and merge compose the one write pipeline (:mod:`.write_pipeline`).

None of them imports the facade (:class:`~..store.ParquetDatasetStore`): they take a
:class:`~.._dataset_options.DatasetOptions` and the operation's arguments.

May import: ``errors``, ``storage.base``, ``dataset.manifest``, ``dataset._dataset_options``,
``format``, ``expressions``, ``io``, ``commit`` and each other. Never the facade.
"""
