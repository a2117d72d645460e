/*
 * nfq_delay: hold every packet of an NFQUEUE for a fixed time, then accept it.
 *
 * The kernel of the test machines has no sch_netem, so the NAT routers of the endpoint
 * test topology delay their uplink egress this way:
 *     iptables -t mangle -A POSTROUTING -o up0 -j NFQUEUE --queue-num N
 *     nfq_delay N DELAY_US
 * Only packet metadata is copied to user space; packets leave in arrival order (a FIFO
 * of ids and due times); verdicts are batched.  Exits on SIGTERM/SIGINT (accepting what
 * it still holds) or after MAX_SECONDS (default 3600).
 *
 * build: cc -O2 -o nfq_delay nfq_delay.c -lnetfilter_queue -lnfnetlink
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SLOTS (1u << 20)

struct held { uint32_t id; uint64_t due; };
static struct held fifo[SLOTS];
static uint32_t first, next;           /* oldest held packet, next free slot */
static uint64_t hold_ns;
static volatile sig_atomic_t done;

static uint64_t clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void on_signal(int sig) { (void)sig; done = 1; }

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg) {
    (void)msg; (void)arg;
    struct nfqnl_msg_packet_hdr *hdr = nfq_get_msg_packet_hdr(nfa);
    if (hdr == NULL) return 0;
    uint32_t id = ntohl(hdr->packet_id);
    if (next - first >= SLOTS) return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
    fifo[next % SLOTS] = (struct held){id, clock_ns() + hold_ns};
    next++;
    return 0;
}

/* Accept every held packet that is due (all of them if flush); one batch verdict. */
static void release_due(struct nfq_q_handle *q, int flush) {
    uint64_t now = clock_ns();
    uint32_t last = 0;
    int any = 0;
    while (first != next && (flush || fifo[first % SLOTS].due <= now)) {
        last = fifo[first % SLOTS].id;
        first++;
        any = 1;
    }
    if (any) nfq_set_verdict_batch(q, last, NF_ACCEPT);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s QUEUE DELAY_US [MAX_SECONDS]\n", argv[0]);
        return 2;
    }
    int queue = atoi(argv[1]);
    hold_ns = (uint64_t)strtoull(argv[2], NULL, 10) * 1000u;
    uint64_t stop_at = clock_ns() + (uint64_t)(argc > 3 ? atof(argv[3]) : 3600.0) * 1000000000u;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    struct nfq_handle *h = nfq_open();
    if (h == NULL || nfq_bind_pf(h, AF_INET) < 0) { perror("nfq_open"); return 1; }
    struct nfq_q_handle *q = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (q == NULL || nfq_set_mode(q, NFQNL_COPY_META, 0) < 0) { perror("nfq_create_queue"); return 1; }
    nfq_set_queue_maxlen(q, 100000);
    /* Take GSO packets whole (tens of kB each) instead of having the kernel cut them into
     * MTU-sized ones first: the helper then handles a few thousand packets a second at
     * 1 Gbit/s, not ~80,000, and leaves the CPU to the programs being measured. */
    nfq_set_queue_flags(q, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 32u << 20);
    int fd = nfq_fd(h), on = 1;
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof on);
    static char buf[65536] __attribute__((aligned));

    while (!done && clock_ns() < stop_at) {
        struct timespec timeout = {0, 100000000L};  /* idle: look again in 100 ms */
        if (first != next) {
            uint64_t now = clock_ns(), due = fifo[first % SLOTS].due;
            uint64_t w = due > now ? due - now : 0;
            timeout.tv_sec = (time_t)(w / 1000000000u);
            timeout.tv_nsec = (long)(w % 1000000000u);
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (ppoll(&p, 1, &timeout, NULL) > 0) {
            for (int i = 0; i < 1024; i++) {
                ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n <= 0) break;
                nfq_handle_packet(h, buf, (int)n);
            }
        }
        release_due(q, 0);
    }
    release_due(q, 1);
    nfq_destroy_queue(q);
    nfq_close(h);
    return 0;
}
