"""Bayes-optimal learning of the attention-indexed model (AIM), L = 1.

Theory 2 of dotattn (docs/aim.md; Boncoraglio, Troiani, Erba, Zdeborová, NeurIPS 2025,
arXiv:2506.01582). Modules: :mod:`~dotattn.aim.prior` (the prior channel: free convolution of
√ρ·Marchenko–Pastur with a semicircle, its MMSE and the rotationally invariant estimator),
:mod:`~dotattn.aim.channels` (softmax and hardmax output functions, the state-evolution q̂),
:mod:`~dotattn.aim.state_evolution` (fixed points, thresholds).

Quick start::

    from dotattn.aim.prior import mmse_prior
    from dotattn.aim.channels import q_hat
    print(mmse_prior(0.3, 0.5), q_hat("hardmax", 0.5, 0.8, 0.5, 2))
"""
