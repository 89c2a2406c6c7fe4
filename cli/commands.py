"""Imports every command module so that each registers itself on the ``cli`` group."""
from dotattn.cli import erm  # noqa: F401
from dotattn.cli import solve  # noqa: F401
