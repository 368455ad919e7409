// spate-tcp-cc.so: give every TCP socket a program creates the congestion control named in
// $SPATE_TCP_CC, for programs that have no option of their own (GridFTP's globus-url-copy and
// globus-gridftp-server). `spate-lab emu` runs them with LD_PRELOAD pointing here for the
// `gridftp-bbr` protocol, as iperf3 -C does for iperf3's one socket. A namespace-wide default
// (net.ipv4.tcp_congestion_control) would also reach every other TCP flow of the same run.
//
// Accepted connections inherit the listener's algorithm in the kernel, so wrapping socket()
// covers both ends. If the algorithm cannot be set (not built into the kernel, or not in
// net.ipv4.tcp_allowed_congestion_control for a user without CAP_NET_ADMIN), socket() fails
// with setsockopt's errno and a line on stderr: a comparison run with the wrong algorithm is
// worse than a run that stops and says why.
//
// Built by scripts/lab-setup.sh: gcc -O2 -shared -fPIC -o /usr/local/lib/spate-tcp-cc.so
// lab/tcpcc/spate-tcp-cc.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// The socket type without SOCK_NONBLOCK / SOCK_CLOEXEC (the kernel's SOCK_TYPE_MASK).
#define TYPE_MASK 0xf

int socket(int domain, int type, int protocol) {
    static int (*real_socket)(int, int, int);
    if (!real_socket) {
        real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
        if (!real_socket) {
            errno = ENOSYS;
            return -1;
        }
    }
    int fd = real_socket(domain, type, protocol);
    const char *cc = getenv("SPATE_TCP_CC");
    int tcp = (domain == AF_INET || domain == AF_INET6) && (type & TYPE_MASK) == SOCK_STREAM &&
              (protocol == 0 || protocol == IPPROTO_TCP);
    if (fd < 0 || !cc || !*cc || !tcp) {
        return fd;
    }
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
        int e = errno;
        fprintf(stderr, "spate-tcp-cc: cannot set TCP congestion control \"%s\": %s\n", cc,
                strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
