"""Recording ROS 2 messages to MCAP, off the caller's thread.

The file is what ``ros2 bag record -s mcap`` writes and Foxglove opens: profile ``ros2``, each
topic a channel with message encoding ``cdr``, each type a schema with encoding ``ros2msg``
named ``package/msg/Type`` (``package/action/Type`` for an action's parts), whose text is the
type's definition followed by those of the types it uses (``MSG: package/Type`` blocks between
lines of ``=``). The CDR bytes are rclpy's own serialization of the message, exactly what goes
on the wire. The definitions are generated from the message classes (field types and names,
so every decoder reads them; constants and comments are not carried).

Writing, in real time (the node, paced loops): another Python process writes the file (MCAP
records, zstd chunk compression), so that none of that work holds this process's GIL, which
the control thread needs every period (measured with ``ct-bench loop --record``: a writer thread
in the node's process added hundreds of overruns per 15 s on a loaded machine). Here
:meth:`McapRecorder.write` frames the CDR bytes and queues them; a thread hands the queue to the
writer every 250 ms in one pipe write. A publisher that records what it publishes serializes each
message once and hands the bytes to both (rclpy publishes CDR bytes as they are). A full queue
(the writer slower than the messages) drops the message and counts it. A lockstep run (not
real-time) writes in the caller's thread instead (``process=False``), between ticks, where no
tick is timed.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import logging
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.serialization import serialize_message
from rosidl_parser.definition import (
    AbstractNestedType,
    AbstractString,
    AbstractWString,
    Array,
    BasicType,
    BoundedSequence,
    BoundedString,
    BoundedWString,
    NamespacedType,
)

from ct_controllers.ros.mcap_writer import CHANNEL, HEADER, MESSAGE, READY, McapFile

LOG = logging.getLogger("ct_controllers")
QUEUE_SIZE = 20_000  # messages waiting to be handed over (~10 s of the node's state topics)
SEPARATOR = "=" * 80
_IDL_TO_MSG = {
    "double": "float64",
    "float": "float32",
    "boolean": "bool",
    "octet": "byte",
    "char": "char",
    "wchar": "char",
}


def type_name(message_class: type) -> str:
    """``package/msg/Type`` (or ``package/action/Type_Goal``, ...) of a generated message class."""
    package, kind = message_class.__module__.split(".")[:2]
    return f"{package}/{kind}/{message_class.__name__}"


def _field_type(slot: Any, dependencies: list[NamespacedType]) -> str:
    if isinstance(slot, AbstractNestedType):
        inner = _field_type(slot.value_type, dependencies)
        if isinstance(slot, Array):
            return f"{inner}[{slot.size}]"
        if isinstance(slot, BoundedSequence):
            return f"{inner}[<={slot.maximum_size}]"
        return f"{inner}[]"
    if isinstance(slot, BasicType):
        return _IDL_TO_MSG.get(slot.typename, slot.typename)
    if isinstance(slot, AbstractWString):
        bound = f"<={slot.maximum_size}" if isinstance(slot, BoundedWString) else ""
        return f"wstring{bound}"
    if isinstance(slot, AbstractString):
        bound = f"<={slot.maximum_size}" if isinstance(slot, BoundedString) else ""
        return f"string{bound}"
    if isinstance(slot, NamespacedType):
        dependencies.append(slot)
        return f"{slot.namespaces[0]}/{slot.name}"
    raise TypeError(f"unsupported field type {slot!r}")


def _fields(message_class: type, dependencies: list[NamespacedType]) -> str:
    names = list(message_class.get_fields_and_field_types())  # type: ignore[attr-defined]
    slots = message_class.SLOT_TYPES  # type: ignore[attr-defined]
    return "\n".join(
        f"{_field_type(slot, dependencies)} {name}" for slot, name in zip(slots, names, strict=True)
    )


def _class_of(namespaced: NamespacedType) -> type:
    module = importlib.import_module(".".join(namespaced.namespaces))
    message_class: type = getattr(module, namespaced.name)
    return message_class


def message_definition(message_class: type) -> str:
    """The ``ros2msg`` text of a message type: its fields, then each type it uses (depth
    first, once each) as a ``MSG: package/Type`` block."""
    dependencies: list[NamespacedType] = []
    blocks = [_fields(message_class, dependencies)]
    done: set[str] = set()
    while dependencies:
        nested = dependencies.pop(0)
        name = f"{nested.namespaces[0]}/{nested.name}"
        if name in done:
            continue
        done.add(name)
        blocks.append(f"{SEPARATOR}\nMSG: {name}\n{_fields(_class_of(nested), dependencies)}")
    return "\n".join(blocks) + "\n"


@dataclass
class RecordingSummary:
    """What a recording holds: messages per topic, dropped messages, the file."""

    path: str
    counts: dict[str, int] = field(default_factory=dict)
    dropped: int = 0

    @property
    def messages(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        dropped = f", {self.dropped} dropped (queue full)" if self.dropped else ""
        return (
            f"recorded {self.messages} messages on {len(self.counts)} topics to "
            f"{self.path}{dropped}"
        )


BATCH_PERIOD = 0.25
PIPE_SIZE = 1 << 20  # [B] the pipe to the writer process (Linux F_SETPIPE_SZ; best effort)


class McapRecorder:
    """Records ROS 2 messages to an MCAP file; :meth:`write` from any thread, :meth:`close`
    once.

    ``process=True`` (real-time runs: the node, paced loops): another Python process writes
    the file, so its work takes nothing from this process's GIL, which the control thread needs
    every period. Here :meth:`write` frames the CDR bytes and queues them (a full queue drops the
    message, counted); a thread wakes every ``BATCH_PERIOD`` and hands the queued frames to the
    writer in one pipe write (the GIL is released during the write).
    ``process=False`` (lockstep runs): :meth:`write` writes at once, in the caller's thread."""

    def __init__(
        self, path: str | Path, process: bool = True, queue_size: int = QUEUE_SIZE
    ) -> None:
        self.path = str(path)
        self.process = process
        self.summary = RecordingSummary(self.path)
        self._lock = threading.Lock()
        self._channels: dict[str, int] = {}
        self._closed = False
        self._file: McapFile | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._queue: queue.Queue[bytes] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ct-mcap-recorder", daemon=True)
        self._error: str | None = None
        if not process:
            self._file = McapFile(self.path)
            return
        self._child = subprocess.Popen(
            [sys.executable, "-m", "ct_controllers.ros.mcap_writer", self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._child.stdin is not None and self._child.stdout is not None
        with contextlib.suppress(OSError, AttributeError):  # a bigger pipe absorbs stalls
            fcntl.fcntl(self._child.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        # Started (imports done, the file open) before this returns: before the loop runs.
        if self._child.stdout.readline() != READY:
            self._child.kill()
            raise RuntimeError(f"recording to {self.path}: the MCAP writer did not start")
        self._thread.start()

    def write(
        self,
        topic: str,
        message: Any,
        log_time: int | None = None,
        message_type: type | None = None,
    ) -> None:
        """Record ``message`` on ``topic`` at ``log_time`` [ns] (default: the system clock
        now). ``message`` may be its CDR bytes already serialized (e.g. to publish them too:
        serialized once for both), then ``message_type`` names its class."""
        if self._closed:
            return
        if isinstance(message, bytes):
            if message_type is None:
                raise TypeError(f"{topic}: serialized bytes need their message_type")
            data = message
        else:
            message_type = type(message)
            data = serialize_message(message)
        stamp = time.time_ns() if log_time is None else int(log_time)
        with self._lock:
            channel = self._channels.get(topic)
            if channel is None:
                channel = self._new_channel(topic, message_type)
            if self._file is not None:
                self._file.add(channel, stamp, data)
                return
        try:
            self._queue.put_nowait(HEADER.pack(MESSAGE, channel, 0, len(data), stamp) + data)
        except queue.Full:
            self.summary.dropped += 1

    def _new_channel(self, topic: str, message_type: type) -> int:
        name, definition = type_name(message_type), message_definition(message_type)
        if self._file is not None:
            channel = self._file.channel(topic, name, definition)
        else:
            channel = len(self._channels)
            parts = [topic.encode(), name.encode(), definition.encode()]
            header = HEADER.pack(CHANNEL, *(len(p) for p in parts), 0)
            self._queue.put(header + b"".join(parts))  # never dropped (once per topic)
        self._channels[topic] = channel
        return channel

    def close(self, timeout: float = 30.0) -> RecordingSummary:
        """Write what is queued, finish the file (summary, indexes) and close it."""
        if self._closed:
            return self.summary
        self._closed = True
        if self._file is not None:
            self._file.finish()
            self.summary.counts = dict(self._file.counts)
            return self.summary
        assert self._child is not None and self._child.stdin is not None
        self._stop.set()
        self._thread.join(timeout)
        output, _ = self._child.communicate(timeout=timeout)  # closes its input: the end
        if self._error is not None or self._child.returncode != 0:
            raise RuntimeError(
                f"recording to {self.path} failed: {self._error or 'the writer exited '}"
                f"{'' if self._error else self._child.returncode}"
            )
        self.summary.counts = json.loads(output.decode())
        return self.summary

    def _run(self) -> None:
        assert self._child is not None and self._child.stdin is not None
        stream = self._child.stdin
        while True:
            stopping = self._stop.wait(BATCH_PERIOD)
            frames = []
            with contextlib.suppress(queue.Empty):
                while True:
                    frames.append(self._queue.get_nowait())
            if frames and self._error is None:
                try:
                    stream.write(b"".join(frames))
                    stream.flush()
                except OSError as exc:  # the writer died: say why at close
                    LOG.error("recording to %s stopped: %s", self.path, exc)
                    self._error = str(exc)
            if stopping:
                return
