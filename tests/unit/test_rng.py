"""rng.py: streams are reproducible and independent by identity."""

from __future__ import annotations

from simcluster.rng import generator


def test_same_identity_same_draws() -> None:
    a = generator(7, 0, "failures", 3).random(5)
    b = generator(7, 0, "failures", 3).random(5)
    assert (a == b).all()


def test_different_identity_different_draws() -> None:
    base = generator(7, 0, "failures", 3).random(5)
    for other in (generator(8, 0, "failures", 3), generator(7, 1, "failures", 3),
                  generator(7, 0, "repairs", 3), generator(7, 0, "failures", 4)):
        assert (other.random(5) != base).all()
