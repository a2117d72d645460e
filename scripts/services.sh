#!/usr/bin/env bash
# Check each service the test suite needs and start it if it is down (see SERVICES.md).
# Installs a missing server from Debian's packages on a fresh machine.
set -u

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_up() {
    local port=$1 name=$2
    for _ in $(seq 1 60); do up "$port" && return 0; sleep 0.5; done
    echo "services: $name did not come up on port $port" >&2
    return 1
}

apt_updated=0
need_pkg() {
    local bin=$1 pkg=$2
    command -v "$bin" >/dev/null 2>&1 || [ -x "$bin" ] && return 0
    if [ "$(id -u)" != 0 ]; then echo "services: $bin missing and not root" >&2; return 1; fi
    if [ $apt_updated = 0 ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
}

status=0

if ! up 6379; then
    need_pkg redis-server redis-server
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
    wait_up 6379 redis || status=1
fi

if ! up 4222; then
    need_pkg /usr/sbin/nats-server nats-server
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
    wait_up 4222 nats || status=1
fi

if ! up 1883; then
    need_pkg mosquitto mosquitto
    mosquitto -d -c /etc/mosquitto/mosquitto.conf
    wait_up 1883 mosquitto || status=1
fi

if ! up 5672; then
    need_pkg rabbitmq-server rabbitmq-server
    rabbitmq-server -detached
    wait_up 5672 rabbitmq || status=1
fi

if ! up 5432; then
    need_pkg pg_ctlcluster postgresql
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
    wait_up 5432 postgresql || status=1
fi

# Network-namespace tests (tests/endpoint/test_netns.py): iptables inside the namespaces,
# and the NFQUEUE delay helper they compile (gcc, libnetfilter-queue-dev).
need_pkg iptables-legacy iptables || status=1
need_pkg ping iputils-ping || status=1
need_pkg gcc gcc || status=1
if [ ! -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]; then
    need_pkg /nonexistent/libnetfilter_queue libnetfilter-queue-dev || status=1
fi
# Headless Chromium and its driver, for the function service's web page test.
need_pkg chromium chromium || status=1
need_pkg chromedriver chromium-driver || status=1

[ $status = 0 ] && echo "services: redis, nats, mosquitto, rabbitmq, postgresql are up"
exit $status
