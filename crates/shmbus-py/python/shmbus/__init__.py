"""Shared-memory messaging for Linux: topic, queue, stream, pool, service and journal.

Every kind is made with ``<Kind>.create_or_open(domain, name, **config)`` (a directory for
the journal), opened with ``<Kind>.open(domain, name)``, and gives endpoints from the
handle (``topic.publisher()``). Sends take any contiguous bytes-like object; receives
copy (``recv`` / ``try_recv``) or, where the kind lends its memory, are zero-copy
(``recv_ref``) and export the buffer protocol. Blocking calls release the GIL and are
interrupted by Ctrl-C. Errors are ``shmbus.Error`` subclasses carrying the library's
message. See docs/python.md.
"""

from . import _shmbus
from ._shmbus import *  # noqa: F401,F403

__all__ = [n for n in dir(_shmbus) if not n.startswith("_")]
