"""The shared core every theory uses and that knows no theory: input validation and its error type
(:mod:`~dotattn.core.validation`), the status vocabulary (:mod:`~dotattn.core.status`), the row codec
(:mod:`~dotattn.core.rows`), provenance and atomic files (:mod:`~dotattn.core.io`), the runner (process
pool, Dask, signals, locks, progress: :mod:`~dotattn.core.runner`) and the integrity registry of output
folders (:mod:`~dotattn.core.integrity`). Nothing in ``dotattn.core`` imports a theory."""
