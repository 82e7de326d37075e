"""Settings and ``@task`` functions of ``bench/worker_throughput.py`` (not part of the app)."""
