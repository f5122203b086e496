"""A Kafka-compatible Brook cluster for tests.

``Brook.start(nodes=3, config={"min.insync.replicas": "2"})`` runs ``brook cluster`` (the
supervisor) as a child process on free loopback ports in a temp directory and drives it through
its HTTP API; the pytest plugin (:mod:`pytest_brook.plugin`) offers it as fixtures.
"""

from pytest_brook.cluster import Brook, BrookError, find_binary

__all__ = ["Brook", "BrookError", "find_binary"]
