"""The positional–semantic theory beside ERM at finite size: the paired-crossing α_c study
(:mod:`~dotattn.theory_vs_erm.alpha_c`, :mod:`~dotattn.theory_vs_erm.crossing`; ``dotattn erm-alpha-c``), the
theory–ERM comparison (:mod:`~dotattn.theory_vs_erm.comparison`; ``dotattn compare``), diagnostics of ERM
restarts against the theory's prox (:mod:`~dotattn.theory_vs_erm.diagnostics`), best-of-K crossings from
``erm-restarts`` folders (:mod:`~dotattn.theory_vs_erm.landscape`, its files
:mod:`~dotattn.theory_vs_erm.landscape_output` and figure :mod:`~dotattn.theory_vs_erm.landscape_plotting`;
``dotattn landscape``), their files
(:mod:`~dotattn.theory_vs_erm.output`) and figures (:mod:`~dotattn.theory_vs_erm.plotting`).

It imports the theory (:mod:`dotattn.positional_semantic`) and the experiments (:mod:`dotattn.erm`); neither
imports it. Torch is imported only when ERM runs."""
