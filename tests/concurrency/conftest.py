"""The concurrency suite reuses the integration helpers (util.py: mounts,
kernel oracle) and tests/servers.py (nginx)."""
import os
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(TESTS, "integration"), TESTS]
