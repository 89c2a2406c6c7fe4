"""Reading the ``paths images`` folders of a many-networks study and writing its output folder
(``dotattn paths networks``).

Input: every finished ``paths-images`` folder below a root (any layout; ``benchmarks/paths_networks_study.sh``
writes ``ROOT/w{width}/seed{s}/``). :func:`plan_networks` reads what each folder was made for and refuses
(ParameterError, one line) folders that differ in anything but the trained network's training seed, width and
query/key dimension, a (width, training seed) found twice, a width with two query/key dimensions, or no folder;
:func:`read_networks` then verifies every folder (:func:`dotattn.core.integrity.verify_folder`, kind
``paths-images``, ``strict``) before it reads its summary.

Output (:func:`write_networks`): ``networks.csv`` (one row per network and set), ``heads.csv`` (every head of every
network: score, rank, drops), ``claims.csv`` (per set and size: mean, se, n; mean ρ and pooled p), ``summary.json``
(provenance, ``networks``, ``claims`` with the verdicts and the rule), one figure per claim, a byte-for-byte copy of
each network's summary.json (``network_w{width}_seed{seed}.json``: what ``dotattn verify --strict`` recomputes the
analysis from; its SHA-256 is the one the network's own manifest lists) and ``manifest.json``. The folder kind
``paths-networks`` is registered in :mod:`dotattn.paths.integrity`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotattn.core.integrity import first_difference, folder_kind, folders_with_manifest, meta_parameters, verify_folder
from dotattn.core.io import (
    MANIFEST_NAME,
    IntegrityError,
    atomic_write_bytes,
    provenance,
    read_json_if_valid,
    save_figure,
    write_csv,
    write_json,
    write_manifest,
)
from dotattn.core.validation import ParameterError
from dotattn.paths.integrity import IGNORED, VARYING, network_file, shared_settings
from dotattn.paths.networks import (
    CLAIM_COLUMNS,
    HEAD_COLUMNS,
    NETWORK_COLUMNS,
    HeadRow,
    NetworkResult,
    NetworksStudy,
    head_rows,
    network_results,
)

__all__ = [
    "VARYING",
    "IGNORED",
    "SHARED_SUMMARY_KEYS",
    "NETWORKS_FILES",
    "NetworkFolder",
    "NetworksPlan",
    "network_file",
    "shared_settings",
    "plan_networks",
    "read_networks",
    "write_networks",
]

SHARED_SUMMARY_KEYS: tuple[str, ...] = (
    "split",
    "counts",
    "tokens",
    "paths",
    "head_scores_N",
    "temperature_selected_on",
)
"""What every folder's summary.json must hold alike besides its parameters: the character split (with the class
names), the episode counts, the tokens, the paths and the width of the head scores."""
NETWORKS_FILES: tuple[str, ...] = ("networks.csv", "summary.json", "heads.csv", "claims.csv")
FIGURES: tuple[str, ...] = ("claim1_networks.png", "claim2_networks.png")


@dataclass(frozen=True)
class NetworkFolder:
    """One ``paths images`` folder: where it is, its trained network's ``width``, ``qk_dim`` and ``train_seed``, its
    summary.json (as read, not yet verified) and the SHA-256 its manifest lists per file."""

    path: Path
    width: int
    qk_dim: int
    train_seed: int
    summary: dict[str, Any]
    hashes: dict[str, str]


@dataclass(frozen=True)
class NetworksPlan:
    """The folders of one study (sorted by width, then training seed) and the settings they share."""

    folders: tuple[NetworkFolder, ...]
    settings: dict[str, Any]
    root: Path


def _network_folder(path: Path) -> NetworkFolder:
    try:
        params = meta_parameters(path / "summary.json")
    except IntegrityError as err:
        raise ParameterError(f"--runs: {err}") from None
    summary = read_json_if_valid(path / "summary.json")
    man = read_json_if_valid(path / MANIFEST_NAME)
    gd = params.get("gd")
    try:
        width, qk, seed = int(gd["N"]), int(gd["qk_dim"]), int(gd["seed"])  # type: ignore[index]
        hashes = {name: str(e["sha256"]) for name, e in man["files"].items()}  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise ParameterError(
            f"--runs: {path} has no readable trained-network settings (gd.N, gd.qk_dim, gd.seed) or manifest"
        ) from None
    return NetworkFolder(path, width, qk, seed, dict(summary or {}), hashes)


def plan_networks(root: str | os.PathLike[str]) -> NetworksPlan:
    """Every finished ``paths-images`` folder below ``root`` (folders without a manifest, still being written, are
    not looked at), checked against each other before any is verified: ParameterError (one line) for none found,
    a folder whose parameters (other than :data:`VARYING`; :data:`IGNORED` aside) or whose split, episode counts,
    tokens or paths differ from the first's, a (width, training seed) twice, a width with two query/key
    dimensions."""
    root = Path(root)
    if not root.is_dir():
        raise ParameterError(f"--runs {str(root)!r}: not a folder")
    found = []
    for folder in folders_with_manifest(root):
        try:
            kind = folder_kind(folder)
        except IntegrityError:
            continue
        if kind == "paths-images":
            found.append(_network_folder(folder))
    if not found:
        raise ParameterError(f"--runs {str(root)!r}: no finished paths-images folder (with manifest.json) below it")
    found.sort(key=lambda f: (f.width, f.train_seed, str(f.path)))
    first = found[0]
    settings = shared_settings(meta_parameters(first.path / "summary.json"))
    seen: dict[tuple[int, int], Path] = {}
    qk: dict[int, tuple[int, Path]] = {}
    for f in found:
        mine = shared_settings(meta_parameters(f.path / "summary.json"))
        diff = first_difference(settings, mine)
        if diff is None:
            back = first_difference(mine, settings)
            diff = None if back is None else (back[0], back[2], back[1])
        if diff is not None:
            raise ParameterError(
                f"--runs: {f.path} differs from {first.path} in {diff[0]} ({diff[2]} there, {diff[1]} here); the "
                f"networks of one study may differ only in the training seed, the width and the query/key dimension"
            )
        for key in SHARED_SUMMARY_KEYS:
            if f.summary.get(key) != first.summary.get(key):
                raise ParameterError(
                    f"--runs: {f.path} differs from {first.path} in its summary.json {key!r} (another split, other "
                    f"episodes or other data)"
                )
        if (f.width, f.train_seed) in seen:
            raise ParameterError(
                f"--runs: width {f.width}, training seed {f.train_seed} twice: {seen[(f.width, f.train_seed)]} and "
                f"{f.path} (each network once)"
            )
        seen[(f.width, f.train_seed)] = f.path
        q, where = qk.setdefault(f.width, (f.qk_dim, f.path))
        if q != f.qk_dim:
            raise ParameterError(
                f"--runs: width {f.width} with query/key dimension {q} in {where} and {f.qk_dim} in {f.path} (one "
                f"query/key dimension per size)"
            )
    return NetworksPlan(tuple(found), settings, root)


def read_networks(
    plan: NetworksPlan, done: Callable[[int], None] | None = None
) -> tuple[list[NetworkResult], list[HeadRow]]:
    """Verify every folder of ``plan`` (IntegrityError, one line, at the first that fails; ``verify --strict``'s
    checks included) and read its results and heads; ``done(1)`` after each folder."""
    results: list[NetworkResult] = []
    heads: list[HeadRow] = []
    for f in plan.folders:
        verify_folder(f.path, kind="paths-images", strict=True)
        summary = read_json_if_valid(f.path / "summary.json")
        if not isinstance(summary, dict):
            raise IntegrityError(f"{f.path / 'summary.json'}: unreadable")
        results.extend(network_results(f.width, f.qk_dim, f.train_seed, summary))
        heads.extend(head_rows(f.width, f.qk_dim, f.train_seed, summary))
        if done:
            done(1)
    return results, heads


def made_for(plan: NetworksPlan, permutations: int) -> dict[str, Any]:
    """The parameters of a networks folder: the shared settings of its networks, the networks (width, query/key
    dimension, training seed), the permutations and their seed, the root read."""
    from dotattn.paths.networks import PERMUTATION_SEED

    return {
        "runs": str(plan.root),
        "networks": [[f.width, f.qk_dim, f.train_seed] for f in plan.folders],
        "permutations": int(permutations),
        "permutation_seed": PERMUTATION_SEED,
        "settings": plan.settings,
    }


def write_networks(
    study: NetworksStudy,
    plan: NetworksPlan,
    out: Path,
    params: Mapping[str, Any],
    command: str,
    seconds: float | None = None,
) -> dict[str, Any]:
    """The output folder of a study (module docstring): CSVs, summary.json, figures, the networks' summary copies,
    the manifest last. Copies of networks from an earlier run into ``out`` that are not in this study are
    removed (the folder holds one study)."""
    from dotattn.paths import networks_plotting as plots

    prov = provenance(dict(params), seconds=seconds)
    comment = "dotattn paths networks; provenance: " + __import__("json").dumps(prov, separators=(",", ":"))
    copies = []
    records = {(n["width"], n["train_seed"]): n for n in study.networks_list()}
    networks = []
    for f in plan.folders:
        name = network_file(f.width, f.train_seed)
        atomic_write_bytes(out / name, (f.path / "summary.json").read_bytes())
        copies.append(name)
        rec = records[(f.width, f.train_seed)]
        networks.append(
            {
                "width": f.width,
                "qk_dim": f.qk_dim,
                "train_seed": f.train_seed,
                "folder": os.path.relpath(f.path, plan.root),
                "file": name,
                "sources": {k: f.hashes[k] for k in ("summary.json", "heads.csv", "gd_network.npz") if k in f.hashes},
                "git_commit": (f.summary.get("provenance") or {}).get("git_commit"),
                "N_star": rec["sets"]["test"]["N_star"],
                "sets": rec["sets"],
            }
        )
    for stale in out.glob("network_w*_seed*.json"):
        if stale.name not in copies:
            stale.unlink()
    write_csv(out / "networks.csv", [r.to_row() for r in study.results], list(NETWORK_COLUMNS), comment=comment)
    write_csv(out / "heads.csv", [h.to_row() for h in study.heads], list(HEAD_COLUMNS), comment=comment)
    write_csv(out / "claims.csv", [c.to_row() for c in study.claims], list(CLAIM_COLUMNS), comment=comment)
    summary = {
        "provenance": prov,
        "networks": networks,
        "claims": study.claims_dict(),
        "files": [*NETWORKS_FILES, *FIGURES, *copies],
    }
    write_json(out / "summary.json", summary)
    meta = {"command": command, "git_commit": prov["git_commit"]}
    save_figure(plots.figure_claim1(study.results, study.claims), out / FIGURES[0], meta)
    save_figure(plots.figure_claim2(study.results, study.claims), out / FIGURES[1], meta)
    write_manifest(
        out, [*NETWORKS_FILES, *FIGURES, *copies], prov["parameters"], command=command, provenance_record=prov
    )
    return summary
