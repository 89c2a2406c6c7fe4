"""The image claims over many trained networks (`dotattn paths networks`): per-network quantities from `paths images`
summaries, the standard error, Spearman's rho and the pooled permutation p against exact enumeration, every branch of
the verdicts, the command end to end with `verify --strict`, its refusals, and `paths images --network` (a trained
network reused from another folder) with its refusals. Three tiny synthetic networks (test_paths_images.py's data)."""

import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from clitools import run
from scipy import stats

from dotattn.core.io import IntegrityError, read_csv, sha256_file, write_json, write_manifest
from dotattn.core.validation import ParameterError
from dotattn.paths import integrity as _kinds  # noqa: F401  (registers the paths folder kinds for verify_folder)
from dotattn.paths import networks as nw

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from test_paths_images import SMALL, make_idx, make_omniglot  # noqa: E402

SEEDS = (0, 1, 2)
WIDTH, QK = 4, 2


def _config(omni, fm, seed, widths=(1000.0, 10000.0)):
    from dotattn.paths.images_gd import GDConfig
    from dotattn.paths.images_study import ImageStudyConfig

    gd = GDConfig(N=WIDTH, qk_dim=QK, epoch_episodes=16, max_epochs=2, seed=seed)
    return ImageStudyConfig(
        omniglot=str(omni),
        fashion_mnist=str(fm),
        gd=gd,
        P=16,
        P_validation=12,
        P_test=12,
        P_ood=12,
        widths=widths,
        temperatures=(0.1,),
        sample_N=0,
        bootstrap=20,
        theory_tol=1e-6,
    )


