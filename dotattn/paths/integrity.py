"""The folder kinds of the attention-paths theory, registered with :mod:`dotattn.core.integrity`:
``paths-theory`` (``dotattn paths theory``: points.csv without an ``mmse`` column, heads.csv,
alignment.csv, summary.json) and ``paths-sample`` (``dotattn paths sample``: sample.json, U_draws.csv) and ``paths-images``
(``dotattn paths images``: points.csv and selection.csv with a temperature per row, heads.csv,
gd_history.csv, gd_network.npz, summary.json) and ``paths-networks`` (``dotattn paths networks``: networks.csv,
heads.csv, claims.csv, summary.json and a copy of each network's summary.json)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.integrity import (
    MATRIX_BOUND,
    FolderKind,
    check_finite,
    check_matrix,
    check_provenance_line,
    first_difference,
    header_has,
    read_records,
    read_verified_csv,
    read_verified_json,
    register_kind,
    same_number,
)
from dotattn.core.io import IntegrityError, read_json_if_valid, sha256_file
from dotattn.paths.analysis import PathsPoint
from dotattn.paths.networks import ClaimRow, HeadRow, NetworkResult, head_rows, network_results

__all__ = [
    "PATHS_THEORY",
    "PATHS_SAMPLE",
    "PATHS_IMAGES",
    "PATHS_NETWORKS",
    "VARYING",
    "IGNORED",
    "network_file",
    "shared_settings",
    "read_summary_copies",
    "results_from_copies",
]


def _paths_parameters(path: Path, csvs: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, provenance parameters) of an attention-paths JSON file, after the provenance line of each
    of ``csvs`` (beside it) is checked against them."""
    meta = read_verified_json(path)
    prov = meta.get("provenance")
    params = prov.get("parameters") if isinstance(prov, dict) else None
    if not isinstance(params, dict):
        raise IntegrityError(f"{path}: no provenance parameters")
    for name in csvs:
        if (path.parent / name).is_file():
            check_provenance_line(path.parent / name, params)
    return meta, params


def _check_paths_u(path: Path, row: int, U: Any, n: int) -> None:
    check_matrix(path, row, "U", U, (n, n), finite=True)
    if not np.allclose(U, np.transpose(U), rtol=1e-9, atol=1e-12):  # U is an order parameter, symmetric
        raise IntegrityError(f"{path}: row {row}: U is not symmetric")


