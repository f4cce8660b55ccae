"""The MCAP writer process of :class:`ct_controllers.ros.recorder.McapRecorder`, and the MCAP
file writing both use. Imports only the ``mcap`` package and the standard library: the process
starts in a fraction of the time an rclpy import takes, and what it does at start competes
less with the recording process (see the recorder's module docstring).

Frames from the recorder on stdin: a header (kind, three sizes or a channel index and a size,
a log time [ns]) then its byte strings; kind 1 registers a channel (topic, type name, ros2msg
definition), kind 2 is a message (channel index, CDR bytes). The process writes ``READY`` on
stdout once the file is open, and at the end of its input finishes the file and writes the
messages per topic as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import sys
from typing import Any

from mcap.well_known import MessageEncoding, SchemaEncoding
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter

READY = b"ready\n"


class McapFile:
    """The MCAP writing itself, in one thread: a schema per message type, a channel per topic
    (registered with :meth:`channel` before its first message)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "wb")  # noqa: SIM115 (closed by finish())
        self._writer = McapWriter(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile="ros2", library="ct_controllers")
        self._schemas: dict[str, int] = {}
        self._topics: list[str] = []
        self._channels: list[int] = []
        self._sequences: list[int] = []
        self.counts: dict[str, int] = {}

    def channel(self, topic: str, type_name: str, definition: str) -> int:
        """A new channel (its index: 0, 1, ...) for ``topic`` of type ``type_name``."""
        schema = self._schemas.get(type_name)
        if schema is None:
            schema = self._writer.register_schema(
                name=type_name, encoding=SchemaEncoding.ROS2, data=definition.encode()
            )
            self._schemas[type_name] = schema
        channel = self._writer.register_channel(
            topic=topic, message_encoding=MessageEncoding.CDR, schema_id=schema
        )
        self._topics.append(topic)
        self._channels.append(channel)
        self._sequences.append(0)
        return len(self._channels) - 1

    def add(self, index: int, log_time: int, data: bytes) -> None:
        """A message (CDR bytes) on channel ``index``, logged and published at ``log_time``."""
        self._sequences[index] += 1
        self._writer.add_message(
            channel_id=self._channels[index],
            log_time=log_time,
            publish_time=log_time,
            sequence=self._sequences[index],
            data=data,
        )
        topic = self._topics[index]
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def finish(self) -> None:
        self._writer.finish()
        self._file.close()


# Frames from a recorder to its writer process: a header, then its byte strings.
# kind 1, a new channel: sizes of topic, type name, definition (UTF-8).
# kind 2, a message: channel index, 0, size of the CDR data; and the log time [ns].
HEADER = struct.Struct("<BIIIQ")
CHANNEL, MESSAGE = 1, 2
# [s] how often queued frames are handed to the writer process: each hand-over takes the GIL
# once; at 0.05 s the paced loop overran more often with recording than without, at 0.25 s as
# often (ct-bench loop --record, 15 s runs).


def _read(stream: Any, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return bytes(data)


def main(path: str) -> int:
    """The writer process: frames from stdin into ``path``; at end of input (the recorder
    closed it, or its process died), finishes the file and prints the messages per topic as
    JSON. Ctrl-C and SIGTERM, which reach the recorder's whole process group, are the
    recorder's to handle: ignored here, so that the file is always finished."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    # The lowest priority: where CPUs are short, the writer waits (the pipe and the recorder's
    # queue hold seconds of messages) rather than preempting the recording process's threads,
    # one of which may hold the GIL the control thread needs.
    with contextlib.suppress(OSError):
        os.nice(19)
    stream = sys.stdin.buffer
    output = McapFile(path)
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    while True:
        try:
            kind, a, b, c, stamp = HEADER.unpack(_read(stream, HEADER.size))
        except EOFError:
            break
        if kind == CHANNEL:
            topic, name, definition = (_read(stream, n).decode() for n in (a, b, c))
            output.channel(topic, name, definition)
        elif kind == MESSAGE:
            output.add(a, stamp, _read(stream, c))
        else:
            raise ValueError(f"unknown frame kind {kind}")
    output.finish()
    print(json.dumps(output.counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
