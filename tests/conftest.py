import os

import matplotlib
import pytest

matplotlib.use("Agg")

SLOW = os.environ.get("DOTATTN_SLOW") == "1"


@pytest.fixture(scope="session")
def toy():
    from dotattn.problem import Problem
    return Problem(omega=0.3)
