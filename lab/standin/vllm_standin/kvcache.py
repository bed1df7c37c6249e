"""The KV cache: blocks in one buffer the transfer engine registers, with content that proves
which prompt, rank and block it belongs to, so D can verify what it pulled."""
import hashlib
import threading

BLOCK_SIZE = 128      # tokens per block (vLLM-Ascend's default block_size)
BLOCK_LEN = 4096      # bytes per block and rank; small, so 8 clusters fit on 2 cores


def tokenize(prompt):
    """Whitespace words stand in for token ids; a list of ints is taken as token ids."""
    if isinstance(prompt, list):
        if all(isinstance(t, int) for t in prompt):
            return [str(t) for t in prompt]
        prompt = " ".join(str(p) for p in prompt)
    return str(prompt).split() or [""]


def num_blocks_for(tokens, block_size=BLOCK_SIZE):
    return max(1, -(-len(tokens) // block_size))


def _chunk(tokens, index, block_size):
    return " ".join(tokens[index * block_size:(index + 1) * block_size])


def block_content(tokens, tp_rank, index, block_size=BLOCK_SIZE, dtype="auto"):
    """Bytes of block INDEX of a prompt's KV on rank TP_RANK, laid out in blocks of BLOCK_SIZE tokens of
    kv_cache_dtype DTYPE."""
    chunk = _chunk(tokens, index, block_size)
    prefix = f"{tp_rank}|{index}|" if dtype == "auto" else f"{dtype}|{tp_rank}|{index}|"
    return hashlib.shake_256(f"{prefix}{chunk}".encode()).digest(BLOCK_LEN)


def computed_kv(tokens):
    """What attention reads from KV the engine computed itself: the prompt, whatever the layout."""
    return " ".join(tokens)


def read_kv(tokens, blocks_by_rank, block_size=BLOCK_SIZE, dtype="auto"):
    """What attention reads from KV pulled from P (BLOCKS_BY_RANK: {p_rank: [bytes of block 0, 1, ..]}),
    decoded with this engine's own block size and kv_cache_dtype. A block that is not exactly what P computed for that
    rank and position (corrupted bytes, another block size, a missing rank) reads as garbage, so the
    generated text changes, as it does on NPUs; nothing is logged."""
    count = max((len(b) for b in blocks_by_rank.values()), default=0)
    parts = []
    for index in range(count):
        good = all(len(blocks) > index and blocks[index] == block_content(tokens, rank, index, block_size, dtype)
                   for rank, blocks in blocks_by_rank.items())
        if good:
            parts.append(_chunk(tokens, index, block_size))
        else:
            parts.append("?" + hashlib.sha256(b"".join(b[index] for b in blocks_by_rank.values()
                                                       if len(b) > index)).hexdigest()[:16])
    return " ".join(p for p in parts if p) if blocks_by_rank else "?missing"


class BlockPool:
    """Block ids are shared by all local ranks (one id addresses the same block on every rank)."""

    def __init__(self, num_blocks):
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks))
        self._lock = threading.Lock()

    def allocate(self, n):
        with self._lock:
            if n > len(self._free):
                raise RuntimeError(f"out of KV cache blocks: need {n}, {len(self._free)} free")
            taken, self._free = self._free[:n], self._free[n:]
            return taken

    def free(self, blocks):
        with self._lock:
            self._free.extend(blocks)

    @property
    def num_free(self):
        with self._lock:
            return len(self._free)


def rank_offset(rank_index, num_blocks):
    return rank_index * num_blocks * BLOCK_LEN
