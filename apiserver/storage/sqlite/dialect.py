"""The SQLite side of the revision log: the schema, every statement's text and one method to run each.

Nothing here knows what a revision means; `log.RevisionLog` decides which statement to run. Rows of
`kv` are (id, name, created, deleted, create_revision, prev_revision, value, old_value, expires_at):
the id is the revision, `created`/`deleted` say what the change was, `old_value` is the value it
replaced and `expires_at` the wall-clock expiry of a key written with a TTL (only on its newest row).
"""

from __future__ import annotations

import operator
import sqlite3
import time
from dataclasses import astuple, dataclass
from typing import Any

# How long opening the file waits for another process opening it too.
OPEN_TIMEOUT = 5.0
# kv_name_id_deleted covers a list's choice of each key's newest live row, read from the index
# alone (it replaced kv_name_id, on (name, id), whose lists read every row's `deleted` from the
# table: a restart's list of 100,000 Events went from 0.49 to 0.36 s).
SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    value BLOB,
    old_value BLOB,
    expires_at REAL
);
CREATE INDEX IF NOT EXISTS kv_name_id_deleted ON kv (name, id, deleted);
DROP INDEX IF EXISTS kv_name_id;
CREATE INDEX IF NOT EXISTS kv_expires_at ON kv (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

_LATEST = "SELECT id, deleted, create_revision, value FROM kv WHERE name = ? ORDER BY id DESC LIMIT 1"
_INSERT = (
    "INSERT INTO kv (id, name, created, deleted, create_revision, prev_revision, value, old_value,"
    " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CLEAR_EXPIRY = "UPDATE kv SET expires_at = NULL WHERE id = ? AND expires_at IS NOT NULL"
# The expiry index named: left to choose, SQLite walks the whole table in id order (for the ORDER BY)
# rather than sort the few due rows, reading every row at every sweep (0.7 s at 300,000 Events, with
# the write lock held).
_DUE = "SELECT name, id FROM kv INDEXED BY kv_expires_at WHERE expires_at <= ? AND deleted = 0 ORDER BY id"
# Columns a change (a watch event) is built from, in this order.
_CHANGE_COLUMNS = "id, name, created, deleted, create_revision, value, old_value"
# Keep every row from :rev on, and below it only the newest row of each key that still exists at :rev:
# that is what lists at >= :rev and watches from it read.
_COMPACT = (
    "DELETE FROM kv WHERE id < :rev AND (deleted = 1 OR id < (SELECT MAX(later.id)"
    " FROM kv AS later WHERE later.name = kv.name AND later.id <= :rev))"
)
_SET_COMPACT_REVISION = (
    "INSERT INTO meta (name, value) VALUES ('compact_revision', ?)"
    " ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)


@dataclass(frozen=True)
class Row:
    """One change to append; `id` is its revision."""

    id: int
    name: str
    created: bool
    deleted: bool
    create_revision: int
    prev_revision: int
    value: bytes | None
    old_value: bytes | None
    expires_at: float | None


# (id, deleted, create_revision, value) of a key's newest row.
Latest = tuple[int, int, int, bytes]
Rows = list[tuple[Any, ...]]


def key_range(prefix: str) -> tuple[str, str | None]:
    """The half-open range [low, high) of keys starting with `prefix` (high None: unbounded).

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so bumping the last code
    point that can be bumped yields the first string past every key with the prefix.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            bumped = last + 1
            if 0xD800 <= bumped <= 0xDFFF:  # surrogates cannot be encoded; skip past them
                bumped = 0xE000
            return prefix, "".join(chars) + chr(bumped)
    return prefix, None


_NAME = operator.itemgetter(0)


def _newest_alive(high: str | None, after_low: bool, params: list[Any]) -> str:
    """The id of each key's newest row at revision `at`, for the keys alive then in the range. Beside
    a single max(), SQLite takes a bare column from the row holding the max: `deleted` is that of
    each key's newest row, so the live keys are chosen (and can be limited) before any value is
    read, and a page reads its own keys, not every key after its start. `params` holds the
    range's low end and the revision, and gets the high end."""
    where = _in_range(f"name {'>' if after_low else '>='} ? AND id <= ?", params, high)
    return f"SELECT MAX(id) AS id, deleted FROM kv WHERE {where} GROUP BY name HAVING deleted = 0"


def _in_range(where: str, params: list[Any], high: str | None) -> str:
    if high is not None:
        where += " AND name < ?"
        params.append(high)
    return where


class Dialect:
    """The statements over one open connection (used from one thread only)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def connect(cls, path: str) -> Dialect:
        """Opens (creating) the database: WAL, and synchronous=FULL so acknowledged is durable.
        Another process opening it at the same moment (a worker) is waited for: switching to WAL
        and recovering its index can answer "locked" at once, without SQLite's busy wait."""
        deadline = time.monotonic() + OPEN_TIMEOUT
        while True:
            # isolation_level=None: transactions are begun and ended explicitly (`begin`/`commit`).
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                conn.execute(f"PRAGMA busy_timeout={int(OPEN_TIMEOUT * 1000)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA} COMMIT;")
                return cls(conn)
            except sqlite3.OperationalError as exc:
                conn.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.02)

    def close(self) -> None:
        self.conn.close()

    def begin(self) -> None:
        # IMMEDIATE: take the write lock now, so a transaction never fails half-way on it.
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def savepoint(self) -> None:
        self.conn.execute("SAVEPOINT write")

    def release(self) -> None:
        self.conn.execute("RELEASE write")

    def rollback_to_savepoint(self) -> None:
        self.conn.execute("ROLLBACK TO write")
        self.conn.execute("RELEASE write")

    def sequence(self, initial: int) -> int:
        """The highest id ever handed out, set to `initial` in a new database. AUTOINCREMENT's
        high-water mark survives deleting the newest rows during compaction."""
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'kv'").fetchone()
        if row is not None:
            return int(row[0])
        self.conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('kv', ?)", (initial,))
        return initial

    def compact_revision(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE name = 'compact_revision'").fetchone()
        return int(row[0]) if row else 0

    def latest(self, key: str) -> Latest | None:
        row: Latest | None = self.conn.execute(_LATEST, (key,)).fetchone()
        return row

    def insert(self, row: Row) -> None:
        self.conn.execute(_INSERT, astuple(row))
        if row.prev_revision:
            # Only a key's newest row may expire; keeps the expiry index to live keys.
            self.conn.execute(_CLEAR_EXPIRY, (row.prev_revision,))

    def due(self, now: float) -> list[tuple[str, int]]:
        """(name, id) of the live keys whose expiry has passed, oldest change first."""
        return [(str(name), int(revision)) for name, revision in self.conn.execute(_DUE, (now,))]

    def live_rows(
        self, select: str, low: str, high: str | None, at: int, *, after_low: bool, limit: int
    ) -> Rows:
        """Runs `select` (whose first column is kv.name) over the keys in [low, high) (or (low,
        high) with `after_low`) that exist at revision `at`, by key. With a limit, fetches one row
        more so the caller can tell whether more remain. The rows come in the subquery's key order
        but SQL does not promise it: they are sorted here, which for rows in order costs one pass,
        where SQLite's ORDER BY sorted every page again in a temporary B-tree (a third of a
        restart's list)."""
        params: list[Any] = [low, at]
        newest = _newest_alive(high, after_low, params)
        if limit:
            newest += " ORDER BY name LIMIT ?"
            params.append(limit + 1)
        rows = self.conn.execute(f"{select} FROM kv JOIN ({newest}) AS newest USING (id)", params).fetchall()
        rows.sort(key=_NAME)  # UTF-8's byte order (SQLite's BINARY collation) is code point order
        return rows

    def count_live(self, low: str, high: str | None, at: int, *, after_low: bool) -> int:
        """How many keys in [low, high) (or (low, high)) exist at revision `at`."""
        params: list[Any] = [low, at]
        newest = _newest_alive(high, after_low, params)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM ({newest})", params).fetchone()[0])

    def changes(self, prefix: str, after: int, limit: int) -> Rows:
        """Up to `limit` rows of keys with `prefix` after revision `after`, in revision order, as
        (id, name, created, deleted, create_revision, value, old_value)."""
        low, high = key_range(prefix)
        params: list[Any] = [after, low]
        where = _in_range("id > ? AND name >= ?", params, high)
        params.append(limit)
        return self.conn.execute(
            f"SELECT {_CHANGE_COLUMNS} FROM kv WHERE {where} ORDER BY id LIMIT ?", params
        ).fetchall()

    def compact(self, revision: int) -> None:
        self.conn.execute(_COMPACT, {"rev": revision})
        self.conn.execute(_SET_COMPACT_REVISION, (revision,))
