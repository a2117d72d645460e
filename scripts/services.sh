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
# The two-site campaign test bridges the namespaces to this host's PostgreSQL and
# RabbitMQ with socat (tests/steer/test_multisite.py); its benchmark's Redis-over-SSH
# baseline needs ssh and sshd (benchmarks/bench_campaign_sites.py).
need_pkg socat socat || status=1
need_pkg ssh openssh-client || status=1
need_pkg /usr/sbin/sshd openssh-server || status=1
# Headless Chromium and its driver, for the function service's web page and the dashboard.
need_pkg chromium chromium || status=1
need_pkg chromedriver chromium-driver || status=1

# A single-node Slurm cluster (Debian's slurm-wlm and munge, no cgroups), for the compute
# endpoint tests that run tasks inside Slurm jobs (tests/faas/test_slurm*.py).
slurm_conf() {
    local host mem
    host=$(hostname)
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 2048 ))
    [ "$mem" -lt 1024 ] && mem=1024
    cat <<CONF
# Written by tether's scripts/services.sh: a one-node test cluster on this machine.
ClusterName=tether
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
KillWait=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

pid_running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

slurm_node_up() { sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; }

start_slurm() {
    need_pkg slurmctld slurm-wlm || return 1
    need_pkg munged munge || return 1
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge \
        /var/lib/munge /var/log/munge /etc/munge
    [ -s /etc/munge/munge.key ] || head -c 1024 /dev/urandom > /etc/munge/munge.key
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
    local conf changed=0
    conf=$(slurm_conf)
    if [ "$conf" != "$(cat /etc/slurm/slurm.conf 2>/dev/null)" ]; then
        printf '%s\n' "$conf" > /etc/slurm/slurm.conf
        changed=1
    fi
    pgrep -x munged >/dev/null || /usr/sbin/munged --force
    if [ $changed = 1 ] && pid_running /run/slurmctld.pid; then
        scontrol reconfigure >/dev/null 2>&1 || true
    fi
    pid_running /run/slurmctld.pid || /usr/sbin/slurmctld
    pid_running /run/slurmd.pid || /usr/sbin/slurmd
    # A node left down or drained (a killed slurmd) is put back in service.
    if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(down|drain|drng|fail)'; then
        scontrol update nodename="$(hostname)" state=resume >/dev/null 2>&1 || true
    fi
    for _ in $(seq 1 120); do slurm_node_up && return 0; sleep 0.5; done
    echo "services: the Slurm node did not come up (see /var/log/slurm/)" >&2
    return 1
}

slurm_node_up && pid_running /run/slurmd.pid || start_slurm || status=1

[ $status = 0 ] && echo "services: redis, nats, mosquitto, rabbitmq, postgresql, slurm are up"
exit $status
