# Helpers the benchmark scripts source (from the repository root).

# A TCP port free on 127.0.0.1 now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits (up to 10 s) for the server on port $1 to answer PING; exits if not.
wait_ping() {
    for _ in $(seq 1 200); do
        redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0
        sleep 0.05
    done
    echo "server on port $1 did not start" >&2
    exit 1
}
