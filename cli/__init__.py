"""The ``dotattn`` command line (installed as the subpackage ``dotattn.cli``)."""
