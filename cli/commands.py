"""Imports every command module so that each registers itself on the ``cli`` group."""
