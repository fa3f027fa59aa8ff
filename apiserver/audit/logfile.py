"""The audit log's file, rotated as upstream's (gopkg.in/natefinch/lumberjack.v2): past --audit-log-maxsize
megabytes (100 when 0) the file is renamed `<name>-<UTC time>.<ext>` and a new one started; backups
past --audit-log-maxbackup (0: all kept) or older than --audit-log-maxage days (0: no limit), by the
time in their names, are removed.

Written by hand: the standard library's RotatingFileHandler numbers its backups (`audit.log.1`),
and no maintained package names them as lumberjack does. With several workers each writes the same
file; a worker notices that another rotated it (a new inode at the path) and opens the new one.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MEGABYTE = 1024 * 1024
DEFAULT_MAX_SIZE_MB = 100
_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"


@dataclass(frozen=True)
class Rotation:
    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0

    @property
    def max_bytes(self) -> int:
        return (self.max_size_mb or DEFAULT_MAX_SIZE_MB) * MEGABYTE


def backup_name(path: Path, moment: datetime.datetime) -> Path:
    """lumberjack's backupName: the time, to milliseconds, between the name and its extension."""
    stamp = moment.strftime(_TIME_FORMAT) + f".{moment.microsecond // 1000:03d}"
    return path.with_name(f"{path.stem}-{stamp}{path.suffix}")


def _backup_time(path: Path, name: str) -> datetime.datetime | None:
    pattern = re.escape(path.stem) + r"-(.+)" + re.escape(path.suffix)
    match = re.fullmatch(pattern, name)
    if match is None:
        return None
    try:
        return datetime.datetime.strptime(match.group(1), _TIME_FORMAT + ".%f").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


class RotatingAuditFile(logging.Handler):
    """Each record one line, appended to `path` and rotated by `rotation`."""

    def __init__(
        self, path: Path, rotation: Rotation, now: type[datetime.datetime] = datetime.datetime
    ) -> None:
        super().__init__()
        self.path = path
        self.rotation = rotation
        self._now = now
        self._file: IO[bytes] | None = None
        self._size = 0
        self._open()

    def _open(self) -> None:
        self._file = open(self.path, "ab")  # noqa: SIM115 - held until closed or rotated
        self._size = os.fstat(self._file.fileno()).st_size

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write((self.format(record) + "\n").encode())
        except Exception:
            self.handleError(record)

    def write(self, line: bytes) -> None:
        self._follow_rotation()
        if self._size and self._size + len(line) > self.rotation.max_bytes:
            self.rotate()
        assert self._file is not None
        self._file.write(line)
        self._file.flush()
        self._size += len(line)

    def _follow_rotation(self) -> None:
        """Another worker may have rotated the file: write to the one now at the path."""
        assert self._file is not None
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if current is None or current.st_ino != os.fstat(self._file.fileno()).st_ino:
            self._file.close()
            self._open()
        else:
            self._size = current.st_size

    def rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        moment = self._now.now(datetime.UTC)
        self.path.rename(backup_name(self.path, moment))
        self._open()
        self._remove_old_backups(moment)

    def backups(self) -> list[tuple[datetime.datetime, Path]]:
        """The rotated files, newest first."""
        found = []
        for entry in self.path.parent.iterdir():
            moment = _backup_time(self.path, entry.name)
            if moment is not None:
                found.append((moment, entry))
        return sorted(found, reverse=True)

    def _remove_old_backups(self, now: datetime.datetime) -> None:
        backups = self.backups()
        removed = backups[self.rotation.max_backups :] if self.rotation.max_backups else []
        if self.rotation.max_age_days:
            cutoff = now - datetime.timedelta(days=self.rotation.max_age_days)
            removed += [backup for backup in backups if backup[0] < cutoff and backup not in removed]
        for _moment, path in removed:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()