def _check_paths_theory(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """points.csv of ``dotattn paths theory``: every row readable, accuracy in [0, 1], finite loss, U
    symmetric with one row and column per path of summary.json."""
    meta, _ = _paths_parameters(folder / "summary.json", ("points.csv", "heads.csv", "alignment.csv"))
    path = folder / "points.csv"
    points = read_records(path, PathsPoint)
    if not points:
        raise IntegrityError(f"{path}: no data rows")
    for i, p in enumerate(points, start=1):
        check_finite(path, i, "accuracy", p.accuracy, 1.0)
        if p.accuracy < 0:
            raise IntegrityError(f"{path}: row {i}: accuracy = {p.accuracy!r} is not in [0, 1]")
        check_finite(path, i, "loss", p.loss)
        _check_paths_u(path, i, p.U, len(p.paths))
    if isinstance(meta.get("paths"), list) and points[0].subset == "all" and len(points[0].paths) != len(meta["paths"]):
        raise IntegrityError(f"{path}: row 1 has {len(points[0].paths)} paths, summary.json {len(meta['paths'])}")
    _check_u_agrees(folder, points, meta)
    _check_theory_summary(folder, points, meta)


SUMMARY_RTOL = 1e-12
"""summary.json repeats numbers of points.csv and heads.csv: both written with repr() from the same floats."""


def _same(a: Any, b: Any) -> bool:
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return (np.isnan(x) and np.isnan(y)) or abs(x - y) <= SUMMARY_RTOL * max(abs(x), abs(y), 1e-300)


def _check_theory_summary(folder: Path, points: Sequence[PathsPoint], meta: Mapping[str, Any]) -> None:
    """summary.json against points.csv and heads.csv: each width's accuracy and loss of the whole network's
    theory (and the GP's accuracy) are those of points.csv's rows; summary.json's ``heads`` are heads.csv's
    rows, and the head scores of a layer at a width sum to 1."""
    per_N = meta.get("per_N")
    if isinstance(per_N, dict):
        gp = next((p for p in points if p.subset == "all" and p.method == "gp"), None)
        for p in points:
            if p.subset != "all" or p.method != "theory":
                continue
            entry = per_N.get(f"{p.N:g}")
            if not isinstance(entry, dict):
                raise IntegrityError(f"{folder / 'summary.json'}: no entry at N = {p.N:g} (points.csv has it)")
            checks = [("accuracy_theory", p.accuracy), ("loss_theory", p.loss)]
            if gp is not None and "accuracy_gp" in entry:
                checks.append(("accuracy_gp", gp.accuracy))
            for name, value in checks:
                if name in entry and not _same(entry[name], value):
                    raise IntegrityError(
                        f"{folder / 'summary.json'}: {name} at N = {p.N:g} is {entry[name]!r}, points.csv's row "
                        f"{value!r}"
                    )
    heads = meta.get("heads")
    path = folder / "heads.csv"
    if not isinstance(heads, list) or not path.is_file():
        return
    rows = read_verified_csv(path)
    if len(rows) != len(heads):
        raise IntegrityError(f"{path}: {len(rows)} rows, summary.json's heads {len(heads)}")
    sums: dict[tuple[str, str], float] = {}
    for k, (row, stored) in enumerate(zip(rows, heads, strict=True), start=1):
        if not isinstance(stored, dict):
            raise IntegrityError(f"{folder / 'summary.json'}: head {k} is not a record")
        for name, cell in row.items():
            want = stored.get(name)
            if not (str(want) == cell or _same(want, cell)):
                raise IntegrityError(f"{path}: row {k}: {name} = {cell}, summary.json's heads say {want!r}")
        try:
            sums[(row["N"], row["layer"])] = sums.get((row["N"], row["layer"]), 0.0) + float(row["score"])
        except (KeyError, ValueError):
            raise IntegrityError(f"{path}: row {k}: no N, layer or numeric score") from None
    bad = next((key for key, total in sums.items() if abs(total - 1.0) > 1e-6), None)
    if bad is not None:  # scores are shares of one layer's paths weight (summing to 1 up to rounding)
        raise IntegrityError(f"{path}: the head scores of layer {bad[1]} at N = {bad[0]} do not sum to 1")


def _check_u_agrees(folder: Path, points: Sequence[PathsPoint], meta: Mapping[str, Any]) -> None:
    """Each width's U in summary.json (``per_N``, in the order of its ``paths``) is the U of the
    points.csv row of the whole network's theory at that width, read in the order its ``paths`` column
    names (the summary order; folders written before held points.csv in the code's order)."""
    names, per_N = meta.get("paths"), meta.get("per_N")
    if not isinstance(names, list) or not isinstance(per_N, dict):
        return
    for p in points:
        if p.subset != "all" or p.method != "theory":
            continue
        entry = per_N.get(f"{p.N:g}")
        if not isinstance(entry, dict) or "U" not in entry:
            raise IntegrityError(f"{folder / 'summary.json'}: no U at N = {p.N:g} (points.csv has it)")
        if sorted(p.paths) != sorted(names):
            raise IntegrityError(f"{folder / 'points.csv'}: paths {list(p.paths)} are not summary.json's {names}")
        perm = [list(p.paths).index(n) for n in names]
        U = np.asarray(p.U, dtype=float)[np.ix_(perm, perm)]
        try:
            stored = np.asarray(entry["U"], dtype=float)
        except (TypeError, ValueError):
            raise IntegrityError(f"{folder / 'summary.json'}: U at N = {p.N:g} is not a matrix of numbers") from None
        if stored.shape != U.shape or not np.allclose(stored, U, rtol=1e-12, atol=1e-14):
            raise IntegrityError(f"{folder / 'summary.json'}: U at N = {p.N:g} differs from points.csv's")


def _check_paths_sample(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """U_draws.csv of ``dotattn paths sample``: the draws sample.json counts, each a finite U with one
    entry per pair of its paths."""
    meta, _ = _paths_parameters(folder / "sample.json", ("U_draws.csv",))
    try:
        n, total = len(meta["paths"]), int(meta["draws_total"])
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{folder / 'sample.json'}: lacks paths or draws_total") from None
    path = folder / "U_draws.csv"
    rows = read_verified_csv(path)
    if len(rows) != total:
        raise IntegrityError(f"{path}: {len(rows)} draws, sample.json counts {total} (rows removed or added?)")
    cols = [f"U_{i}_{j}" for i in range(n) for j in range(i, n)]
    draws: list[list[float]] = []
    for k, row in enumerate(rows, start=1):
        try:
            vals = [float(row[c]) for c in cols]
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"{path}: row {k}: lacks the U entries of {n} paths or holds a non-number") from None
        for c, v in zip(cols, vals, strict=True):
            check_finite(path, k, c, v, MATRIX_BOUND)
        draws.append(vals)
    _check_sample_summary(folder / "sample.json", meta, np.asarray(draws, dtype=float), n)


SAMPLE_MEAN_RTOL = 1e-9
"""sample.json's U_sampled is the mean of the draws that U_draws.csv holds (written with repr(), read back
exactly); the two means differ only by the order of summation, ~1e-15 relative."""


def _positive_or_null(path: Path, name: str, value: Any) -> None:
    """An ESS: a positive finite number, or null (not computable, e.g. with one chain)."""
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value) and value > 0
    if not ok:
        raise IntegrityError(f"{path}: {name} = {value!r} is not a positive number (nor null: not computable)")


