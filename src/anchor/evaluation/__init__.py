"""Benchmark datasets and evaluation metrics for the experiments of the ANCHOR paper."""
