"""One-shot image episodes (`dotattn paths images`) on small synthetic images: loaders and their refusals,
the character split, episodes and tokens, factored path kernels against dense ones, pruning in the
theory against the trained network's head mask, the trained network's forward pass against the
theory's network, training with checkpoint and resume, and the command end to end. No data files."""

import gzip
import io
import json
import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from clitools import run
from conftest import reduced_and_full

torch = pytest.importorskip("torch")

from dotattn.core.validation import ParameterError  # noqa: E402
from dotattn.paths import images as im  # noqa: E402
from dotattn.paths.analysis import prune_head, prune_heads  # noqa: E402
from dotattn.paths.data import PathData  # noqa: E402
from dotattn.paths.images_gd import (
    GDConfig,
    key_query_matrices,
    predict_network,
    prune_mask,  # noqa: E402
    train_network,
)
from dotattn.paths.images_study import gibbs, paired_difference, spearman_bootstrap  # noqa: E402
from dotattn.paths.network import (
    FactoredKernels,
    attention,
    network_output,
    path_inputs,  # noqa: E402
    path_kernel_diagonal,
    path_kernels,
)
from dotattn.paths.theory import PathsModel, kernel, minimise_action  # noqa: E402


def _png(a: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a.astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _character(rng, size=35):
    """A random dark-stroke glyph on white, as Omniglot draws them."""
    a = np.full((size, size), 255, dtype=np.uint8)
    for _ in range(3):
        r, c = rng.integers(5, size - 5, 2)
        a[r - 1 : r + 2, max(c - 8, 0) : c + 8] = 0
        a[max(r - 8, 0) : r + 8, c - 1 : c + 2] = 0
    return a


def make_omniglot(root: Path, alphabets=2, chars=4, drawers=3, seed=0, zipped=False) -> Path:
    """``<set>/<alphabet>/characterNN/<id>_<drawer>.png`` with small synthetic glyphs (shifted per drawer)."""
    rng = np.random.default_rng(seed)
    files = {}
    for a in range(alphabets):
        for c in range(chars):
            glyph = _character(rng)
            for d in range(1, drawers + 1):
                files[f"set/Alpha{a}/character{c + 1:02d}/{a * 100 + c:04d}_{d:02d}.png"] = _png(np.roll(glyph, d, 1))
    root.mkdir(parents=True, exist_ok=True)
    if zipped:
        with zipfile.ZipFile(root / "set.zip", "w") as zf:
            for name, data in files.items():
                zf.writestr(name, data)
    else:
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
    return root


def _idx(arr: np.ndarray) -> bytes:
    head = bytes([0, 0, 8, arr.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def make_idx(folder: Path, n=30, seed=0) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    X = rng.integers(0, 256, (n, 28, 28))
    y = np.arange(n) % 3  # classes 0, 1 and 2 (2 is not used)
    for part in ("t10k", "train"):
        (folder / f"{part}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(X)))
        (folder / f"{part}-labels-idx1-ubyte").write_bytes(_idx(y))
    return folder


# -- loaders --------------------------------------------------------------------------------------


def test_omniglot_folder_and_zip_agree_and_duplicates_are_read_once(tmp_path):
    a = im.read_omniglot(make_omniglot(tmp_path / "x"))
    z = make_omniglot(tmp_path / "z", zipped=True)
    (z / "copy").mkdir()
    (z / "copy" / "set.zip").write_bytes((z / "set.zip").read_bytes())  # a byte-identical second copy
    b = im.read_omniglot(z)
    assert a.images.shape == b.images.shape == (24, 32, 32)
    assert a.n_classes == 8 and np.array_equal(a.classes, b.classes) and np.allclose(a.images, b.images)
    assert np.allclose(a.images.mean(axis=(1, 2)), 0, atol=1e-12) and np.allclose(a.images.std(axis=(1, 2)), 1)


def test_omniglot_refusals(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        im.read_omniglot(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ParameterError, match="no .png images"):
        im.read_omniglot(tmp_path / "empty")
    bad = make_omniglot(tmp_path / "bad")
    next(bad.rglob("*.png")).write_bytes(b"not a png")
    with pytest.raises(ParameterError, match="does not decode"):
        im.read_omniglot(bad)
    one = make_omniglot(tmp_path / "one", drawers=1)
    with pytest.raises(ParameterError, match="fewer than 2 drawers"):
        im.read_omniglot(one)
    sums = make_omniglot(tmp_path / "sums", zipped=True)
    (sums / "SHA256SUMS").write_text("0" * 64 + "  set.zip\n")
    with pytest.raises(ParameterError, match="SHA-256"):
        im.read_omniglot(sums)


def test_idx_reader_and_refusals(tmp_path):
    s = im.read_idx_set(make_idx(tmp_path / "f"))
    assert s.images.shape == (20, 32, 32) and set(s.classes) == {0, 1}
    (tmp_path / "f" / "t10k-labels-idx1-ubyte").write_bytes(_idx(np.zeros(5))[:-2])
    with pytest.raises(ParameterError, match="truncated"):
        im.read_idx_set(tmp_path / "f")
    (tmp_path / "f" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ParameterError, match="lacks t10k-labels"):
        im.read_idx_set(tmp_path / "f")


# -- split, episodes, tokens ----------------------------------------------------------------------


def test_split_is_by_character_and_refuses_too_few():
    s = im.split_characters(20, (0.6, 0.2), seed=3)
    parts = [set(s.train), set(s.validation), set(s.test)]
    assert sum(map(len, parts)) == 20 and not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert im.split_characters(20, (0.6, 0.2), seed=3) == s
    with pytest.raises(ParameterError, match="too few characters"):
        im.split_characters(6, (0.6, 0.2))


def test_episodes_labels_drawers_and_tokens(tmp_path):
    s = im.read_omniglot(make_omniglot(tmp_path / "o"))
    ep = im.make_episodes(s, np.arange(s.n_classes), 41, np.random.default_rng(0))
    assert np.sum(ep.y > 0) == 21
    c = s.classes[ep.index]
    d = s.drawers[ep.index]
    assert np.all(c[:, 0] != c[:, 1])
    assert np.all((c[:, 2] == c[:, 0]) == (ep.y > 0)) and np.all((c[:, 2] == c[:, 1]) == (ep.y < 0))
    own = np.where(ep.y > 0, d[:, 0], d[:, 1])
    assert np.all(own != d[:, 2])  # the query is by another drawer than its class's support
    x = im.episode_tokens(s, ep)
    assert x.shape == (41, im.N0, im.TOKENS) == (41, 83, 48)
    # token 16 + 5 is support 2's patch 5 (row 1, column 1): pixels, position one-hot, role one-hot
    blk = s.images[ep.index[0, 1]][8:16, 8:16].ravel()
    assert np.allclose(x[0, :64, 21], blk)
    assert np.array_equal(x[0, 64:80, 21], 8 * np.eye(16)[5]) and np.array_equal(x[0, 80:, 21], [0, 8, 0])
    # the three parts have equal mean squared norms (64 each): a standardised image's patches average 64
    assert math.isclose(np.mean(np.sum(x[:, :64] ** 2, axis=1)), 64.0, rel_tol=1e-9)
    assert np.allclose(np.sum(x[:, 64:80] ** 2, axis=1), 64.0) and np.allclose(np.sum(x[:, 80:] ** 2, axis=1), 64.0)


# -- factored kernels, pruning, network --------------------------------------------------------------


def _paths_setup(P=12, Pt=9, N0=7, T=5, H=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    x, xt = rng.standard_normal((P, N0, T)), rng.standard_normal((Pt, N0, T))
    Ws = [[rng.standard_normal((N0, N0)) / N0 for _ in range(h)] for h in H]
    om = lambda z: [np.stack([attention(z, W) for W in layer]) for layer in Ws]  # noqa: E731
    return x, xt, Ws, path_inputs(x, om(x), "mean"), path_inputs(xt, om(xt), "mean"), rng


def test_factored_kernels_equal_dense_and_give_the_same_saddle_point():
    x, xt, Ws, xi, xit, rng = _paths_setup()
    n = xi.shape[0]
    A = rng.standard_normal((n, n))
    U = A @ A.T
    B = rng.standard_normal((9, 12))
    F, D = FactoredKernels(xit, xi), path_kernels(xit, xi)
    assert F.shape == D.shape
    assert np.allclose(kernel(U, F, 0.3), kernel(U, D, 0.3), rtol=1e-12, atol=1e-13)  # round-off of two products
    assert np.allclose(F.adjoint(B), np.tensordot(D, B, axes=([2, 3], [0, 1])), rtol=1e-12, atol=1e-13)
    assert np.allclose(F[1, 4], D[1, 4], rtol=1e-12, atol=1e-14)
    y = np.sign(rng.standard_normal(12))
    model = PathsModel(N=5, temperature=0.1, heads=(2, 3))
    rf = minimise_action(FactoredKernels(xi, xi), y, model)
    rd = minimise_action(path_kernels(xi, xi), y, model)
    assert rf.converged and rd.converged
    assert np.allclose(rf.U, rd.U, rtol=1e-6, atol=1e-8)  # both at stationarity <= 1e-8: U agrees to ~1e-7


def test_prune_heads_equals_the_masked_network_and_prune_head():
    x, xt, Ws, xi, xit, rng = _paths_setup(H=(3, 3))
    y, yt = np.sign(rng.standard_normal(12)), np.sign(rng.standard_normal(9))
    import itertools

    keys = tuple(itertools.product(range(3), range(3)))
    data = PathData(
        head_names=(("a", "b", "c"),) * 2,
        path_keys=keys,
        path_names=tuple(map(str, keys)),
        C_train=FactoredKernels(xi, xi),
        y_train=y,
        C_cross=FactoredKernels(xit, xi),
        C_diag=path_kernel_diagonal(xit),
        y_test=yt,
    )
    model = PathsModel(N=5, temperature=0.1, heads=(3, 3))
    A = rng.standard_normal((9, 9))
    U = A @ A.T
    pruned = [(0, 1), (1, 2)]
    m = prune_mask(2, 3, pruned)
    w = np.array([m[0, k[0]] * m[1, k[1]] for k in keys])  # the path inputs of the masked network
    K = kernel(U, data.C_train, model.kernel_scale) + 0.1 * np.eye(12)
    mean = kernel(U, FactoredKernels(xit * w[:, None, None], xi), model.kernel_scale) @ np.linalg.solve(K, y)
    ev = prune_heads(U, data, model, pruned)
    assert ev.accuracy == np.mean(np.sign(mean) == yt)
    assert math.isclose(ev.loss, np.mean((mean - yt) ** 2), rel_tol=1e-10)
    one = prune_head(U, data, model, 1, 0)
    two = prune_heads(U, data, model, [(1, 0)])
    assert (one.accuracy, one.loss) == (two.accuracy, two.loss)


def test_trained_network_forward_equals_the_theory_network():
    cfg = GDConfig(N=6, qk_dim=3, seed=2)
    from dotattn.paths.images_gd import AttentionNetwork

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 11, 7))
    net = AttentionNetwork(cfg, 11)
    w = {k: v.detach().numpy().astype(float) for k, v in net.named_parameters()}
    om = [np.stack([attention(x, W) for W in layer]) for layer in key_query_matrices(w)]
    ref = network_output(x, om, w["V0"], [w["V"][0], w["V"][1]], w["a"], readout="mean")
    assert np.allclose(predict_network(w, cfg, x), ref, rtol=1e-4, atol=1e-5)  # float32 forward pass
    m = prune_mask(2, 4, [(0, 3)])
    assert np.allclose(m[0], [2 / math.sqrt(3)] * 3 + [0]) and np.all(m[1] == 1)
    Vm = w["V"][0] * m[0][:, None, None]  # the mask scales the head's value matrix
    ref_m = network_output(x, om, w["V0"], [Vm, w["V"][1]], w["a"], readout="mean")
    assert np.allclose(predict_network(w, cfg, x, m), ref_m, rtol=1e-4, atol=1e-5)


def test_training_checkpoint_resumes(tmp_path):
    rng = np.random.default_rng(0)
    xv, yv = rng.standard_normal((20, 5, 4)), np.sign(rng.standard_normal(20))
    sample = lambda e: (
        np.random.default_rng(e).standard_normal((16, 5, 4)),  # noqa: E731
        np.sign(np.random.default_rng(e + 99).standard_normal(16)),
    )
    ck = tmp_path / "ck.pt"
    first = train_network(
        GDConfig(N=4, qk_dim=2, batch=8, epoch_episodes=16, max_epochs=2, patience=50), sample, xv, yv, checkpoint=ck
    )
    assert ck.is_file() and len(first.history) == 2 and first.status == "not_converged"
    later = train_network(
        GDConfig(N=4, qk_dim=2, batch=8, epoch_episodes=16, max_epochs=2, patience=50), sample, xv, yv, checkpoint=ck
    )
    assert len(later.history) == 2  # resumed after the last epoch: nothing left to do
    assert later.history[1]["train_loss"] == first.history[1]["train_loss"]


def _noisy_glyphs(n_classes=40, drawers=3, seed=0) -> im.ImageSet:
    """Random stroke glyphs, one per class; each drawer's image is the glyph plus its own uniform noise."""
    rng = np.random.default_rng(seed)
    images, classes, who = [], [], []
    for c in range(n_classes):
        glyph = np.zeros((32, 32))
        for _ in range(3):
            r, k = rng.integers(4, 28, 2)
            glyph[r - 1 : r + 1, max(k - 7, 0) : k + 7] = 1
            glyph[max(r - 7, 0) : r + 7, k - 1 : k + 1] = 1
        for d in range(drawers):
            images.append(im.standardise_image(glyph + 0.5 * rng.random((32, 32))))
            classes.append(c)
            who.append(d)
    return im.ImageSet(
        "glyphs", np.array(images), np.array(classes), np.array(who), tuple(str(c) for c in range(n_classes))
    )


def test_training_learns_one_shot_matching_on_held_out_classes():
    """The trained network learns a one-shot task that is learnable (query = its support's glyph under new
    noise) on classes it never saw: 80 Adam steps (batch 32) at the default learning rate reach a validation
    accuracy ≥ 0.75 (chance 0.5; 100 episodes, standard error ≤ 0.05, so 0.75 is 5 errors above chance).
    With the one-hots at unit height (1/8 of the tokens' embedding scale) the same 80 steps stay on the
    initial plateau, at least 0.15 lower: the token normalisation is what lets training leave it."""
    s = _noisy_glyphs()
    ev = im.make_episodes(s, np.arange(30, 40), 100, np.random.default_rng(1))
    cfg = GDConfig(N=8, qk_dim=8, batch=32, epoch_episodes=256, max_epochs=10, patience=10)
    accs, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only spin (10x slower on a loaded machine)
    try:
        for scale in (1.0, 1.0 / im.EMBEDDING_SCALE):
            part = np.where(np.arange(im.N0) < im.PATCH**2, 1.0, scale)[:, None]

            def sample(epoch, part=part):
                ep = im.make_episodes(s, np.arange(30), cfg.epoch_episodes, np.random.default_rng([2, epoch]))
                return im.episode_tokens(s, ep) * part, ep.y

            res = train_network(cfg, sample, im.episode_tokens(s, ev) * part, ev.y)
            accs.append(res.best_validation_accuracy)
    finally:
        torch.set_num_threads(threads)
    assert accs[0] >= 0.75 and accs[1] <= accs[0] - 0.15, accs


def test_gd_defaults_of_the_command_are_the_configs():
    """The command's training options default to GDConfig's defaults (one place decides them)."""
    from dotattn.cli.paths import images as command

    d = GDConfig()
    defaults = {p.name: p.default for p in command.params}
    assert {k: defaults[k] for k in ("lr", "batch", "epoch_episodes", "max_epochs", "patience", "qk_dim")} == {
        k: getattr(d, k) for k in ("lr", "batch", "epoch_episodes", "max_epochs", "patience", "qk_dim")
    }
    assert defaults["gd_width"] == d.N


def test_gibbs_and_spearman():
    rng = np.random.default_rng(1)
    mean, var, y = rng.standard_normal(200), rng.random(200), np.sign(rng.standard_normal(200))
    g = gibbs(mean, var, y)
    draws = mean + np.sqrt(var) * rng.standard_normal((4000, 200))
    mc = np.mean(np.sign(draws) == y)
    assert abs(g["gibbs_accuracy"] - mc) < 5 * math.sqrt(0.25 / draws.size) * 20  # draws correlated per episode
    assert math.isclose(g["gibbs_loss"], np.mean((draws - y) ** 2), rel_tol=0.02)
    assert gibbs(mean, 0 * var, y)["gibbs_accuracy"] == g["accuracy"]
    base = np.ones(300, dtype=bool)
    pruned = np.array([rng.random(300) > p for p in (0.0, 0.1, 0.3, 0.5)])
    r = spearman_bootstrap(np.array([0.1, 0.2, 0.3, 0.4]), base, pruned, 200, rng)
    assert r["spearman"] == 1.0 and r["low"] > 0.5


def test_paired_difference():
    """a right on 6 of 8 episodes, b on 4, b's a subset of a's: differences (1, 1, 0 × 6), mean 1/4, sample
    sd from Σ(d − 1/4)² = 2 · (3/4)² + 6 · (1/4)² = 1.5: √(1.5/7)."""
    a = np.array([1, 1, 1, 1, 1, 1, 0, 0], dtype=bool)
    b = np.array([0, 0, 1, 1, 1, 1, 0, 0], dtype=bool)
    r = paired_difference(a, b)
    assert math.isclose(r["difference"], 0.25) and math.isclose(r["error"], math.sqrt(1.5 / 7) / math.sqrt(8))
    assert paired_difference(b, a)["difference"] == -r["difference"]
    with pytest.raises(ValueError):
        paired_difference(a[:1], b[:1])


# -- the command ----------------------------------------------------------------------------------

SMALL = [
    "--P",
    "16",
    "--P-validation",
    "12",
    "--P-test",
    "12",
    "--P-ood",
    "12",
    "--N",
    "10,1000",
    "--temperatures",
    "0.1",
    "--gd-width",
    "4",
    "--qk-dim",
    "2",
    "--epoch-episodes",
    "16",
    "--max-epochs",
    "2",
    "--sample-N",
    "0",
    "--bootstrap",
    "20",
    "--theory-tol",
    "1e-6",
]


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    pytest.importorskip("sklearn")
    root = tmp_path_factory.mktemp("imgdata")
    return make_omniglot(root / "omni", alphabets=2, chars=5, zipped=True), make_idx(root / "fm")


@reduced_and_full("widths, rerun", ("1000", False), ("10,1000", True))
def test_command_end_to_end_and_reuse(sets, tmp_path, widths, rerun):
    """The command on synthetic images; the full form solves the theory at two widths (the reduced one at
    N = 1000 only: the same solver; N = 10 is the run's most expensive saddle point, and a finite width runs
    by default in test_paths_outputs.py::test_theory_command_with_two_outputs), then runs the command again
    and checks that the trained network is reused from the output folder."""
    omni, fm = sets
    out = tmp_path / "out"
    i = SMALL.index("--N")
    small = [*SMALL[:i], "--N", widths, *SMALL[i + 2 :]]
    r = run(*["paths", "images", "--omniglot", str(omni), "--fashion-mnist", str(fm), *small, "--out", str(out)])
    assert r.returncode == 0, r.stderr
    start = next(ln for ln in r.stderr.splitlines() if ln.startswith("paths images: "))  # the shared start line
    assert "saddle points" in start and "typically " in start and "at the present load" in start, start
    s = json.loads((out / "summary.json").read_text())
    assert s["temperature_selected_on"] == "validation" and set(s["per_N"]) == {"gp", *widths.split(",")}
    assert len(s["heads"]) == 8 and len(s["paths"]) == 16 and s["counts"]["characters"]["test"] == 2
    assert not (out / "gd_checkpoint.pt").exists()
    # one temperature in the grid: the fixed-temperature table is the per-width table
    fixed = s["fixed_temperature"]["0.1"]
    for key in s["per_N"]:
        if "test" in s["per_N"][key]:
            assert fixed[key]["test"] == s["per_N"][key]["test"]["accuracy"], key
    N = widths.split(",")[0]  # the smallest width
    if "test" in s["per_N"]["gp"] and "test" in s["per_N"][N]:
        d = s["per_N"][N]["test"]["minus_gp"]
        assert (
            math.isclose(
                d["difference"],
                s["per_N"][N]["test"]["accuracy"] - s["per_N"]["gp"]["test"]["accuracy"],
                abs_tol=1e-12,
            )
            and d["error"] >= 0
        )
    change = s["pruning"]["test"]["gd_change"]["difference"]
    assert math.isclose(
        change, s["pruning"]["test"]["gd_accuracy_pruned"] - s["pruning"]["test"]["gd_accuracy"], abs_tol=1e-12
    )
    v = run(*["verify", "--strict", str(out)])  # --strict: the selection rule, errors, ranks re-derived too
    assert v.returncode == 0 and "paths-images" in v.stdout, v.stderr
    if not rerun:
        return
    again = run(*["paths", "images", "--omniglot", str(omni), "--fashion-mnist", str(fm), *small, "--out", str(out)])
    assert again.returncode == 0 and "reusing the trained network" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("collapsed", [True, False])
def test_command_sampling_check(sets, tmp_path, collapsed):
    """The sampling check inside the command: on the collapsed posterior of the order parameters (126
    coordinates at N = 10, one short chain) or over the weights; the record names the sampler and holds
    finite accuracies of the sampled and the saddle-point predictors. Slow (JAX compiles the sampler, about
    a minute on a loaded 2-core machine); what runs by default instead: the samplers' own tests
    (test_paths_sampler.py, test_paths_collapsed.py) and the refusal of a collapsed chain too large for
    the sampler before any computation (test_config_refusals)."""
    omni, fm = sets
    out = tmp_path / "out"
    i = SMALL.index("--sample-N")
    small = SMALL[:i] + SMALL[i + 2 :]
    args = [
        "--sample-N",
        "10",
        "--sample-P",
        "10",
        "--sample-chains",
        "1",
        "--sample-warmup",
        "20",
        "--sample-draws",
        "10",
        "--sample-tree-depth",
        "4",
    ] + (["--sample-collapsed"] if collapsed else [])
    r = run(*["paths", "images", "--omniglot", str(omni), "--fashion-mnist", str(fm), *small, *args, "--out", str(out)])
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())["sampling_check"]
    assert ("collapsed" in s["sampler"]) == collapsed and s["N"] == 10 and s["P"] == 10
    assert 0 <= s["accuracy_sampled"] <= 1 and 0 <= s["accuracy_theory"] <= 1 and math.isfinite(s["loss_sampled"])


def test_config_refusals():
    from dotattn.paths.images_study import ImageStudyConfig

    for kw, words in (
        ({"P": 5}, "[10, 5000]"),
        ({"widths": (0,)}, "N (width)"),
        ({"temperatures": (0,)}, "temperature"),
        ({"widths": ()}, "N grid is empty"),
        ({"sample_N": 500}, "sample-N"),
    ):
        with pytest.raises(ParameterError, match=re.escape(words)):
            ImageStudyConfig(omniglot="o", fashion_mnist="f", **kw)
    with pytest.raises(ParameterError, match="collapsed coordinates"):  # 8^4 paths at N = 200: far too many
        ImageStudyConfig(
            omniglot="o", fashion_mnist="f", gd=GDConfig(layers=4, heads=8), sample_N=200, sample_collapsed=True
        )
    with pytest.raises(ParameterError, match="gd-width"):
        GDConfig(N=1)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--P", "5"], ["P (training episodes", "[10, 5000]"]),
        (["--omniglot", "/nonexistent/omniglot"], ["--omniglot", "does not exist"]),
        (["--fashion-mnist", "/nonexistent/fm"], ["--fashion-mnist", "not a folder"]),
        (["--train-seed", "-1"], ["--train-seed", "[0, 4294967295]"]),
    ],
)
def test_command_refusals(sets, tmp_path, args, words):
    omni, fm = sets
    out = tmp_path / "never"
    base = ["paths", "images", "--omniglot", str(omni), "--fashion-mnist", str(fm), *SMALL, "--out", str(out)]
    for i in range(0, len(args), 2):
        if args[i] in base:
            base[base.index(args[i]) + 1] = args[i + 1]
        else:
            base += args[i : i + 2]
    r = run(*base)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not out.exists()


def test_command_refuses_another_commands_folder(sets, tmp_path):
    """An --out that holds another command's output (here a `paths theory` folder, whose points.csv has the
    same name) is refused in one line, exit 2, before anything is trained, and is left as it was."""
    omni, fm = sets
    out = tmp_path / "theory"
    out.mkdir()
    (out / "points.csv").write_text("subset,N,accuracy\nall,10,0.9\n")
    (out / "summary.json").write_text("{}")
    before = sorted(p.name for p in out.iterdir())
    r = run(*["paths", "images", "--omniglot", str(omni), "--fashion-mnist", str(fm), *SMALL, "--out", str(out)])
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("data:")]
    assert len(lines) == 1 and "another command's output" in lines[0] and "paths-theory" in lines[0], r.stderr
    assert sorted(p.name for p in out.iterdir()) == before


def test_training_episodes_follow_the_training_seed_only(sets):
    """--train-seed varies the network's training episodes (and initial weights) with the evaluation
    episodes fixed: the epoch sampler depends on the network's seed, not on the study's --seed."""
    from dotattn.paths.images_study import ImageStudyConfig, gd_epoch_sampler, load_image_data

    omni, fm = sets

    def config(seed: int, train_seed: int) -> ImageStudyConfig:
        gd = GDConfig(N=4, qk_dim=2, epoch_episodes=8, seed=train_seed)
        return ImageStudyConfig(
            omniglot=str(omni),
            fashion_mnist=str(fm),
            gd=gd,
            P=10,
            P_validation=10,
            P_test=10,
            P_ood=10,
            seed=seed,
            sample_N=0,
        )

    base, other_network, other_study = config(0, 0), config(0, 1), config(3, 0)
    data = load_image_data(base)
    x0, y0 = gd_epoch_sampler(data, base)(0)
    x1, _ = gd_epoch_sampler(data, other_network)(0)
    x2, y2 = gd_epoch_sampler(data, other_study)(0)
    assert not np.array_equal(x0, x1)
    assert np.array_equal(x0, x2) and np.array_equal(y0, y2)
    assert np.array_equal(load_image_data(other_network).episodes["test"][1].targets, data.episodes["test"][1].targets)
