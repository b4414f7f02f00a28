"""free_port(): a free TCP port on 127.0.0.1 for a run's rendezvous, below the kernel's ephemeral
range (/proc/sys/net/ipv4/ip_local_port_range), as mgpu run picks one (common/server_ports.h): a
port found free by binding port 0 comes from that range, and an outgoing connection can take it
before rank 0 listens on it (an e2e_bench.py row on a GPU host busy with NCCL's and DataLoader
workers' connections failed so); never 20000-29999, where Slurm steps and torch.distributed
listen by number."""
import random
import socket

LINUX_DEFAULT_EPHEMERAL_LOW = 32768
FIRST_UNPRIVILEGED_PORT = 1024
TAKEN_BY_NUMBER = range(20000, 30000)  # Slurm steps' derived ports, torch.distributed's 29500
TRIES = 64


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(v) for v in f.read().split())
        return low if 1 <= low <= high <= 65535 else LINUX_DEFAULT_EPHEMERAL_LOW
    except (OSError, ValueError):
        return LINUX_DEFAULT_EPHEMERAL_LOW


def free_port():
    end = ephemeral_low()
    begin = max(end // 2, FIRST_UNPRIVILEGED_PORT)
    free = [p for p in range(begin, end) if p not in TAKEN_BY_NUMBER]
    candidates = random.sample(free, min(TRIES, len(free)))
    for port in candidates + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free TCP port on 127.0.0.1")
