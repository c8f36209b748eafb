"""Reproducing the paper: its published numbers as typed data (:mod:`anchor.reproduce.published`)."""
