"""One module per dataset operation, each over the one transaction (:mod:`.._transaction`).

None of them imports the facade (:class:`~..store.ParquetDatasetStore`): they take a
:class:`~.._options.DatasetOptions` and the operation's arguments.
"""
