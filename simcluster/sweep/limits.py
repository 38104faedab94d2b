"""Bounds of the later passes (each pass runs a full engine per layout), and the result formats
(small constants the command line reads without importing the sweep)."""

#: Most layouts the DES re-times: a DES step is bounded (at most 524,288 ops, a few seconds), so
#: 1000 of them stay under an hour even for the largest steps (GPT-3 175B: 0.1 s each).
MAX_RERANK = 1000
#: Most configurations the reliability engine runs on: each is a Monte Carlo of the whole run with
#: a golden-section interval search (about 1 s at 16k GPUs with 100 replicas).
MAX_GOODPUT = 100
#: ``--results``: the Parquet table alone (default), or also a plain or gzip-compressed CSV.
RESULT_FORMATS = ("parquet", "csv", "csv.gz")