def _check_sample_summary(path: Path, meta: Mapping[str, Any], draws: np.ndarray, n: int) -> None:
    """sample.json against U_draws.csv: the draws are chains x draws_per_chain, U_sampled is their mean;
    every ESS is positive (or null where not computable) and ess_min is the smallest; a converged run has
    every ESS, R-hat max < 1.01 and no divergences (its own convergence rule)."""
    diag = meta.get("diagnostics")
    if not isinstance(diag, dict):
        raise IntegrityError(f"{path}: no diagnostics")
    try:
        chains, per_chain = int(diag["chains"]), int(diag["draws_per_chain"])
    except (KeyError, TypeError, ValueError):
        raise IntegrityError(f"{path}: diagnostics lack chains and draws_per_chain") from None
    if chains * per_chain != len(draws):
        raise IntegrityError(f"{path}: {chains} chains x {per_chain} draws, U_draws.csv has {len(draws)} draws")
    _positive_or_null(path, "ess_min", diag.get("ess_min"))
    ess = diag.get("ess_U")
    if isinstance(ess, list):
        flat = [v for row in ess for v in (row if isinstance(row, list) else [row])]
        for v in flat:
            _positive_or_null(path, "an entry of ess_U", v)
        finite = [float(v) for v in flat if v is not None]
        want = min(finite) if finite and len(finite) == len(flat) else None
        got = diag.get("ess_min")
        if (want is None) != (got is None) or (want is not None and got is not None and abs(want - got) > 1e-9 * want):
            raise IntegrityError(f"{path}: ess_min = {got!r} is not the smallest entry of ess_U ({want!r})")
    if meta.get("status") == "converged" and not (
        diag.get("ess_min") is not None
        and diag["ess_min"] >= 100
        and isinstance(diag.get("rhat_max"), (int, float))
        and diag["rhat_max"] < 1.01
        and diag.get("divergences") == 0
    ):
        raise IntegrityError(f"{path}: status converged, but its diagnostics fail its convergence rule")
    mean = meta.get("U_sampled")
    if mean is not None and len(draws):
        try:
            U = np.asarray(mean, dtype=float)
        except (TypeError, ValueError):
            raise IntegrityError(f"{path}: U_sampled is not a matrix of numbers") from None
        iu = np.triu_indices(n)
        if U.shape != (n, n) or not np.allclose(
            U[iu], draws.mean(axis=0), rtol=SAMPLE_MEAN_RTOL, atol=SAMPLE_MEAN_RTOL * np.abs(draws).max()
        ):
            raise IntegrityError(f"{path}: U_sampled is not the mean of the draws in U_draws.csv")


SAMPLE_STRICT_RTOL = 1e-8
"""``verify --strict`` for paths-sample: R-hat, bulk ESS, the Monte-Carlo errors and z-scores recomputed from
the draws of U_draws.csv (the same float64 values, written with repr()) by the estimators the sampler used
(numpyro's split Gelman-Rubin and effective sample size): only the order of floating-point sums differs
(the FFT autocorrelation of the ESS included), ~1e-13 relative; 1e-8 leaves room and refuses any edit."""


def _nulls_as_nan(x: Any) -> Any:
    """A JSON number or nested list with null (not computable) read as NaN."""
    if isinstance(x, list):
        return [_nulls_as_nan(v) for v in x]
    return np.nan if x is None else x


def _strict_sample(folder: Path) -> None:
    """``verify --strict`` for paths-sample: from U_draws.csv's draws (by chain) the split R-hat and bulk ESS
    of every entry of U (sample.json's rhat_U, ess_U, rhat_max, ess_min), its Monte-Carlo error sd/√ESS
    (U_mcse) and the z-scores (U_sampled − U_theory)/U_mcse; the status its own convergence rule gives."""
    from numpyro.diagnostics import split_gelman_rubin

    from dotattn.paths.sampler import bulk_ess, ess_min_of

    path = folder / "sample.json"
    meta = read_verified_json(path)
    n = len(meta["paths"])
    diag = meta["diagnostics"]
    chains, per_chain = int(diag["chains"]), int(diag["draws_per_chain"])
    rows = read_verified_csv(folder / "U_draws.csv")
    iu = np.triu_indices(n)
    U = np.empty((chains, per_chain, n, n))
    counts = np.zeros(chains, dtype=int)
    for k, row in enumerate(rows, start=1):
        c = int(row["chain"])
        if not 0 <= c < chains or counts[c] >= per_chain:
            raise IntegrityError(f"{folder / 'U_draws.csv'}: row {k}: chain {c} is not one of {chains} x {per_chain}")
        vals = np.array([float(row[f"U_{i}_{j}"]) for i, j in zip(*iu, strict=True)])
        M = np.zeros((n, n))
        M[iu] = vals
        U[c, counts[c]] = M + np.triu(M, 1).T
        counts[c] += 1
    rhat = np.asarray(split_gelman_rubin(U), dtype=float)
    ess = bulk_ess(U)
    mcse = U.std(axis=(0, 1), ddof=1) / np.sqrt(ess)
    z = (U.mean(axis=(0, 1)) - np.asarray(meta["U_theory"], dtype=float)) / mcse
    for name, stored, want in (
        ("diagnostics.rhat_U", diag.get("rhat_U"), rhat),
        ("diagnostics.ess_U", diag.get("ess_U"), ess),
        ("diagnostics.rhat_max", diag.get("rhat_max"), float(np.nanmax(rhat))),
        ("diagnostics.ess_min", diag.get("ess_min"), ess_min_of(ess)),
        ("U_mcse", meta.get("U_mcse"), mcse),
        ("U_zscores", meta.get("U_zscores"), z),
    ):
        if not same_number(_nulls_as_nan(stored), np.asarray(want).tolist(), rtol=SAMPLE_STRICT_RTOL):
            raise IntegrityError(f"{path}: {name} is not what U_draws.csv's draws give (verify --strict)")
    ok = float(np.nanmax(rhat)) < 1.01 and diag.get("divergences") == 0 and ess_min_of(ess) >= 100
    if (meta.get("status") == "converged") != ok:
        raise IntegrityError(
            f"{path}: status {meta.get('status')}, but the draws' R-hat and ESS say {'' if ok else 'not '}converged "
            f"(verify --strict)"
        )


