"""Benchmarks behind ``ct-bench``: measured figures beside a baseline from the same run."""
