"""Verify output folders of every kind: the face of :mod:`dotattn.core.integrity` with every
package's folder kinds registered (``dotattn verify`` uses it).

Kinds: ``phase-diagram`` and ``rsb`` (:mod:`dotattn.positional_semantic.integrity`), ``erm`` and ``restarts``
(:mod:`dotattn.erm.integrity`), ``comparison``, ``alpha-c`` and ``variants`` (:mod:`dotattn.theory_vs_erm.integrity`),
``aim-state-evolution`` and ``aim-algorithms`` (:mod:`dotattn.aim.integrity`), ``paths-theory`` and
``paths-sample`` (:mod:`dotattn.paths.integrity`).
"""

from __future__ import annotations

from dotattn.aim import integrity as _aim  # noqa: F401  (each import registers its package's kinds)
from dotattn.core.integrity import (
    check_output_folder,
    folder_kind,
    folders_with_manifest,
    registered_kinds,
    seal_folder,
    verify_folder,
)
from dotattn.erm import integrity as _erm  # noqa: F401
from dotattn.paths import integrity as _paths  # noqa: F401
from dotattn.positional_semantic import integrity as _positional_semantic  # noqa: F401
from dotattn.theory_vs_erm import integrity as _theory_vs_erm  # noqa: F401

__all__ = [
    "verify_folder",
    "seal_folder",
    "folder_kind",
    "folders_with_manifest",
    "registered_kinds",
    "check_output_folder",
]
