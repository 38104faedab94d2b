"""Running scenarios: single runs, sweeps and the files they write."""
