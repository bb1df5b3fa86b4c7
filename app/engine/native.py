"""Queues and threads of the operating system, not the greenlet versions gevent patches in.

Work the batcher hands off (encoding an image, writing a KV state to disk) runs in a
thread of its own, outside the hub; its queues must block that thread, not a greenlet.
"""

from __future__ import annotations

import queue
from typing import Any

from gevent import monkey

NativeQueue: type[queue.SimpleQueue[Any]] = monkey.get_original("queue", "SimpleQueue")
start_thread = monkey.get_original("_thread", "start_new_thread")
