"""Attention paths: the finite-width Bayesian theory of multi-head, multi-layer attention.

Theory 3 of dotattn (docs/attention_paths.md; Tiberi, Mignacco, Irie, Sompolinsky, NeurIPS 2024,
arXiv:2405.15926). Modules: :mod:`~dotattn.paths.network` (paths, kernels, the forward pass),
:mod:`~dotattn.paths.task` (the hidden-Markov-chain task), :mod:`~dotattn.paths.data` (its kernels),
:mod:`~dotattn.paths.theory` (the action, its minimiser, the predictor, the GP limit),
:mod:`~dotattn.paths.analysis` (accuracy, head scores, pruning, alignment),
:mod:`~dotattn.paths.sampler` (NUTS; the ``paths`` extra), :mod:`~dotattn.paths.study` and
:mod:`~dotattn.paths.plotting` (the study's files and figures); one-shot images:
:mod:`~dotattn.paths.images` (Omniglot, FashionMNIST, digits; episodes and tokens),
:mod:`~dotattn.paths.images_gd` (the network with learned queries and keys; torch),
:mod:`~dotattn.paths.images_study` and :mod:`~dotattn.paths.images_plotting` (``dotattn paths images``).

Quick start::

    from dotattn.paths.data import markov_path_data
    from dotattn.paths.task import MarkovTask
    from dotattn.paths.theory import PathsModel, minimise_action
    from dotattn.paths.analysis import evaluate
    data = markov_path_data(MarkovTask())
    model = PathsModel(N=10)
    res = minimise_action(data.C_train, data.y_train, model)
    print(res.status, res.U, evaluate(res.U, data, model).accuracy)
"""
