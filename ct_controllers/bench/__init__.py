"""Benchmarks behind ``ct-bench``: each prints measured figures beside a baseline from the same run."""