pytestmark = pytest.mark.xdist_group("test_paths_networks")
"""Every test here runs on one xdist worker (``--dist loadgroup``), so the module-scoped ``study`` (three trained
networks) is made once per run, not once per worker."""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Three `paths images` folders (training seeds 0-2, everything else alike) under ROOT/w4/seed{s}/, made in this
    process (the command's own functions; the command itself runs in test_paths_images.py). Widths 10³ and 10⁴:
    their saddle points take 2 Newton steps where N = 10 takes 6 (the theory is most of a network's cost here)."""
    from dotattn.paths.images_study import load_image_data, run_image_study, write_image_study

    base = tmp_path_factory.mktemp("networks")
    omni = make_omniglot(base / "omni", alphabets=2, chars=5, zipped=True)
    fm = make_idx(base / "fm")
    root = base / "runs"
    data = load_image_data(_config(omni, fm, 0))  # the episodes do not depend on the training seed
    for s in SEEDS:
        cfg = _config(omni, fm, s)
        out = root / f"w{WIDTH}" / f"seed{s}"
        out.mkdir(parents=True)
        write_image_study(run_image_study(cfg, data, out), out, f"test network {s}")
    (root / "claims" / "w4_seed9").mkdir(parents=True)  # the study script's claim folders: no output, skipped
    (root / "w4" / "seed9").mkdir()  # an unfinished network (no manifest): skipped
    (root / "w4" / "seed9" / "gd_checkpoint.pt").write_bytes(b"x")
    return {"root": root, "omni": omni, "fm": fm, "data": data, "base": base}


@pytest.fixture(scope="module")
def output(study):
    """`dotattn paths networks` on the three networks."""
    out = study["base"] / "out"
    r = run("paths", "networks", "--runs", str(study["root"]), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out, r


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


# -- per network ---------------------------------------------------------------------------------------------


def test_select_width_validation_then_loss_then_smaller_width():
    def e(acc, loss):
        return {"temperature": 0.1, "validation_accuracy": acc, "validation_loss": loss}

    per_N = {"gp": e(0.99, 0.0), "10": e(0.8, 0.5), "100": e(0.9, 0.7), "1000": {"status": "no converged temperature"}}
    assert nw.select_width(per_N) == "100"  # the GP and a width without a converged temperature never count
    assert nw.select_width({**per_N, "20": e(0.9, 0.6)}) == "20"  # tie in accuracy: the lower loss
    assert nw.select_width({**per_N, "500": e(0.9, 0.7), "50": e(0.9, 0.7)}) == "50"  # full tie: the smaller width
    assert nw.select_width({"gp": e(0.9, 0.1)}) is None


def test_network_results_follow_the_rule(study):
    folder = study["root"] / "w4" / "seed1"
    s = _summary(folder)
    rows = nw.network_results(WIDTH, QK, 1, s)
    assert [r.set for r in rows] == list(nw.SETS)
    finite = {k: v for k, v in s["per_N"].items() if k != "gp" and "temperature" in v}
    best = max(finite, key=lambda k: (finite[k]["validation_accuracy"], -finite[k]["validation_loss"], -float(k)))
    scores = [h["score"] for h in s["heads"]]
    for r in rows:
        e = s["per_N"][best][r.set]
        assert r.N_star == float(best) and r.theory_accuracy == e["accuracy"]
        assert r.gain == e["accuracy"] - s["per_N"]["gp"][r.set]["accuracy"]
        assert r.gap == s["gd"][r.set]["accuracy"] - e["accuracy"]
        assert r.pruning_change == s["pruning"][r.set]["gd_change"]["difference"]
        drops = [h[f"gd_drop_{r.set}"] for h in s["heads"]]
        want = stats.spearmanr(scores, drops).statistic if np.ptp(drops) > 0 else math.nan
        assert r.spearman == pytest.approx(want, abs=1e-12, nan_ok=True)  # ranks: the same arithmetic up to rounding


# -- over networks --------------------------------------------------------------------------------------------


def test_mean_se_against_numpy():
    x = [0.1, -0.03, 0.2, 0.05, math.nan]
    m, se, n = nw.mean_se(x)
    v = np.array(x[:4])
    assert n == 4 and m == pytest.approx(v.mean(), rel=1e-14)
    assert se == pytest.approx(np.std(v, ddof=1) / 2.0, rel=1e-14)  # sd (ddof = 1) / sqrt(4)
    assert math.isnan(nw.mean_se([0.3])[1]) and nw.mean_se([])[2] == 0


def test_spearman_rows_against_scipy():
    rng = np.random.default_rng(3)
    s = rng.random((5, 8))
    d = np.round(rng.random((5, 8)), 1)  # ties in the drops: average ranks, as scipy
    want = [stats.spearmanr(a, b).statistic for a, b in zip(s, d, strict=True)]
    assert np.allclose(nw.spearman_rows(s, d), want, rtol=0, atol=1e-12)  # rounding of two equal formulas
    assert math.isnan(nw.spearman_rows(s[:1], np.zeros((1, 8)))[0])


def test_pooled_permutation_p_against_exact_enumeration():
    """Two networks of four heads: all 24 x 24 joint permutations enumerated; the seeded Monte-Carlo p (1e5
    permutations, the rule's count) is within 5 binomial standard errors of the exact share, plus the 1/(1 + B) of
    its convention."""
    scores = np.array([[0.1, 0.4, 0.2, 0.3], [0.5, 0.1, 0.3, 0.2]])
    drops = np.array([[0.0, 0.05, 0.01, 0.02], [0.04, 0.01, 0.01, 0.03]])
    observed = nw.spearman_rows(scores, drops).mean()
    means = []
    for p1 in itertools.permutations(range(4)):
        for p2 in itertools.permutations(range(4)):
            perm = np.array([scores[0, list(p1)], scores[1, list(p2)]])
            means.append(nw.spearman_rows(perm, drops).mean())
    exact = np.mean(np.array(means) >= observed - 1e-12)
    B = nw.PERMUTATIONS
    rho, p = nw.pooled_permutation_p(scores, drops, B, np.random.default_rng(0))
    assert rho == pytest.approx(observed, abs=1e-14)
    assert 0.02 < exact < 0.5  # the case is not degenerate
    assert abs(p - exact) < 5 * math.sqrt(exact * (1 - exact) / B) + 1 / (1 + B)
    again = nw.pooled_permutation_p(scores, drops, B, np.random.default_rng(0))
    assert again == (rho, p)  # seeded: reproducible exactly
    _, p_one = nw.pooled_permutation_p(np.array([[1.0, 2, 3]]), np.array([[1.0, 2, 3]]), 99, np.random.default_rng(1))
    assert p_one == pytest.approx((1 + 99 / 6) / 100, abs=0.1)  # the identity of 3! orders: about 1/6, never 0
    with pytest.raises(ParameterError, match="permutations"):
        nw.pooled_permutation_p(scores, drops, 0, np.random.default_rng(0))


def _rows(n=4, gain=(0.0, 0.0, 0.0), gain_se=(0.01,) * 3, change=(0.0, 0.0, 0.0), change_se=(0.01,) * 3, p=0.5):
    return [
        nw.ClaimRow(
            set=part,
            width=32,
            qk_dim=16,
            n=n,
            gain_mean=gain[i],
            gain_se=gain_se[i],
            gain_n=n,
            gap_mean=0.0,
            gap_se=0.01,
            gap_n=n,
            change_mean=change[i],
            change_se=change_se[i],
            change_n=n,
            rho_mean=0.3,
            rho_n=n,
            p=p if part == "test" else 0.5,
            permutations=1000,
        )
        for i, part in enumerate(nw.SETS)
    ]


def test_claim1_verdict_branches():
    v = nw.claim1_verdict
    assert v(_rows(gain=(0.05, 0.0, 0.03)))["outcome"] == nw.REPRODUCED  # test and digits above 2 se
    assert v(_rows(gain=(0.05, 0.0, 0.0)))["outcome"] == nw.UNDECIDED  # in distribution only
    assert v(_rows(gain=(0.02, 0.05, 0.0)))["outcome"] == nw.UNDECIDED  # exactly 2 se is not "more than"
    assert v(_rows(gain=(-0.02, -0.03, -0.011), gain_se=(0.001,) * 3))["outcome"] == nw.REFUTED  # +2se < 0.01
    assert v(_rows(gain=(-0.02, -0.03, 0.0), gain_se=(0.001,) * 3))["outcome"] == nw.REFUTED  # 0.002 < 0.01
    assert v(_rows(gain=(-0.02, -0.03, 0.009), gain_se=(0.001,) * 3))["outcome"] == nw.UNDECIDED  # 0.011 >= 0.01
    assert v(_rows(n=2, gain=(0.05, 0.05, 0.05)))["outcome"] == nw.NOT_JUDGED
    with pytest.raises(ParameterError):
        v(_rows()[:2])


def test_claim2_verdict_branches():
    v = nw.claim2_verdict
    good = v(_rows(change=(-0.01, 0.05, 0.0), change_se=(0.004, 0.01, 0.01), p=0.001))
    assert good["outcome"] == nw.REPRODUCED and good["helps_out_of_distribution"] == {
        "fashion_mnist": True,
        "digits": False,
    }
    assert v(_rows(change=(-0.01, 0.05, 0.0), change_se=(0.004, 0.01, 0.01), p=0.01))["outcome"] == nw.UNDECIDED
    assert v(_rows(change=(-0.015, 0.05, 0.0), change_se=(0.004, 0.01, 0.01), p=0.001))["outcome"] == nw.UNDECIDED
    assert v(_rows(change=(-0.01, 0.0, 0.0), change_se=(0.004, 0.01, 0.01), p=0.001))["outcome"] == nw.UNDECIDED
    assert v(_rows(change=(-0.05, 0.0, 0.0), change_se=(0.01, 0.01, 0.01), p=0.2))["outcome"] == nw.REFUTED
    assert v(_rows(change=(-0.05, 0.0, 0.0), change_se=(0.01, 0.01, 0.01), p=0.005))["outcome"] == nw.UNDECIDED
    assert v(_rows(change=(-0.03, 0.0, 0.0), change_se=(0.01, 0.01, 0.01), p=0.2))["outcome"] == nw.UNDECIDED
    assert v(_rows(n=1, p=0.001))["outcome"] == nw.NOT_JUDGED


def _records(width, qk, seeds, rng):
    results, heads = [], []
    for s in seeds:
        for part in nw.SETS:
            g = float(rng.normal(0.01 * width, 0.01))
            results.append(
                nw.NetworkResult(
                    width, qk, s, part, 10.0, 1.0, 0.8, 0.5, 0.8, 0.78, 0.78 - g, g, 0.01, 0.02, 0.3, -0.01, 0.01
                )
            )
        scores = rng.random(8)
        for k in range(8):
            drops = {f"drop_{p}": float(rng.random()) for p in nw.SETS}
            heads.append(nw.HeadRow(width, qk, s, k // 4 + 1, k % 4 + 1, float(scores[k]), 1, **drops))
    return results, heads


def test_analyse_groups_by_size_and_refuses_mixed_sizes():
    rng = np.random.default_rng(5)
    r1, h1 = _records(32, 16, (0, 1, 2, 3), rng)
    r2, h2 = _records(64, 32, (0, 1), rng)
    study = nw.analyse(r1 + r2, h1 + h2, permutations=2000)
    assert [(c.set, c.width, c.n) for c in study.claims] == [(p, w, n) for p in nw.SETS for w, n in ((32, 4), (64, 2))]
    gains = [r.gain for r in r1 if r.set == "digits"]
    c = next(c for c in study.claims if c.set == "digits" and c.width == 32)
    assert c.gain_mean == pytest.approx(np.mean(gains), rel=1e-14) and c.gain_n == 4
    v = study.verdicts()
    assert set(v) == {"32", "64"} and v["64"]["claim1"]["outcome"] == nw.NOT_JUDGED
    assert v["32"]["claim2"]["outcome"] != nw.NOT_JUDGED
    with pytest.raises(ParameterError, match="two networks"):
        nw.analyse(r1 + r1[:3], h1, permutations=100)
    r3, h3 = _records(32, 8, (7,), rng)
    with pytest.raises(ParameterError, match="query/key dimensions"):
        nw.analyse(r1 + r3, h1 + h3, permutations=100)
    with pytest.raises(ParameterError, match="no networks"):
        nw.analyse([], [])


# -- the command ---------------------------------------------------------------------------------------------


def test_command_end_to_end_and_verify_strict(study, output):
    out, r = output
    assert "3 networks" in r.stdout and "claim 1" in r.stdout
    s = _summary(out)
    assert [(n["width"], n["qk_dim"], n["train_seed"]) for n in s["networks"]] == [(WIDTH, QK, x) for x in SEEDS]
    for n in s["networks"]:
        src = study["root"] / n["folder"]
        assert sha256_file(out / n["file"]) == sha256_file(src / "summary.json") == n["sources"]["summary.json"]
        assert n["sources"]["gd_network.npz"] == sha256_file(src / "gd_network.npz")
        assert set(n["sets"]) == set(nw.SETS)
    claims = s["claims"]
    assert claims["rule_location"].startswith("results/paths/omniglot_networks/README.md")
    assert claims["permutation"]["permutations"] == nw.PERMUTATIONS
    assert claims["verdicts"]["4"]["claim1"]["outcome"] in (nw.REPRODUCED, nw.REFUTED, nw.UNDECIDED)
    rows = read_csv(out / "networks.csv")
    gains = [float(x["gain"]) for x in rows if x["set"] == "test"]
    c = claims["by_set"]["test"]["4"]
    assert c["n"] == 3 and c["gain"]["mean"] == pytest.approx(np.mean(gains), rel=1e-12, abs=1e-15)
    assert len(read_csv(out / "heads.csv")) == 3 * 8
    assert (out / "claim1_networks.png").is_file() and (out / "claim2_networks.png").is_file()
    assert sum(p.stat().st_size for p in out.iterdir()) < 1_000_000
    v = run("verify", "--strict", str(out))
    assert v.returncode == 0 and "paths-networks" in v.stdout, v.stderr


def test_strict_recomputes_what_the_default_check_cannot(output, tmp_path):
    """A p value edited in claims.csv and summary.json alike, the manifest rewritten: the files agree with each
    other (the default check passes), but --strict recomputes the permutations from the networks' copies."""
    from dotattn.core.integrity import verify_folder

    src, _ = output
    out = tmp_path / "edited"
    shutil.copytree(src, out)
    s = _summary(out)
    text = (out / "claims.csv").read_text().splitlines()
    header = text[[i for i, ln in enumerate(text) if not ln.startswith("#")][0]].split(",")
    j = header.index("p")
    k = next(i for i, ln in enumerate(text) if ln.startswith("test,"))
    cells = text[k].split(",")
    cells[j] = "0.000123"
    text[k] = ",".join(cells)
    (out / "claims.csv").write_text("\n".join(text) + "\n")
    s["claims"]["by_set"]["test"]["4"]["spearman"]["p"] = 0.000123
    write_json(out / "summary.json", s)
    man = json.loads((out / "manifest.json").read_text())
    write_manifest(out, list(man["files"]), man["made_for"], command=man["command"], provenance_record=s["provenance"])
    assert verify_folder(out) == "paths-networks"
    with pytest.raises(IntegrityError, match="verify --strict"):
        verify_folder(out, strict=True)
    (out / "network_w4_seed1.json").write_text("{}")  # a copy replaced: its SHA-256 is not the manifest's
    with pytest.raises(IntegrityError, match="SHA-256"):
        verify_folder(out)


def _copy_runs(study, tmp_path) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(study["root"], root)
    return root


def _edit_parameter(folder: Path, key: str, value) -> None:
    s = _summary(folder)
    s["provenance"]["parameters"][key] = value
    write_json(folder / "summary.json", s)


@pytest.mark.parametrize("case", ["mismatch", "split", "duplicate", "empty", "tampered", "not a folder"])
def test_refusals(study, tmp_path, case):
    from dotattn.paths.networks_output import plan_networks, read_networks

    root = _copy_runs(study, tmp_path)
    words = {
        "mismatch": "P_test",
        "split": "'split'",
        "duplicate": "twice",
        "empty": "no finished paths-images folder",
        "tampered": "SHA-256",
        "not a folder": "not a folder",
    }[case]
    if case == "mismatch":
        _edit_parameter(root / "w4" / "seed2", "P_test", 999)
    elif case == "split":
        s = _summary(root / "w4" / "seed1")
        s["split"]["test"] = list(reversed(s["split"]["test"]))
        write_json(root / "w4" / "seed1" / "summary.json", s)
    elif case == "duplicate":
        shutil.copytree(root / "w4" / "seed1", root / "again" / "seed1")
    elif case == "empty":
        shutil.rmtree(root / "w4")
    elif case == "tampered":
        p = root / "w4" / "seed0" / "heads.csv"
        p.write_text(p.read_text().replace(",1,", ",2,", 1))
    elif case == "not a folder":
        root = root / "nothing"
    with pytest.raises(ParameterError, match=words):
        read_networks(plan_networks(root))


def test_command_refusal_is_one_line_and_creates_nothing(study, tmp_path):
    root = _copy_runs(study, tmp_path)
    _edit_parameter(root / "w4" / "seed2", "split_seed", 5)
    out = tmp_path / "never" / "out"
    r = run("paths", "networks", "--runs", str(root), "--out", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "split_seed" in lines[0] and "training seed" in lines[0], r.stderr
    assert not (tmp_path / "never").exists()


# -- paths images --network ----------------------------------------------------------------------------------


def test_network_reuse_gives_the_same_study(study, tmp_path):
    """A network read back from another folder (verified by that folder's manifest) skips training and gives that
    folder's network accuracies and single-head drops again (the theory here has one width only, which the network's
    settings do not include: cheaper); a copy without a manifest beside it is verified by its metadata."""
    from dotattn.core.integrity import verify_folder
    from dotattn.paths.images_study import read_network_file, run_image_study, write_image_study

    src = study["root"] / "w4" / "seed1"
    cfg = _config(study["omni"], study["fm"], 1, widths=(1000.0,))
    net = read_network_file(src / "gd_network.npz", cfg)
    assert net.record["verified_by"] == "manifest" and net.record["sha256"] == sha256_file(src / "gd_network.npz")
    out = tmp_path / "reuse"
    out.mkdir()
    st = run_image_study(cfg, study["data"], out, network=net)
    write_image_study(st, out, "test reuse")
    assert verify_folder(out, strict=True) == "paths-images"
    s, ref = _summary(out), _summary(src)
    assert s["gd"] == ref["gd"] and set(s["per_N"]) == {"gp", "1000"}
    for part in nw.SETS:
        drops = [h[f"gd_drop_{part}"] for h in s["heads"]]
        assert drops == [h[f"gd_drop_{part}"] for h in ref["heads"]], part
    assert s["provenance"]["parameters"]["network"]["sha256"] == sha256_file(out / "gd_network.npz")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(src / "gd_network.npz", alone / "gd_network.npz")
    assert read_network_file(alone / "gd_network.npz", cfg).record["verified_by"] == "metadata"


def test_network_refusals(study, tmp_path):
    from dotattn.paths.images_study import read_network_file

    src = study["root"] / "w4" / "seed1" / "gd_network.npz"
    with pytest.raises(ParameterError, match=r"gd\.seed = 1, this command has 2"):
        read_network_file(src, _config(study["omni"], study["fm"], 2))
    copy = tmp_path / "copy"
    shutil.copytree(src.parent, copy)
    data = bytearray((copy / "gd_network.npz").read_bytes())
    data[-10] ^= 0xFF
    (copy / "gd_network.npz").write_bytes(bytes(data))
    with pytest.raises(ParameterError, match="not the file"):
        read_network_file(copy / "gd_network.npz", _config(study["omni"], study["fm"], 1))
    (copy / "manifest.json").unlink()  # no manifest: read by its metadata, and a damaged file is refused
    with pytest.raises(ParameterError, match="not a trained network"):
        read_network_file(copy / "gd_network.npz", _config(study["omni"], study["fm"], 1))
    with pytest.raises(ParameterError, match="not a file"):
        read_network_file(tmp_path / "none.npz", _config(study["omni"], study["fm"], 1))
    out = tmp_path / "never"
    args = ["paths", "images", "--omniglot", str(study["omni"]), "--fashion-mnist", str(study["fm"]), *SMALL]
    r = run(*args, "--train-seed", "0", "--network", str(src), "--out", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--network" in lines[0] and "gd.seed" in lines[0], r.stderr
    assert not out.exists()
