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


def num_blocks_for(tokens):
    return max(1, -(-len(tokens) // BLOCK_SIZE))


def block_content(tokens, tp_rank, index):
    """Bytes of block INDEX of a prompt's KV on rank TP_RANK: same on P (writes) and D (verifies)."""
    chunk = " ".join(tokens[index * BLOCK_SIZE:(index + 1) * BLOCK_SIZE])
    return hashlib.shake_256(f"{tp_rank}|{index}|{chunk}".encode()).digest(BLOCK_LEN)


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
