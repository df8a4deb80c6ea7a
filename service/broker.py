"""The embedded Kafka-protocol broker for laptops and CI: noida-db, a single binary from PyPI.

Chosen over Tansu (the other broker that ships on PyPI) because it reports end offsets right
(Faust table recovery depends on them), persists its log across restarts, supports idempotent
producers and joins groups in ~0.3 s; `tests/test_broker_conformance.py` checks exactly the
behaviour chatsum relies on, against this broker or any `--bootstrap`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from importlib.resources import files
from pathlib import Path

from confluent_kafka.admin import AdminClient


class BrokerError(RuntimeError):
    pass


def _binary() -> Path:
    try:
        path = Path(str(files("noida_db").joinpath("noida-db")))
    except ModuleNotFoundError as exc:
        raise BrokerError("noida-db is not installed: run scripts/setup.sh, or point CHATSUM_BOOTSTRAP at a Kafka.") from exc
    path.chmod(0o755)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedBroker:
    """A noida-db process serving only Kafka on loopback; the log lives in `data_dir`."""

    def __init__(self, data_dir: Path, port: int = 19092, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.host = host
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with socket.socket() as sock:
            if sock.connect_ex((self.host, self.port)) == 0:
                raise BrokerError(f"port {self.port} is taken: is a broker already running? Set CHATSUM_BOOTSTRAP or another port.")
        log = open(self.data_dir / "broker.log", "ab")
        cmd = [str(_binary()), "start", "--data-dir", str(self.data_dir), "--host", self.host,
               "--only", "kafka", "--kafka-port", str(self.port)]
        # Own process group: a Ctrl-C aimed at the demo is handled by the demo, which stops us last.
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"noida-db exited with {self._proc.returncode}; see {self.data_dir / 'broker.log'}")
            if _metadata_ok(self.bootstrap):
                return self.bootstrap
            time.sleep(0.1)
        self.stop()
        raise BrokerError(f"noida-db did not answer on {self.bootstrap} within {timeout_s}s")

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def kill(self) -> None:
        """SIGKILL, for fault tests."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, 9)
            self._proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _metadata_ok(bootstrap: str) -> bool:
    try:
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=1)
        return True
    except Exception:
        return False
