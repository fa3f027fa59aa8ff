"""The watch cache's values kept compressed, with a zstd dictionary trained on the values it holds.

Every worker keeps a watch cache of its own, so each would hold every stored value whole: on 100,000
Events that was 176 MiB a worker, most of its memory. Stored objects of one kind are alike (the same
controllers, reasons, notes and managed fields), and zstd with a dictionary trained on them is made
for many small alike records: Events shaped as a cluster's (kubelet's and the scheduler's reasons and
notes, names, uids and times all varied) shrink from 995 to 164 bytes, and unpacking one takes 1-3
µs, where reading it takes tens (decoding its JSON). A hand-written scheme would not come near.

A cache packs nothing until it holds TRAIN_AT values. Then a dictionary is trained on a sample of
them, off the event loop, and every value held is packed again with it, a chunk at a time between
requests (`repack`), as is each value the cache takes in from then on. A value that does not shrink
stays as it is.

The dictionary follows what is stored, but only when what is stored has moved away from it: every
CHECK_EVERY values taken in, the share of their size they were packed to is compared with that of
the first CHECK_EVERY after the training, and a new dictionary is trained when it has grown by
DRIFT. Packing every held value again costs about 5 µs a value in each worker (0.7 s at 130,000), so
a dictionary trained again on a schedule (it was every 100,000 values) made creates slower as the
store grew, for no gain while the values stayed alike.
"""

from __future__ import annotations

from typing import Self

import zstandard

from apiserver.storage.interface import KeyValue

# The values a cache must hold before a dictionary is trained on them, and the sample it is
# trained on: 1,000 Events (1 MB) train a 16 KiB dictionary in about 35 ms, and larger samples or
# dictionaries packed them no smaller (164-165 bytes an Event).
TRAIN_AT = 1_000
SAMPLES = 1_000
DICTIONARY_SIZE = 16 * 1024
# Level 3 (zstd's default): level 1 packed 6% larger and unpacked no faster.
LEVEL = 3
# Values taken in between two checks of how well the dictionary still packs them, and the growth of
# their packed share that trains a new one: Events like the trained ones stay within a few percent.
CHECK_EVERY = 20_000
DRIFT = 1.25


class Codec:
    """Packs and unpacks values with one trained dictionary."""

    __slots__ = ("_compressor", "_decompressor")

    def __init__(self, dictionary: zstandard.ZstdCompressionDict) -> None:
        # No dictionary id in each frame: a value is only ever unpacked by the codec that packed it.
        self._compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=dictionary, write_dict_id=False)
        self._decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)

    @classmethod
    def train(cls, samples: list[bytes]) -> Self:
        """A codec whose dictionary is trained on `samples`; zstandard.ZstdError when they are too
        few or too small to train one. It takes tens of milliseconds: call it off the event loop."""
        return cls(zstandard.train_dictionary(DICTIONARY_SIZE, list[bytes | bytearray | memoryview](samples)))

    def pack(self, value: bytes) -> bytes:
        # compress() answers bytes holding room for the largest output (about the input's size):
        # kept, they would take no less memory than the value. A copy takes only what it holds.
        return bytes(memoryview(self._compressor.compress(value)))

    def unpack(self, packed: bytes) -> bytes:
        return self._decompressor.decompress(packed)


class PackedKeyValue(KeyValue):
    """A KeyValue whose value is kept packed and unpacked at each read of `value`: read it once
    per use. It equals the KeyValue it was packed from."""

    __slots__ = ("codec", "packed")
    codec: Codec
    packed: bytes

    def __init__(self, kv: KeyValue, codec: Codec, packed: bytes) -> None:
        for name in ("key", "mod_revision", "create_revision", "decodes", "version_at"):
            object.__setattr__(self, name, getattr(kv, name))
        object.__setattr__(self, "codec", codec)
        object.__setattr__(self, "packed", packed)

    @property  # the field, read-only here as it is in a frozen KeyValue
    def value(self) -> bytes:
        return self.codec.unpack(self.packed)

    @property
    def size(self) -> int:
        return int(zstandard.frame_content_size(self.packed))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyValue):
            return NotImplemented
        return (self.key, self.mod_revision, self.create_revision, self.value) == (
            other.key,
            other.mod_revision,
            other.create_revision,
            other.value,
        )

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.mod_revision, self.create_revision))


class Packer:
    """The codec a cache packs its values with, and when to train the next one."""

    def __init__(self) -> None:
        self.codec: Codec | None = None
        self.train_at = TRAIN_AT  # the values to hold before the first training
        self.packed = 0  # values taken in and packed with `codec` since the last check
        self.whole = 0  # their size
        self.kept = 0  # their size as kept (packed, or whole when packing did not shrink them)
        self.baseline: float | None = None  # kept / whole of the first CHECK_EVERY after training

    def pack(self, kv: KeyValue) -> KeyValue:
        """`kv`, a value the cache takes in, packed with the current codec (as it is when there is
        none yet, or when packing would not shrink it)."""
        held = self.repack(kv)
        if self.codec is not None:
            self.packed += 1
            self.whole += kv.size
            self.kept += len(held.packed) if isinstance(held, PackedKeyValue) else kv.size
        return held

    def repack(self, kv: KeyValue) -> KeyValue:
        """`kv`, a value the cache holds, packed with the current codec: not counted towards the
        next check."""
        codec = self.codec
        if codec is None or (isinstance(kv, PackedKeyValue) and kv.codec is codec):
            return kv
        value = kv.value
        packed = codec.pack(value)
        if len(packed) < len(value):
            return PackedKeyValue(kv, codec, packed)
        if isinstance(kv, PackedKeyValue):  # packed with an earlier codec: keep it whole instead
            return KeyValue(kv.key, value, kv.mod_revision, kv.create_revision, kv.decodes, kv.version_at)
        return kv

    def due(self, held: int) -> bool:
        """Whether a cache holding `held` values should train a (new) codec now. Every CHECK_EVERY
        values taken in, it takes stock of how well they packed (and starts counting again)."""
        if self.codec is None:
            return held >= self.train_at
        if self.packed < CHECK_EVERY or held < TRAIN_AT:
            return False
        share = self.kept / max(1, self.whole)
        self.packed = self.whole = self.kept = 0
        if self.baseline is None:
            self.baseline = share
        return share > self.baseline * DRIFT

    def trained(self, codec: Codec) -> None:
        self.codec, self.baseline = codec, None
        self.packed = self.whole = self.kept = 0

    def untrainable(self, held: int) -> None:
        """Training on `held` values failed (too alike or too small): try again at twice as many."""
        self.train_at = max(self.train_at, 2 * held)
        self.packed = self.whole = self.kept = 0
