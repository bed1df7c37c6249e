"""The real Mooncake transfer engine over TCP in P2PHANDSHAKE mode, as vLLM-Ascend uses it
[facts §2b, §2f]; one engine per process, one registered buffer for all local ranks."""
import ctypes
import mmap


class TransferEngine:
    def __init__(self, hostname, nbytes):
        from mooncake.engine import TransferEngine as _Engine  # only lab hosts have the wheel

        self._engine = _Engine()
        ret = self._engine.initialize(hostname, "P2PHANDSHAKE", "tcp", "")
        if ret != 0:
            raise RuntimeError(f"Mooncake Transfer Engine initialization failed. ret={ret}")
        self.rpc_port = self._engine.get_rpc_port()
        self._buf = mmap.mmap(-1, nbytes)
        self.base_addr = ctypes.addressof(ctypes.c_char.from_buffer(self._buf))
        ret = self._engine.register_memory(self.base_addr, nbytes)
        if ret != 0:
            raise RuntimeError(f"Mooncake memory registration failed. ret={ret}")

    def write(self, offset, data):
        self._buf[offset:offset + len(data)] = data

    def read(self, offset, n):
        return bytes(self._buf[offset:offset + n])

    def pull(self, session_id, local_offsets, remote_addrs, length):
        return self._engine.batch_transfer_sync_read(
            session_id, [self.base_addr + o for o in local_offsets], list(remote_addrs),
            [length] * len(remote_addrs))