PATHS_THEORY = register_kind(
    FolderKind(
        "paths-theory",
        ("points.csv", "summary.json"),
        _check_paths_theory,
        optional=("heads.csv", "alignment.csv"),
        recognise=lambda folder: not header_has(folder / "points.csv", "mmse"),
    )
)
PATHS_SAMPLE = register_kind(
    FolderKind(
        "paths-sample",
        ("sample.json", "U_draws.csv"),
        _check_paths_sample,
        meta_file="sample.json",
        strict=_strict_sample,
    )
)


def _check_paths_images(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """``dotattn paths images``: the temperature was chosen on the validation episodes; every point of
    points.csv and fixed_temperature.csv (test / OOD, theory or GP) and selection.csv (validation) readable, accuracy in [0, 1],
    finite loss, U symmetric with one row per path (per path and output for N-way episodes); heads.csv: one row per head, scores in [0, 1]
    summing to 1 per layer, pruned accuracies in [0, 1]."""
    from dotattn.paths.images_study import EVAL_SETS, HEAD_COLUMNS

    meta, _ = _paths_parameters(
        folder / "summary.json", ("points.csv", "selection.csv", "fixed_temperature.csv", "heads.csv", "gd_history.csv")
    )
    if meta.get("temperature_selected_on") != "validation":
        raise IntegrityError(f"{folder / 'summary.json'}: temperature_selected_on is not 'validation'")
    outputs = meta.get("outputs", 1)  # N-way studies: U over the extended paths (path, output)
    if not isinstance(outputs, int) or isinstance(outputs, bool) or outputs < 1:
        raise IntegrityError(f"{folder / 'summary.json'}: outputs = {outputs!r} is not a positive integer")
    n = len(meta.get("paths") or []) * outputs
    checks = [("points.csv", EVAL_SETS), ("selection.csv", ("validation",))]
    if (folder / "fixed_temperature.csv").exists() or "fixed_temperature.csv" in (meta.get("files") or []):
        checks.append(("fixed_temperature.csv", EVAL_SETS))  # absent from studies made before it existed
    for name, parts in checks:
        path = folder / name
        points = read_records(path, PathsPoint)
        if not points:
            raise IntegrityError(f"{path}: no data rows")
        for i, p in enumerate(points, start=1):
            if p.subset not in parts or p.method not in ("theory", "gp"):
                raise IntegrityError(f"{path}: row {i}: subset {p.subset!r} / method {p.method!r} not expected here")
            check_finite(path, i, "accuracy", p.accuracy, 1.0)
            if p.accuracy < 0:
                raise IntegrityError(f"{path}: row {i}: accuracy = {p.accuracy!r} is not in [0, 1]")
            check_finite(path, i, "loss", p.loss)
            _check_paths_u(path, i, p.U, n)
    path = folder / "heads.csv"
    rows = read_verified_csv(path)
    by_layer: dict[str, float] = {}
    for k, row in enumerate(rows, start=1):
        try:
            vals = {c: float(row[c]) for c in HEAD_COLUMNS}
        except (KeyError, TypeError, ValueError):
            raise IntegrityError(f"{path}: row {k}: lacks a column of {HEAD_COLUMNS} or holds a non-number") from None
        for c, v in vals.items():
            check_finite(path, k, c, v, MATRIX_BOUND)
        if not 0.0 <= vals["score"] <= 1.0 or any(not 0.0 <= v <= 1.0 for c, v in vals.items() if "accuracy" in c):
            raise IntegrityError(f"{path}: row {k}: a score or an accuracy is outside [0, 1]")
        by_layer[row["layer"]] = by_layer.get(row["layer"], 0.0) + vals["score"]
    if not rows or any(abs(s - 1.0) > 1e-6 for s in by_layer.values()):
        raise IntegrityError(f"{path}: the head scores of a layer do not sum to 1 (rows removed or edited?)")
    _check_images_files(folder, meta)


IMAGES_RTOL = 1e-12
"""summary.json against the CSVs of a paths-images folder: both written from the same float64 values (repr()
in the CSV, JSON's shortest repr in summary.json), read back exactly; 1e-12 only absorbs nothing but
rounding a reader could not see."""


def _same_value(a: Any, b: Any, rtol: float = IMAGES_RTOL) -> bool:
    from dotattn.core.integrity import same_number

    return same_number(a, b, rtol=rtol)


def _width_key(p: PathsPoint) -> str:
    return "gp" if p.method == "gp" else f"{p.N:g}"


def _check_images_files(folder: Path, meta: Mapping[str, Any]) -> None:
    """summary.json of a paths-images folder against its CSVs: per_N (every width and the GP: temperature,
    status, and per evaluation set accuracy, loss, variance) is points.csv's rows, one per (width, set) and
    none more; per_N's validation accuracy and loss are selection.csv's row at the chosen temperature;
    fixed_temperature is fixed_temperature.csv's rows; heads is heads.csv's rows; pruning's unpruned network
    accuracy is gd's, and each head's drops are the unpruned accuracy minus its pruned one (GD: pruning's
    gd_accuracy; theory: pruning's theory_accuracy); gd's epochs_run is gd_history.csv's rows."""
    from dotattn.paths.images_study import EVAL_SETS, HEAD_COLUMNS

    sj = folder / "summary.json"
    per_N = meta.get("per_N")
    if not isinstance(per_N, dict):
        raise IntegrityError(f"{sj}: no per_N")
    points = read_records(folder / "points.csv", PathsPoint)
    got: dict[tuple[str, str], PathsPoint] = {}
    for i, p in enumerate(points, start=1):
        key = (_width_key(p), p.subset)
        if key in got:
            raise IntegrityError(f"{folder / 'points.csv'}: row {i}: a second row for width {key[0]}, {key[1]}")
        got[key] = p
    selection = read_records(folder / "selection.csv", PathsPoint)
    for width, entry in per_N.items():
        if not isinstance(entry, dict):
            raise IntegrityError(f"{sj}: per_N[{width}] is not an object")
        if "temperature" not in entry:  # no converged temperature at this width: no rows
            if any(k[0] == width for k in got):
                raise IntegrityError(f"{folder / 'points.csv'}: rows at width {width}, which per_N says has none")
            continue
        T = entry["temperature"]
        for part in EVAL_SETS:
            p = got.pop((width, part), None)
            ev = entry.get(part)
            if p is None or not isinstance(ev, dict):
                raise IntegrityError(f"{folder / 'points.csv'}: no row for width {width}, {part} (per_N has it)")
            for name in ("accuracy", "loss", "variance"):
                if not _same_value(ev.get(name), getattr(p, name)):
                    raise IntegrityError(
                        f"{sj}: per_N[{width}][{part}].{name} = {ev.get(name)!r}, points.csv says {getattr(p, name)!r}"
                    )
            if not _same_value(T, p.temperature) or (p.method == "theory" and entry.get("status") != p.status):
                raise IntegrityError(
                    f"{sj}: per_N[{width}]'s temperature or status is not points.csv's ({p.temperature!r}, {p.status})"
                )
        val = [q for q in selection if _width_key(q) == width and _same_value(q.temperature, T)]
        if len(val) != 1 or not (
            _same_value(entry.get("validation_accuracy"), val[0].accuracy)
            and _same_value(entry.get("validation_loss"), val[0].loss)
        ):
            raise IntegrityError(
                f"{sj}: per_N[{width}]'s validation accuracy and loss are not selection.csv's row at its "
                f"temperature {T!r}"
            )
    if got:
        width, part = sorted(got)[0]
        raise IntegrityError(f"{folder / 'points.csv'}: a row for width {width}, {part} that per_N does not hold")
    if (folder / "fixed_temperature.csv").is_file():
        table: dict[str, Any] = {}
        for p in read_records(folder / "fixed_temperature.csv", PathsPoint):
            table.setdefault(f"{p.temperature:g}", {}).setdefault(_width_key(p), {})[p.subset] = p.accuracy
        stored = meta.get("fixed_temperature")
        from dotattn.core.integrity import first_difference

        if not isinstance(stored, dict) or first_difference(table, stored) or first_difference(stored, table):
            raise IntegrityError(f"{sj}: fixed_temperature is not fixed_temperature.csv's rows")
    heads = meta.get("heads")
    rows = read_verified_csv(folder / "heads.csv")
    if not isinstance(heads, list) or len(heads) != len(rows):
        raise IntegrityError(f"{sj}: heads is not heads.csv's rows")
    for k, (row, item) in enumerate(zip(rows, heads, strict=True), start=1):
        if not isinstance(item, dict) or any(not _same_value(row[c], item.get(c)) for c in HEAD_COLUMNS):
            raise IntegrityError(f"{sj}: heads entry {k} differs from row {k} of heads.csv")
    pruning, gd = meta.get("pruning"), meta.get("gd")
    if not isinstance(pruning, dict) or not isinstance(gd, dict):
        raise IntegrityError(f"{sj}: no pruning or gd")
    for part in EVAL_SETS:
        pr, g = pruning.get(part), gd.get(part)
        if (
            not isinstance(pr, dict)
            or not isinstance(g, dict)
            or not _same_value(pr.get("gd_accuracy"), g.get("accuracy"))
        ):
            raise IntegrityError(f"{sj}: pruning[{part}].gd_accuracy is not gd[{part}].accuracy")
        for k, row in enumerate(rows, start=1):
            for who in ("gd", "theory"):
                drop = float(pr[f"{who}_accuracy"]) - float(row[f"{who}_accuracy_pruned_{part}"])
                if not _same_value(float(row[f"{who}_drop_{part}"]), drop, 1e-9):
                    raise IntegrityError(
                        f"{folder / 'heads.csv'}: row {k}: {who}_drop_{part} is not pruning[{part}].{who}_accuracy "
                        f"minus {who}_accuracy_pruned_{part} ({drop!r})"
                    )
    history = read_verified_csv(folder / "gd_history.csv")
    if gd.get("epochs_run") != len(history):
        raise IntegrityError(f"{sj}: gd.epochs_run = {gd.get('epochs_run')!r}, gd_history.csv has {len(history)} rows")


def _strict_images(folder: Path) -> None:
    """``verify --strict`` for paths-images: per width (and the GP) the temperature per_N holds is the one the
    selection rule picks from selection.csv (the highest validation accuracy among converged rows, ties: the
    lower validation loss); each accuracy_error is the binomial √(a(1 − a)/n) over the episodes summary.json
    counts; heads.csv's ranks order its scores, pruning's two heads are the two lowest-scoring; the theory's
    Spearman correlation of scores and drops is recomputed from heads.csv."""
    from scipy import stats

    from dotattn.paths.images_study import EVAL_SETS, accuracy_error

    sj = folder / "summary.json"
    meta = read_verified_json(sj)
    per_N = meta["per_N"]
    selection = read_records(folder / "selection.csv", PathsPoint)
    for width, entry in per_N.items():
        cands = [q for q in selection if _width_key(q) == width and (q.method == "gp" or q.status == "converged")]
        if "temperature" not in entry:
            if cands:
                raise IntegrityError(f"{sj}: per_N[{width}] has no temperature, selection.csv has converged rows")
            continue
        best = max(cands, key=lambda q: (q.accuracy, -q.loss), default=None)
        if best is None or not _same_value(best.temperature, entry["temperature"]):
            raise IntegrityError(
                f"{sj}: per_N[{width}].temperature = {entry['temperature']!r}; the selection rule picks "
                f"{None if best is None else best.temperature!r} from selection.csv (verify --strict)"
            )
    episodes = (meta.get("counts") or {}).get("episodes") or {}
    for part in EVAL_SETS:
        n = int(episodes[part])
        evs = [(f"per_N[{w}][{part}]", e[part]) for w, e in per_N.items() if part in e]
        pr = meta["pruning"][part]
        evs += [(f"gd[{part}]", meta["gd"][part])]
        checks = [(name, ev["accuracy"], ev.get("accuracy_error")) for name, ev in evs]
        checks += [(f"pruning[{part}] {w}", pr[w], pr.get(f"{w}_error")) for w in ("gd_accuracy", "gd_accuracy_pruned")]
        for name, acc, err in checks:
            if err is not None and not _same_value(err, accuracy_error(float(acc), n), 1e-9):
                raise IntegrityError(
                    f"{sj}: {name}'s accuracy error {err!r} is not the binomial sqrt(a(1-a)/n) at n = {n} "
                    f"(verify --strict)"
                )
    rows = read_verified_csv(folder / "heads.csv")
    scores = np.array([float(r["score"]) for r in rows])
    order = np.argsort(scores, kind="stable")
    for k, row in enumerate(rows):
        if int(row["rank"]) != int(np.flatnonzero(order == k)[0]) + 1:
            raise IntegrityError(f"{folder / 'heads.csv'}: row {k + 1}: rank {row['rank']} does not order the scores")
    lowest = [f"L{rows[i]['layer']}H{rows[i]['head']}" for i in order[:2]]
    if meta["pruning"].get("heads") != lowest:
        raise IntegrityError(
            f"{sj}: pruning.heads = {meta['pruning'].get('heads')!r}, the two lowest-scoring heads of heads.csv are "
            f"{lowest} (verify --strict)"
        )
    for part in EVAL_SETS:
        td = np.array([float(r[f"theory_drop_{part}"]) for r in rows])
        want = float(stats.spearmanr(scores, td).statistic) if np.ptp(td) > 0 else float("nan")
        got = meta["pruning"][part].get("spearman_score_vs_theory_drop")
        if not _same_value(got, want, 1e-9):
            raise IntegrityError(
                f"{sj}: pruning[{part}].spearman_score_vs_theory_drop = {got!r}; recomputed from heads.csv: "
                f"{want!r} (verify --strict)"
            )


PATHS_IMAGES = register_kind(
    FolderKind(
        "paths-images",
        ("selection.csv", "summary.json", "points.csv", "heads.csv", "gd_history.csv"),
        _check_paths_images,
        optional=("fixed_temperature.csv", "gd_network.npz"),
        strict=_strict_images,
    )
)


VARYING: tuple[str, ...] = ("gd.seed", "gd.N", "gd.qk_dim")
"""The settings the networks of one study may differ in: the training seed, the width and the query/key dimension
of the trained network (dotted names in ``provenance.parameters``)."""
IGNORED: tuple[str, ...] = ("command", "network")
"""Parameters that say how a folder was made, not what it holds (the command line; the file a reused network was
read from, whose settings are the folder's own)."""


def network_file(width: int, train_seed: int) -> str:
    """The name of a network's summary.json copy in the output folder."""
    return f"network_w{width}_seed{train_seed}.json"


def shared_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """A folder's ``provenance.parameters`` without :data:`VARYING` and :data:`IGNORED`: what every network of one
    study shares."""
    out = {k: v for k, v in params.items() if k not in IGNORED}
    gd = dict(out.get("gd") or {})
    for name in VARYING:
        gd.pop(name.split(".", 1)[1], None)
    out["gd"] = gd
    return out


def read_summary_copies(folder: Path, summary: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """(network record, its summary.json copy) of every network of a networks folder's summary, each copy checked
    to be the file its record names, with the SHA-256 the network's own manifest listed (IntegrityError)."""
    out = []
    for rec in summary["networks"]:
        name = network_file(int(rec["width"]), int(rec["train_seed"]))
        path = folder / name
        if rec.get("file") != name or not path.is_file():
            raise IntegrityError(f"{folder / 'summary.json'}: network {rec.get('file')!r} has no copy {name}")
        if sha256_file(path) != (rec.get("sources") or {}).get("summary.json"):
            raise IntegrityError(f"{path}: not the summary.json its network's manifest listed (SHA-256 differs)")
        copy = read_json_if_valid(path)
        if not isinstance(copy, dict):
            raise IntegrityError(f"{path}: unreadable")
        out.append((rec, copy))
    return out


def results_from_copies(
    copies: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> tuple[list[NetworkResult], list[HeadRow]]:
    """The per-network results and heads of the summary copies (:func:`read_summary_copies`)."""
    results: list[NetworkResult] = []
    heads: list[HeadRow] = []
    for rec, copy in copies:
        w, q, s = int(rec["width"]), int(rec["qk_dim"]), int(rec["train_seed"])
        results.extend(network_results(w, q, s, copy))
        heads.extend(head_rows(w, q, s, copy))
    return results, heads


NETWORKS_RTOL = 1e-12
"""networks.csv, heads.csv and claims.csv against the values recomputed from the networks' summary copies: the same
float64 arithmetic on the same numbers (written with repr(), read back exactly); 1e-12 absorbs nothing but a
summation order."""


def _networks_rows(folder: Path) -> tuple[dict[str, Any], list[Any], list[Any], list[Any], list[Any], list[Any]]:
    """(summary, results and heads recomputed from the copies, networks.csv, heads.csv, claims.csv rows) of a
    paths-networks folder, after each copy is checked (its SHA-256 is the one its network's manifest listed, its
    settings are the folder's, its trained network the record's) and every copy in the folder is a network of the
    summary."""
    meta, params = _paths_parameters(folder / "summary.json", ("networks.csv", "heads.csv", "claims.csv"))
    nets = meta.get("networks")
    if not isinstance(nets, list) or not nets:
        raise IntegrityError(f"{folder / 'summary.json'}: no networks")
    copies = read_summary_copies(folder, meta)
    names = {str(rec["file"]) for rec, _ in copies}
    extra = sorted(p.name for p in folder.glob("network_w*_seed*.json") if p.name not in names)
    if extra:
        raise IntegrityError(f"{folder / extra[0]}: a network copy that summary.json's networks do not hold")
    for rec, copy in copies:
        prov = copy.get("provenance") or {}
        theirs = prov.get("parameters") if isinstance(prov, dict) else None
        if not isinstance(theirs, dict):
            raise IntegrityError(f"{folder / str(rec['file'])}: no provenance parameters")
        gd = theirs.get("gd") or {}
        if [gd.get("N"), gd.get("qk_dim"), gd.get("seed")] != [rec["width"], rec["qk_dim"], rec["train_seed"]]:
            raise IntegrityError(f"{folder / str(rec['file'])}: its trained network is not the record's")
        diff = first_difference(params.get("settings") or {}, shared_settings(theirs))
        if diff is not None:
            raise IntegrityError(
                f"{folder / str(rec['file'])}: made for {diff[0]} = {diff[2]}, the folder's settings {diff[1]}"
            )
    results, heads = results_from_copies(copies)
    return (
        meta,
        results,
        heads,
        read_records(folder / "networks.csv", NetworkResult),
        read_records(folder / "heads.csv", HeadRow),
        read_records(folder / "claims.csv", ClaimRow),
    )


def _same_records(path: Path, stored: Sequence[Any], want: Sequence[Any], what: str) -> None:
    if len(stored) != len(want):
        raise IntegrityError(f"{path}: {len(stored)} rows, {what} give {len(want)}")
    for i, (a, b) in enumerate(zip(stored, want, strict=True), start=1):
        for name, value in a.to_row().items():
            other = b.to_row()[name]
            same = _same_value(value, other, NETWORKS_RTOL) if not isinstance(value, str) else value == other
            if not same:
                raise IntegrityError(f"{path}: row {i}: {name} = {value!r}; {what} give {other!r}")


def _check_paths_networks(folder: Path, manifest: Mapping[str, Any] | None) -> None:
    """``dotattn paths networks``: networks.csv and heads.csv are what the networks' summary copies give
    (:func:`dotattn.paths.networks.network_results`, :func:`~dotattn.paths.networks.head_rows`); summary.json's
    networks hold networks.csv's values; claims.csv's means, standard errors and counts are networks.csv's, and
    summary.json's claims by set are claims.csv's rows."""
    from dotattn.core.io import to_jsonable
    from dotattn.paths.networks import SETS, mean_se

    meta, results, heads, stored_results, stored_heads, claims = _networks_rows(folder)
    _same_records(folder / "networks.csv", stored_results, results, "the networks' summary copies")
    _same_records(folder / "heads.csv", stored_heads, heads, "the networks' summary copies")
    for rec in meta["networks"]:
        for part in SETS:
            row = next(
                (
                    r
                    for r in stored_results
                    if (r.width, r.train_seed, r.set) == (rec["width"], rec["train_seed"], part)
                ),
                None,
            )
            mine = (
                {
                    k: v
                    for k, v in to_jsonable(row.to_row()).items()
                    if k not in ("width", "qk_dim", "train_seed", "set")
                }
                if row
                else None
            )
            if mine is None or first_difference(mine, rec["sets"][part]) or first_difference(rec["sets"][part], mine):
                raise IntegrityError(
                    f"{folder / 'summary.json'}: networks entry width {rec['width']}, seed {rec['train_seed']}, "
                    f"{part} is not networks.csv's row"
                )
    path = folder / "claims.csv"
    for i, c in enumerate(claims, start=1):
        here = [r for r in stored_results if r.width == c.width and r.set == c.set]
        if len(here) != c.n:
            raise IntegrityError(f"{path}: row {i}: n = {c.n}, networks.csv has {len(here)} networks there")
        for field, name in (("gain", "gain"), ("gap", "gap"), ("pruning_change", "change")):
            m, se, n = mean_se([getattr(r, field) for r in here])
            if not (
                _same_value(getattr(c, f"{name}_mean"), m, 1e-9)
                and _same_value(getattr(c, f"{name}_se"), se, 1e-9)
                and getattr(c, f"{name}_n") == n
            ):
                raise IntegrityError(f"{path}: row {i}: {name} mean, se or n is not networks.csv's")
    by_set: dict[str, dict[str, Any]] = {}
    for c in claims:
        by_set.setdefault(c.set, {})[str(c.width)] = to_jsonable(c.as_dict())
    stored = (meta.get("claims") or {}).get("by_set")
    if not isinstance(stored, dict) or first_difference(by_set, stored) or first_difference(stored, by_set):
        raise IntegrityError(f"{folder / 'summary.json'}: claims.by_set is not claims.csv's rows")


def _strict_paths_networks(folder: Path) -> None:
    """``verify --strict`` for paths-networks: the whole analysis recomputed from the networks' summary copies
    (:func:`dotattn.paths.networks.analyse` with the permutation count summary.json records; the permutations are
    seeded, so the p values are recomputed exactly): claims.csv's rows and summary.json's claims and verdicts."""
    from dotattn.core.io import to_jsonable
    from dotattn.paths.networks import analyse

    meta, results, heads, _, _, claims = _networks_rows(folder)
    study = analyse(results, heads, int(meta["claims"]["permutation"]["permutations"]))
    _same_records(folder / "claims.csv", claims, study.claims, "the networks' summary copies (verify --strict)")
    mine = to_jsonable(study.claims_dict())
    stored = meta.get("claims") or {}
    diff = first_difference(mine, stored) or first_difference(stored, mine)
    if diff is not None:
        raise IntegrityError(
            f"{folder / 'summary.json'}: claims.{diff[0]} is not what the networks' summary copies give "
            f"(recomputed; verify --strict)"
        )


PATHS_NETWORKS = register_kind(
    FolderKind(
        "paths-networks",
        ("networks.csv", "summary.json", "heads.csv", "claims.csv"),
        _check_paths_networks,
        optional=("network_w*_seed*.json",),
        strict=_strict_paths_networks,
    )
)
