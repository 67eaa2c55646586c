"""training-job-exporter: Prometheus metrics for training jobs on Baidu AIHC and Alaya NeW."""

__version__ = "0.1.0"
