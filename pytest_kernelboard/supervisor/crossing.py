"""How one worker's tensors cross, on the judge's side: the CUDA transport it uses, the two device
windows the judge owns for it, and a frugal reply's output read in place while the worker is
stopped.

Device windows where the GPU can share memory as descriptors (channel/window.py), else CUDA IPC,
or host copies in a sandbox where IPC fails (channel/transport.py). CPU tensors always cross as
shared-memory files.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from ..channel import scrubbing, transport, window
from ..channel.cloning import clone_data
from ..channel.protocol import Op
from . import digest, pausing, pickles


class TensorCrossing:
    """The transport and the device windows of one worker. `request` sends the worker one
    request (a window's hand-over); `session_transport` probes, once per session, how CUDA
    tensors cross into a sandboxed worker where windows cannot."""

    def __init__(
        self,
        device: int | None,
        sandboxed: bool,
        request: Callable[..., Any],
        session_transport: Callable[[], str],
    ) -> None:
        self.device = device
        self.sandboxed = sandboxed
        self._request = request
        self._session_transport = session_transport
        self.transport: str | None = None  # for CUDA tensors; decided on first use
        self.windows: dict[str, window.Window] = {}  # the shared device windows, by direction
        self.outbound_needed = 0  # a reply came as host copies: grow the outbound window
        self.reply_expected = 0  # a reply this large is to come: grow it before the request
        self.inbound_needed = 0  # a frugal reply did not fit the inbound window: grow it
        self._stopped: list[int] = []  # the worker's processes stopped while its output is read
        self._digest: Any = None  # the in-place output's digest when it arrived
        self._inbound: window.Packer | None = None  # where the last request's tensors went

    # -- requests and replies -----------------------------------------------------------------
    def encode(self, message: dict[str, Any], trusted: Mapping[str, ModuleType]) -> bytes:
        """One request pickled with the leaderboard's classes by name; its CUDA tensors copied
        into the inbound window where that is the transport (grown first where too small)."""
        if self.transport != transport.WINDOW or message["op"] == Op.WINDOW:
            return pickles.dumps(message, trusted)
        if not self.windows:  # released after a large case: new ones, sized by this request
            self._share_window("in", 0)
            self._share_window("out", 0)
        packer = window.Packer(self.windows["in"].device, "in")
        data = pickles.dumps(message, trusted, packer)
        needed_in = max(packer.nbytes, self.inbound_needed)
        self.inbound_needed = 0
        if needed_in > self.windows["in"].size:
            self._share_window("in", window.grown_size(needed_in, self.windows["in"].size))
        # The outbound window grows to what replies needed (a reply too large came as host
        # copies once): sized by the outputs, not the inputs, which may be far larger.
        needed = max(self.outbound_needed, self.reply_expected)
        self.outbound_needed = self.reply_expected = 0
        if needed > self.windows["out"].size:
            self._share_window("out", window.grown_size(needed, self.windows["out"].size))
        packer.copy_into(self.windows["in"])
        self._inbound = packer
        return data

    def decode(self, data: bytes, trusted: Mapping[str, ModuleType], frugal: bool) -> Any:
        """A reply's bytes as data only, plus the leaderboard's own classes. CUDA tensors in the
        outbound window are checked and copied out as they are read (a frugal reply's stay in
        the inbound window); what came as host copies says how much a window must grow."""
        with window.receiving(self.windows, copy_out=not frugal):
            reply = pickles.loads(data, trusted)
            if frugal:
                self.inbound_needed = window.host_bytes_received()
            else:
                self.outbound_needed = window.host_bytes_received()
        return reply

    def expect_reply(self, nbytes: int) -> None:
        """The next reply's CUDA tensors will need `nbytes` of the outbound window: it grows
        before the request goes (a reply too large would come as host copies, then grow it;
        a fresh worker's first full-size reply did, 0.3 s of a 32 MB output on an H200)."""
        self.reply_expected = max(self.reply_expected, nbytes)

    def outgoing(self, payload: dict[str, Any]) -> bool:
        """Ready a request's payload for this worker's CUDA transport (chosen on the first
        CUDA input); True where its CUDA tensors travel as host copies, so the reply's do too
        (see incoming). Every request to a worker goes through here, a rank's too."""
        self.transport_for(payload)
        return self._host_transport(payload)

    def incoming(self, reply: dict[str, Any], host_transport: bool) -> None:
        """A reply's output back on this worker's GPU where it crossed as host copies."""
        if host_transport and "output" in reply:
            reply["output"] = transport.to_device(reply["output"], f"cuda:{self.cuda_device()}")

    def copied_back(self, host_transport: bool) -> bool:
        """Whether the last reply's tensors came as host copies (a reply too large for its
        window too): the judge's clock holds those copies."""
        return host_transport or self.outbound_needed > 0 or self.inbound_needed > 0

    def owns_output(self, in_place: bool) -> bool:
        """Whether a reply's output tensors are the judge's own (copied out of a window, or
        moved from the host): no copy is needed to keep them."""
        return self.transport in (transport.WINDOW, transport.HOST) and not in_place

    # -- a frugal reply read in place ----------------------------------------------------------
    def stop_while_read(self, output: Any, pid: int) -> None:
        """A frugal reply's output lies in memory the worker maps: stop the worker's process
        (no thread of it can launch more work) and take the output's digest, which
        output_unchanged compares once the judge has checked it."""
        self._stopped = pausing.stop(pausing.python_processes(pid))
        self._digest = digest.of(output)

    def output_unchanged(self, output: Any) -> bool:
        """Whether a frugal reply's output still has the bytes it arrived with (work the worker
        left running could have changed it while the judge read it in place)."""
        return self._digest is None or digest.of(output) == self._digest

    def go_on(self) -> None:
        """The worker stopped while its last output was read takes the next request."""
        pausing.go_on(self._stopped)
        self._stopped, self._digest = [], None

    # -- inputs ---------------------------------------------------------------------------------
    def private_copy(self, data: Any) -> Any:
        """What to send so that the worker gets inputs of its own: the data itself where the
        inbound window is the copy, else a clone (shared memory and CUDA IPC share storage).

        Data without a CUDA tensor is copied into shared memory: the file the worker maps, so
        sending copies nothing more (a copy in the judge's own memory would be copied into a
        shared file as it is pickled, both alive at once; and through a device window, CPU
        tensors sent as they are would share the judge's pristine ones)."""
        if not _has_cuda_tensor(data):
            return clone_data(data, shared=True)
        if self.transport is None and self.cuda_device() is not None:
            self._choose_transport()
        return data if self.transport == transport.WINDOW else clone_data(data)

    def inputs_as_seen(self, data: Any) -> Any | None:
        """The worker's copy of the last request's `data` as it is now, after the call: the
        same memory where inputs are shared (CPU shared memory, CUDA IPC), views of the inbound
        window where they crossed through it, None where the worker holds a private copy."""
        if self.transport == transport.HOST:
            return None
        if self.transport != transport.WINDOW or self._inbound is None:
            return data
        return window.views_in(self.windows["in"], self._inbound, data)

    # -- the device windows ----------------------------------------------------------------------
    @property
    def window_bytes(self) -> int:
        """The device windows' size together (memory the judge holds for this worker)."""
        return sum(w.size for w in self.windows.values())

    def release_windows(self, above: int = 0) -> None:
        """Let go of the device windows if together they hold more than `above` bytes: the
        worker unmaps its side first, then the judge releases the memory. The next request
        with CUDA tensors makes new ones, sized for it."""
        if self.transport != transport.WINDOW or not self.windows:
            return
        if self.window_bytes <= above:
            return
        device = self.windows["in"].device
        for direction in list(self.windows):
            reply = self._request(Op.WINDOW, 120.0, direction=direction, size=0, device=device)
            scrubbing.QUEUE.released(int(reply.payload.get("released_bytes", 0)))
            self._close_window(self.windows.pop(direction))
        self._inbound = None

    def _share_window(self, direction: str, size: int) -> None:
        """A new device window of at least `size` bytes for one direction, handed to the
        worker as a descriptor; the one it replaces is unmapped once the worker has switched."""
        device = self.windows["in"].device if self.windows else self.cuda_device()
        new = window.Window.create(size, device)
        fd = new.export_fd()
        try:
            self._request(
                Op.WINDOW, 120.0, pass_fd=fd, direction=direction, size=new.size, device=device
            )
        except BaseException:
            new.close()
            raise
        finally:
            os.close(fd)
        old, self.windows[direction] = self.windows.get(direction), new
        if old is not None:
            self._close_window(old)

    @staticmethod
    def _close_window(old: window.Window) -> None:
        old.close()
        scrubbing.QUEUE.released(old.size)  # the worker has unmapped it: the memory is freed

    def close_windows(self) -> None:
        """Every window let go (the worker is gone)."""
        for shared in self.windows.values():
            try:
                self._close_window(shared)
            except Exception:  # the device may be gone with the worker; nothing to keep
                pass
        self.windows = {}

    # -- the transport ---------------------------------------------------------------------------
    def transport_for(self, payload: dict[str, Any]) -> str | None:
        """The transport of a request with this payload, chosen on the first with data where
        the judge has CUDA; None on the host (CPU tensors cross as shared-memory files)."""
        if self.transport is None and "data" in payload and self.cuda_device() is not None:
            self._choose_transport()
        return self.transport

    def cuda_device(self) -> int | None:
        """The GPU this worker's CUDA tensors live on; None where the judge has no CUDA."""
        judge = _judge_device()
        if judge is None:
            return None
        return self.device if self.device is not None else judge

    def _choose_transport(self) -> None:
        """Device windows where the GPU can share memory as descriptors (both ways, across
        the sandbox); else CUDA IPC, or host copies in a sandbox where IPC fails."""
        wanted = os.environ.get("KERNELBOARD_CUDA_TRANSPORT", "auto")
        device = self.cuda_device()
        if wanted in ("auto", transport.WINDOW):
            if window.cuda_vmm.supported(device):
                self.transport = transport.WINDOW
                try:
                    self._share_window("in", 0)
                    self._share_window("out", 0)
                    return
                except (window.cuda_vmm.CudaDriverError, OSError) as exc:
                    print(
                        f"kernelboard: device windows failed ({exc}); using CUDA IPC or copies",
                        file=sys.stderr,
                    )
                    self.close_windows()
        if wanted == transport.HOST:
            self.transport = transport.HOST
        elif self.sandboxed and wanted != transport.IPC:
            self.transport = self._session_transport()
        else:
            self.transport = transport.IPC

    def _host_transport(self, payload: dict[str, Any]) -> bool:
        """In the sandbox, CUDA inputs cross as host tensors where CUDA IPC does not work."""
        if "data" not in payload or not _has_cuda_tensor(payload["data"]):
            return False
        if self.transport != transport.HOST:
            return False
        payload["data"] = transport.to_host(payload["data"])
        payload["transport"] = transport.HOST
        return True


def _has_cuda_tensor(obj: Any) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_has_cuda_tensor(v) for v in obj)
    if isinstance(obj, dict):
        return any(_has_cuda_tensor(v) for v in obj.values())
    return bool(getattr(obj, "is_cuda", False))


def _judge_device() -> int | None:
    """The judge's CUDA device, or None where the judge has none (or has not imported torch)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.current_device()
