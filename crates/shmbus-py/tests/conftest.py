"""Shared fixtures: every test gets its own domain in a scratch root directory."""

import itertools
import os

import pytest

import shmbus

_names = itertools.count()


@pytest.fixture
def domain(tmp_path):
    """A fresh domain under a scratch root (not /dev/shm's default)."""
    return shmbus.Domain(f"pytest{os.getpid()}x{next(_names)}", root=str(tmp_path))


@pytest.fixture
def scratch_env(tmp_path):
    """An environment for child processes using the same scratch root."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env
