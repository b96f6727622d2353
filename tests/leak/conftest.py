"""The leak suite reuses the integration helpers (util.py: mounts,
kernel oracle; httpserve.py: nginx)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "integration"))
