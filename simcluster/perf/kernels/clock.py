"""The SM clock a GPU sustains under a power limit, and what it does to compute-bound kernels.

Under continuous training load a datacenter GPU runs at its board power limit: the clock settles
where the power drawn equals the limit (NVIDIA's boost algorithm). The GEMM levels of the catalog
are measured at the part's default limit, its TDP (the H100 SXM's 700 W: aiconfigurator's long
kernels, ``analysis/fit_gemm_tiles.py``), so at the TDP the clock fraction is 1 by construction.

A lower limit (``accelerator.power_limit_W``) lowers the clock. Power at SM clock ``f`` is a static
part, which does not change with the clock (leakage, HBM, fans and board), plus CMOS dynamic power
``C V^2 f`` with the voltage rising about linearly with the clock in the DVFS range, so
``P(f) = P_static + (P_tdp - P_static) (f / f_tdp)^3``. A limit ``P`` therefore holds the clock at

    ``f / f_tdp = ((P - P_static) / (P_tdp - P_static)) ** (1/3)``,

and compute-bound kernels (GEMMs, attention) run that much slower; memory-bound kernels keep
their speed (the HBM clock does not follow the SM clock).

A part without a GEMM sweep of its own borrows another part's levels (Blackwell Ultra: B300 takes
the B200's, GB300 the GB200's, docs/catalog.md). Those levels hold at the other part's power
(``accelerator.levels_power_W``: the B200's 1000 W, the GB200's 1200 W, where both sweeps ran
power-limited), so the same law, with ``f_tdp`` the clock at that power, gives the borrowing part's
clock at its own limit: B300 at 1100 W 1.037x, GB300 at 1400 W 1.060x. This assumes the part
draws what the reference draws per clock at the same voltage; Blackwell Ultra's extra NVFP4 units
idle in BF16/FP8 GEMMs, its taller HBM stacks add static power the A100-fitted share does not
know of, so the gain is an upper estimate.

``P_static`` (``accelerator.static_power_W``) comes from the Perseus artifact's A100 SXM training
profile (ml-energy/zeus@38cb3f90 ``sosp24_data/emulation/stage_profile``: GPT-3 175B and BLOOM
pipeline stages, forward and backward, at 38 locked clocks from 1410 to 855 MHz): the cubic law
with a static share of 0.29-0.32 of the ~470 W drawn at 1410 MHz fits both models' 608 points each
to 2-3% RMS, 144 W (``analysis/fit_static_power.py``). Other parts take that value (no other
locked-clock profile is published); the checks are NVIDIA's MLPerf Inference v3.1 DGX H100 MaxQ
submissions (BERT offline at 400 W and 450 W run at 0.770 and 0.821 of the 700 W throughput; the
law gives 0.772 and 0.820) and the Perseus A100 PCIe power-limit sweep (tests/unit/test_clock.py).
"""

from __future__ import annotations

from simcluster.errors import SpecError
from simcluster.spec.hardware import AcceleratorSpec


def power_limit_W(acc: AcceleratorSpec) -> float:
    """The board power limit in force: ``power_limit_W``, else the TDP."""
    return acc.power_limit_W if acc.power_limit_W is not None else acc.tdp_W


def levels_power_W(acc: AcceleratorSpec) -> float:
    """The board power at which the part's compute levels hold: ``levels_power_W``, else the TDP."""
    return acc.levels_power_W if acc.levels_power_W is not None else acc.tdp_W


def clock_fraction(acc: AcceleratorSpec) -> float:
    """SM clock under the power limit over the clock at which the levels were measured (1 there,
    or without a TDP); above 1 where a part with a higher limit borrows another part's levels."""
    limit, ref, static = power_limit_W(acc), levels_power_W(acc), acc.static_power_W
    if acc.tdp_W <= 0 or ref <= 0 or limit == ref:
        return 1.0
    if limit <= static:
        raise SpecError("accelerator.power_limit_W",
                        f"{limit:g} W is at or below the part's static power {static:g} W "
                        "(accelerator.static_power_W): the GPU cannot run its kernels")
    return float(((limit - static) / (ref - static)) ** (1.0 / 3.0))
