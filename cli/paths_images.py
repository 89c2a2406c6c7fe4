"""``dotattn paths images``: one-shot image episodes (Omniglot in distribution, FashionMNIST and digits
out of distribution), a network with learned queries and keys trained by gradient descent, the
finite-width theory and its GP limit with those queries and keys, head scores and pruning."""

from __future__ import annotations

from pathlib import Path

import click

from dotattn.cli.main import missing_extra
from dotattn.cli.options import command_line, output_folder, parse_grid
from dotattn.cli.paths import paths


def _require(command: str, *modules: str) -> None:
    """Import the optional ``modules``; a missing one ends the command with the line naming its extra."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            extra = missing_extra(command, err)
            if extra is None:
                raise
            raise extra from None


@paths.command("images", short_help="One-shot images: trained queries and keys, theory vs GP limit, head pruning.")
@click.option("--omniglot", type=str, required=True,
              help="Omniglot images: a .zip, a folder of zips, or the extracted <set>/<alphabet>/characterNN/*.png "
                   "layout (a SHA256SUMS file beside the zips is checked).")
@click.option("--fashion-mnist", "fashion_mnist", type=str, default="/usr/share/datasets/fashion-mnist",
              show_default=True, help="Folder with the four FashionMNIST IDX files (plain or .gz).")
@click.option("--P", "P", type=int, default=600, show_default=True,
              help="Training episodes of the theory, in [10, 5000].")
@click.option("--P-validation", "P_validation", type=int, default=500, show_default=True,
              help="Validation episodes (validation characters: temperature choice, early stopping), >= 10.")
@click.option("--P-test", "P_test", type=int, default=1000, show_default=True, help="Test episodes, >= 10.")
@click.option("--P-ood", "P_ood", type=int, default=1000, show_default=True,
              help="Episodes of each out-of-distribution set, >= 10.")
@click.option("--N", "N", multiple=True, default=("10,20,50,100,200,500,1000,10000",), show_default=True,
              help="Widths of the theory: comma lists or start:stop:count ranges, each in [1, 1e12].")
@click.option("--temperatures", multiple=True, default=("0.01,0.1,1",), show_default=True,
              help="Temperature grid (chosen per width on the validation episodes), each in [1e-8, 1e4].")
@click.option("--theory-tol", type=float, default=1e-8, show_default=True,
              help="Relative stationarity at which a saddle point counts as converged, in [1e-14, 1e-2].")
@click.option("--gd-width", type=int, default=32, show_default=True, help="Width N of the trained network, in [2, 1024].")
@click.option("--qk-dim", type=int, default=16, show_default=True, help="Query/key dimension G, in [1, 256].")
@click.option("--lr", type=float, default=3e-3, show_default=True, help="Adam learning rate, in (0, 1].")
@click.option("--batch", type=int, default=64, show_default=True, help="Episodes per Adam step, in [1, 4096].")
@click.option("--epoch-episodes", type=int, default=1024, show_default=True,
              help="Fresh training episodes per epoch, in [1, 1e6].")
@click.option("--max-epochs", type=int, default=40, show_default=True, help="Most epochs, in [1, 1e4].")
@click.option("--patience", type=int, default=8, show_default=True,
              help="Stop after this many epochs without a better validation accuracy, in [1, 1e4].")
@click.option("--sample-N", "sample_N", type=int, default=10, show_default=True,
              help="Width of the posterior-sampling check (NUTS), in [0, 200]; 0: no check.")
@click.option("--sample-P", "sample_P", type=int, default=100, show_default=True,
              help="Training episodes of the sampling check (the first of the theory's), in [10, 2000].")
@click.option("--sample-chains", type=int, default=2, show_default=True, help="NUTS chains, in [1, 64].")
@click.option("--sample-warmup", type=int, default=200, show_default=True, help="NUTS warm-up steps per chain.")
@click.option("--sample-draws", type=int, default=200, show_default=True, help="NUTS kept draws per chain, >= 4.")
@click.option("--sample-tree-depth", type=int, default=10, show_default=True, help="NUTS maximum tree depth, in [1, 15].")
@click.option("--bootstrap", type=int, default=1000, show_default=True,
              help="Bootstrap resamples of the test episodes for the rank-correlation interval, in [10, 1e5].")
@click.option("--split-seed", type=int, default=0, show_default=True, help="Seed of the character split, >= 0.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the episodes, the network's initial weights and the sampler, >= 0.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (summary.json, CSVs, gd_network.npz, figures, manifest.json).")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def images(omniglot: str, fashion_mnist: str, P: int, P_validation: int, P_test: int, P_ood: int,
           N: tuple[str, ...], temperatures: tuple[str, ...], theory_tol: float, gd_width: int, qk_dim: int,
           lr: float, batch: int, epoch_episodes: int, max_epochs: int, patience: int, sample_N: int, sample_P: int,
           sample_chains: int, sample_warmup: int, sample_draws: int, sample_tree_depth: int, bootstrap: int, split_seed: int, seed: int,
           out: str, quiet: bool) -> None:
    """One-shot image classification: trained queries and keys, theory against its GP limit, head pruning.

    Splits Omniglot by character (train / validation / test), trains the attention-paths network with
    learned queries and keys (2 layers x 4 heads) by Adam with early stopping on the validation
    characters, then, with its queries and keys frozen, solves the finite-width theory per width and
    temperature, keeps per width the temperature best on the validation episodes, and reports
    accuracy and loss on the test characters, FashionMNIST and digits; head scores from U at the
    smallest width against the accuracy drops of pruning each head of the trained network. A
    finished training is reused from the output folder; an interrupted one resumes. Needs torch
    (erm extra), scikit-learn (images extra) and, for the sampling check, NumPyro (paths extra).
    """
    from dotattn.paths.images_study import ImageStudyConfig

    from dotattn.paths.images_gd import GDConfig

    gd = GDConfig(N=gd_width, qk_dim=qk_dim, lr=lr, batch=batch, epoch_episodes=epoch_episodes,
                  max_epochs=max_epochs, patience=patience, seed=seed)
    config = ImageStudyConfig(omniglot=omniglot, fashion_mnist=fashion_mnist, gd=gd, P=P, P_validation=P_validation,
                              P_test=P_test, P_ood=P_ood, widths=tuple(parse_grid("N", N)),
                              temperatures=tuple(parse_grid("temperatures", temperatures)), theory_tol=theory_tol,
                              seed=seed, split_seed=split_seed, bootstrap=bootstrap, sample_N=sample_N,
                              sample_P=sample_P, sample_chains=sample_chains, sample_warmup=sample_warmup,
                              sample_draws=sample_draws, sample_tree_depth=sample_tree_depth)
    _require("paths images", "torch")
    if sample_N:
        _require("paths images (sampling check; --sample-N 0 skips it)", "jax", "numpyro")
    from dotattn.paths.images_study import load_image_data, run_image_study, write_image_study

    say = None if quiet else (lambda line: click.echo(line, err=True))
    data = load_image_data(config)  # refuses bad data before any folder exists
    if say:
        c = data.counts()
        say(f"data: {c['characters']} characters, images {c['images']}, episodes {c['episodes']}")
    from dotattn.core.runner import Interrupted

    with output_folder(out, "paths images", "paths-images") as folder:
        try:
            study = run_image_study(config, data, Path(folder), progress=say)
            write_image_study(study, Path(folder), command_line())
        except Interrupted as err:
            raise Interrupted(err.signum, err.detail, "paths images: interrupted; the same command resumes the "
                              "training from its checkpoint (or reuses the trained network) in "
                              f"{folder}") from None
    if not quiet:
        click.echo(f"wrote {Path(folder) / 'summary.json'} ({study.timings['total_seconds']:.0f} s)")
