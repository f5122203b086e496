"""The pytest plugin (entry point ``pytest11``): fixtures that hand out Brook clusters.

- ``brook``: one node for the whole session;
- ``brook_cluster``: three nodes for the test module (a test may kill, pause and restart them);
- ``brook_factory``: ``brook_factory(nodes=3, config={...})`` starts more, closed at session end.

``--brook-bin PATH`` (or ``$BROOK_BIN``) runs another binary than the wheel's; ``--brook-keep``
keeps the clusters' directories (data and logs) after the run.
"""

from __future__ import annotations

import pytest

from pytest_brook.cluster import Brook

def pytest_addoption(parser):
    group = parser.getgroup("brook")
    group.addoption("--brook-bin", default=None, help="the brook binary (default: $BROOK_BIN, else the wheel's)")
    group.addoption("--brook-keep", action="store_true", help="keep the clusters' temp directories")


@pytest.fixture(scope="session")
def brook_factory(request):
    started: list[Brook] = []

    def start(nodes: int = 1, config: dict | None = None, **kw) -> Brook:
        kw.setdefault("binary", request.config.getoption("brook_bin"))
        kw.setdefault("keep_dir", request.config.getoption("brook_keep"))
        b = Brook.start(nodes=nodes, config=config, **kw)
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


@pytest.fixture(scope="session")
def brook(brook_factory) -> Brook:
    return brook_factory(nodes=1)


@pytest.fixture(scope="module")
def brook_cluster(request) -> Brook:
    b = Brook.start(nodes=3, config={"min.insync.replicas": "2"},
                    binary=request.config.getoption("brook_bin"), keep_dir=request.config.getoption("brook_keep"))
    yield b
    b.close()
