// spate-xsk-fwd: forward every frame between two interfaces through AF_XDP sockets, for
// `scripts/afxdp-forwarder.sh` (docs/lab.md, "Why TUN without offloads"). It measures what an
// AF_XDP path costs per packet on this machine; it is not the lab's emulator and applies no
// delay or loss.
//
// One AF_XDP socket per interface (queue 0, copy mode: veth has no zero-copy), each with its
// own UMEM of FRAMES frames: the first half feeds its RX ring, the second half holds frames
// queued for its TX ring. A frame received on one interface is copied into a free TX frame of
// the other and sent. libxdp loads its default program, which redirects every frame of queue
// 0 to the socket. poll() waits when both RX rings are empty, so the CPU it reports is the
// forwarding's, not a busy loop's.
//
// Usage: spate-xsk-fwd IF_A IF_B SECONDS
// Prints one JSON line: frames and bytes forwarded each way, seconds, CPU seconds, mode.

#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <xdp/xsk.h>

#define FRAMES 4096
#define FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
#define RING 2048
#define BATCH 64

struct port {
	const char *name;
	void *area;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
	uint64_t free_tx[FRAMES / 2];
	uint32_t n_free;
	uint64_t frames, bytes;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec +
	       r.ru_stime.tv_usec / 1e6;
}

static int open_port(struct port *p, const char *name, uint32_t xdp_flags)
{
	struct xsk_umem_config uc = {
		.fill_size = RING,
		.comp_size = RING,
		.frame_size = FRAME_SIZE,
		.frame_headroom = 0,
	};
	struct xsk_socket_config sc = {
		.rx_size = RING,
		.tx_size = RING,
		.xdp_flags = xdp_flags,
		.bind_flags = XDP_COPY,
	};
	uint32_t idx, i;
	int err;

	p->name = name;
	p->area = mmap(NULL, (size_t)FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->area == MAP_FAILED)
		return -errno;
	err = xsk_umem__create(&p->umem, p->area, (uint64_t)FRAMES * FRAME_SIZE, &p->fill, &p->comp,
			       &uc);
	if (err)
		return err;
	err = xsk_socket__create(&p->xsk, name, 0, p->umem, &p->rx, &p->tx, &sc);
	if (err)
		return err;
	if (xsk_ring_prod__reserve(&p->fill, FRAMES / 2, &idx) != FRAMES / 2)
		return -ENOSPC;
	for (i = 0; i < FRAMES / 2; i++)
		*xsk_ring_prod__fill_addr(&p->fill, idx + i) = (uint64_t)i * FRAME_SIZE;
	xsk_ring_prod__submit(&p->fill, FRAMES / 2);
	for (i = 0; i < FRAMES / 2; i++)
		p->free_tx[i] = (uint64_t)(FRAMES / 2 + i) * FRAME_SIZE;
	p->n_free = FRAMES / 2;
	return 0;
}

// Frames the kernel has sent from `p`'s TX ring are free again.
static void complete(struct port *p)
{
	uint32_t idx, n = xsk_ring_cons__peek(&p->comp, RING, &idx);
	for (uint32_t i = 0; i < n; i++)
		p->free_tx[p->n_free++] = *xsk_ring_cons__comp_addr(&p->comp, idx + i);
	xsk_ring_cons__release(&p->comp, n);
}

// Forward what `in` received to `out`; returns frames forwarded.
static uint32_t forward(struct port *in, struct port *out)
{
	uint32_t rx_idx, tx_idx, fill_idx, n, i, sent = 0;

	complete(out);
	n = xsk_ring_cons__peek(&in->rx, BATCH, &rx_idx);
	if (!n)
		return 0;
	if (n > out->n_free)
		n = out->n_free;
	if (n && xsk_ring_prod__reserve(&out->tx, n, &tx_idx) != n)
		n = 0;
	for (i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&in->rx, rx_idx + i);
		uint64_t frame = out->free_tx[--out->n_free];
		memcpy(xsk_umem__get_data(out->area, frame),
		       xsk_umem__get_data(in->area, d->addr), d->len);
		struct xdp_desc *t = xsk_ring_prod__tx_desc(&out->tx, tx_idx + i);
		t->addr = frame;
		t->len = d->len;
		in->frames++;
		in->bytes += d->len;
		sent++;
	}
	// Frames left on the RX ring (no free TX frame on the other side) wait for the next call.
	if (n && xsk_ring_prod__reserve(&in->fill, n, &fill_idx) == n) {
		for (i = 0; i < n; i++)
			*xsk_ring_prod__fill_addr(&in->fill, fill_idx + i) =
				xsk_ring_cons__rx_desc(&in->rx, rx_idx + i)->addr;
		xsk_ring_prod__submit(&in->fill, n);
	}
	xsk_ring_cons__release(&in->rx, n);
	if (n) {
		xsk_ring_prod__submit(&out->tx, n);
		sendto(xsk_socket__fd(out->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
	}
	return sent;
}

int main(int argc, char **argv)
{
	static struct port a, b;
	const char *mode = "native";
	double secs, t0, c0, end;
	int err;

	if (argc != 4) {
		fprintf(stderr, "usage: %s IF_A IF_B SECONDS\n", argv[0]);
		return 2;
	}
	secs = atof(argv[3]);
	err = open_port(&a, argv[1], XDP_FLAGS_DRV_MODE);
	if (!err)
		err = open_port(&b, argv[2], XDP_FLAGS_DRV_MODE);
	if (err) {
		fprintf(stderr, "native XDP failed (%s); trying generic (skb) mode\n", strerror(-err));
		struct port *ports[2] = { &a, &b };
		for (int i = 0; i < 2; i++) {
			if (ports[i]->xsk)
				xsk_socket__delete(ports[i]->xsk);
			if (ports[i]->umem)
				xsk_umem__delete(ports[i]->umem);
			if (ports[i]->area && ports[i]->area != MAP_FAILED)
				munmap(ports[i]->area, (size_t)FRAMES * FRAME_SIZE);
		}
		memset(&a, 0, sizeof a);
		memset(&b, 0, sizeof b);
		mode = "generic";
		err = open_port(&a, argv[1], XDP_FLAGS_SKB_MODE);
		if (!err)
			err = open_port(&b, argv[2], XDP_FLAGS_SKB_MODE);
	}
	if (err) {
		fprintf(stderr, "cannot open AF_XDP sockets on %s and %s: %s\n", argv[1], argv[2],
			strerror(-err));
		return 1;
	}
	struct pollfd fds[2] = {
		{ .fd = xsk_socket__fd(a.xsk), .events = POLLIN },
		{ .fd = xsk_socket__fd(b.xsk), .events = POLLIN },
	};
	t0 = now_s();
	c0 = cpu_s();
	end = t0 + secs;
	while (now_s() < end) {
		uint32_t moved = forward(&a, &b) + forward(&b, &a);
		if (!moved)
			poll(fds, 2, 1);
	}
	printf("{\"mode\":\"%s\",\"a_to_b_frames\":%lu,\"a_to_b_bytes\":%lu,"
	       "\"b_to_a_frames\":%lu,\"b_to_a_bytes\":%lu,\"seconds\":%.3f,\"cpu_s\":%.3f}\n",
	       mode, (unsigned long)a.frames, (unsigned long)a.bytes, (unsigned long)b.frames,
	       (unsigned long)b.bytes, now_s() - t0, cpu_s() - c0);
	xsk_socket__delete(a.xsk);
	xsk_socket__delete(b.xsk);
	xsk_umem__delete(a.umem);
	xsk_umem__delete(b.umem);
	return 0;
}
