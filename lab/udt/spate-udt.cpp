// spate-udt: the UDT4 ends of `spate-lab emu` (protocol = "udt"), on Debian's libudt.
//
//   spate-udt recv PORT             accept one connection, count bytes until it closes
//   spate-udt send HOST PORT BYTES  send BYTES of zeros as fast as UDT's congestion control allows
//
// Each end prints one JSON line when done: {"bytes": N, "seconds": S}. UDT's own buffers are
// set to 256 MB and its UDP socket buffers to 64 MB (the kernel caps the latter at
// net.core.rmem_max / wmem_max, as it would for any UDT user). MSS is UDT's default, 1500 bytes
// of IP packet, matching the emulated path's MTU.
#include <udt/udt.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void buffers(UDTSOCKET s) {
    int udt_buf = 256 * 1024 * 1024;
    int udp_buf = 64 * 1024 * 1024;
    UDT::setsockopt(s, 0, UDT_SNDBUF, &udt_buf, sizeof udt_buf);
    UDT::setsockopt(s, 0, UDT_RCVBUF, &udt_buf, sizeof udt_buf);
    UDT::setsockopt(s, 0, UDP_SNDBUF, &udp_buf, sizeof udp_buf);
    UDT::setsockopt(s, 0, UDP_RCVBUF, &udp_buf, sizeof udp_buf);
}

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static int fail(const char* what) {
    std::fprintf(stderr, "spate-udt: %s: %s\n", what, UDT::getlasterror().getErrorMessage());
    return 1;
}

static int recv_end(int port) {
    UDTSOCKET l = UDT::socket(AF_INET, SOCK_STREAM, 0);
    buffers(l);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = INADDR_ANY;
    if (UDT::bind(l, (sockaddr*)&a, sizeof a) == UDT::ERROR) return fail("bind");
    if (UDT::listen(l, 1) == UDT::ERROR) return fail("listen");
    sockaddr_in peer{};
    int len = sizeof peer;
    UDTSOCKET s = UDT::accept(l, (sockaddr*)&peer, &len);
    if (s == UDT::INVALID_SOCK) return fail("accept");
    std::vector<char> buf(1 << 20);
    long long total = 0;
    double first = 0, last = 0;
    for (;;) {
        int n = UDT::recv(s, buf.data(), (int)buf.size(), 0);
        if (n == UDT::ERROR || n == 0) break;
        last = now_s();
        if (total == 0) first = last;
        total += n;
    }
    std::printf("{\"bytes\": %lld, \"seconds\": %.3f}\n", total, last - first);
    UDT::close(s);
    UDT::close(l);
    return 0;
}

static int send_end(const char* host, const char* port, long long bytes) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, port, &hints, &res) != 0 || !res) {
        std::fprintf(stderr, "spate-udt: cannot resolve %s\n", host);
        return 1;
    }
    UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
    buffers(s);
    if (UDT::connect(s, res->ai_addr, (int)res->ai_addrlen) == UDT::ERROR) return fail("connect");
    freeaddrinfo(res);
    std::vector<char> buf(1 << 20, 0);
    long long sent = 0;
    double start = now_s();
    while (sent < bytes) {
        int want = (int)std::min<long long>((long long)buf.size(), bytes - sent);
        int n = UDT::send(s, buf.data(), want, 0);
        if (n == UDT::ERROR) return fail("send");
        sent += n;
    }
    std::printf("{\"bytes\": %lld, \"seconds\": %.3f}\n", sent, now_s() - start);
    UDT::close(s);
    return 0;
}

int main(int argc, char** argv) {
    UDT::startup();
    int rc;
    if (argc == 3 && std::strcmp(argv[1], "recv") == 0) {
        rc = recv_end(std::atoi(argv[2]));
    } else if (argc == 5 && std::strcmp(argv[1], "send") == 0) {
        rc = send_end(argv[2], argv[3], std::atoll(argv[4]));
    } else {
        std::fprintf(stderr, "usage: spate-udt recv PORT | spate-udt send HOST PORT BYTES\n");
        rc = 2;
    }
    UDT::cleanup();
    return rc;
}
