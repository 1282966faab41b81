/*
 * fl_probe.c: a small network and process probe that faultline's own
 * integration tests run on hosts (build/bin/fl-probe), so the tests need no
 * tool that a minimal machine may lack (nc, python).
 *
 *   fl-probe listen PORT                 TCP server: accept forever, say "hi\n" to each
 *   fl-probe connect HOST PORT [MS]      one TCP connect; exit 0 on success, 1 on failure
 *   fl-probe wait-connect HOST PORT MS   retry connects (every 20 ms) until one works or MS pass
 *   fl-probe udp-recv PORT MS            wait MS for one datagram; prints "got" / "none"
 *   fl-probe udp-send HOST PORT N        send N datagrams, 10 ms apart
 *   fl-probe forks N                     start N sleeping children; prints how many it got
 *   fl-probe serve-file PORT PATH        TCP server: send each client PATH as it is then
 *   fl-probe fetch HOST PORT MS          retry until a connect works (for up to MS), then
 *                                        print what the server sends; exit 0 on its EOF
 *
 * HOST is a name from /etc/hosts or an address.  Every outcome is printed as
 * one line, so that scenario expectations can match it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int resolve(const char *host, int port, struct sockaddr_in *sa)
{
    struct addrinfo hints = {.ai_family = AF_INET}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return -1;
    *sa = *(struct sockaddr_in *)res->ai_addr;
    sa->sin_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* 0 connected, 1 refused/unreachable/timeout */
static int try_connect(const struct sockaddr_in *sa, int ms, char *why, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) {
        close(fd);
        return 0;
    }
    if (errno != EINPROGRESS) {
        snprintf(why, len, "%s", strerror(errno));
        close(fd);
        return 1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, ms);
    if (r == 0) {
        snprintf(why, len, "timeout after %d ms", ms);
        close(fd);
        return 1;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    close(fd);
    if (err) {
        snprintf(why, len, "%s", strerror(err));
        return 1;
    }
    return 0;
}

/* serve-file: every client gets the file's content as it is when it
 * connects (or "no file: ERROR"), then EOF. */
static int serve_file(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
        printf("listen failed: %s\n", strerror(errno));
        return 1;
    }
    printf("serving %s on %d\n", path, port);
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            continue;
        char buf[4096];
        int f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0) {
            int n = snprintf(buf, sizeof buf, "no file: %s\n", strerror(errno));
            if (write(c, buf, (size_t)n) < 0) { /* peer gone */
            }
        }
        ssize_t n;
        while (f >= 0 && (n = read(f, buf, sizeof buf)) > 0)
            if (write(c, buf, (size_t)n) < 0)
                break;
        if (f >= 0)
            close(f);
        close(c);
    }
}

/* fetch: connect (retrying for up to ms), copy what comes to stdout until
 * EOF; 0 once EOF came, 1 when no connect worked or the server went quiet
 * for ms. */
static int fetch(const char *host, const char *port, int ms)
{
    struct sockaddr_in sa;
    if (resolve(host, atoi(port), &sa) < 0) {
        printf("cannot resolve %s\n", host);
        return 1;
    }
    char why[128] = "";
    long long end = now_ms() + ms;
    int fd = -1;
    while (fd < 0 && now_ms() < end) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct timeval tv = {.tv_sec = 0, .tv_usec = 200 * 1000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        snprintf(why, sizeof why, "%s", strerror(errno));
        close(fd);
        fd = -1;
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (fd < 0) {
        printf("fetch %s:%s failed for %d ms: %s\n", host, port, ms, why);
        return 1;
    }
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) {
            printf("fetch %s:%s: no EOF within %d ms\n", host, port, ms);
            return 1;
        }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        fwrite(buf, 1, (size_t)n, stdout);
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: fl-probe listen|connect|wait-connect|udp-recv|udp-send|forks|"
                        "serve-file|fetch ...\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "listen") && argc == 3) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
            printf("listen failed: %s\n", strerror(errno));
            return 1;
        }
        printf("listening on %s\n", argv[2]);
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                continue;
            if (write(c, "hi\n", 3) < 0) { /* peer gone */
            }
            close(c);
        }
    }
    if (!strcmp(cmd, "serve-file") && argc == 4)
        return serve_file(atoi(argv[2]), argv[3]);
    if (!strcmp(cmd, "fetch") && argc == 5)
        return fetch(argv[2], argv[3], atoi(argv[4]));
    if ((!strcmp(cmd, "connect") && (argc == 4 || argc == 5)) ||
        (!strcmp(cmd, "wait-connect") && argc == 5)) {
        struct sockaddr_in sa;
        if (resolve(argv[2], atoi(argv[3]), &sa) < 0) {
            printf("cannot resolve %s\n", argv[2]);
            return 1;
        }
        int ms = argc == 5 ? atoi(argv[4]) : 1000;
        char why[128] = "";
        if (!strcmp(cmd, "connect")) {
            int r = try_connect(&sa, ms, why, sizeof why);
            printf(r ? "connect %s:%s failed: %s\n" : "connect %s:%s ok\n", argv[2], argv[3], why);
            return r;
        }
        long long end = now_ms() + ms;
        while (now_ms() < end) {
            if (try_connect(&sa, 200, why, sizeof why) == 0) {
                printf("connect %s:%s ok\n", argv[2], argv[3]);
                return 0;
            }
            struct timespec ts = {0, 20 * 1000000};
            nanosleep(&ts, NULL);
        }
        printf("connect %s:%s failed for %d ms: %s\n", argv[2], argv[3], ms, why);
        return 1;
    }
    if (!strcmp(cmd, "udp-recv") && argc == 4) {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            printf("bind failed: %s\n", strerror(errno));
            return 1;
        }
        printf("udp listening on %s\n", argv[2]);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, atoi(argv[3]));
        printf(r > 0 ? "udp got\n" : "udp none\n");
        return 0;
    }
    if (!strcmp(cmd, "udp-send") && argc == 5) {
        struct sockaddr_in sa;
        if (resolve(argv[2], atoi(argv[3]), &sa) < 0) {
            printf("cannot resolve %s\n", argv[2]);
            return 1;
        }
        int fd = socket(AF_INET, SOCK_DGRAM, 0), n = atoi(argv[4]);
        for (int i = 0; i < n; i++) {
            sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, sizeof sa);
            struct timespec ts = {0, 10 * 1000000};
            nanosleep(&ts, NULL);
        }
        printf("udp sent %d\n", n);
        return 0;
    }
    if (!strcmp(cmd, "forks") && argc == 3) {
        int n = atoi(argv[2]), ok = 0, err = 0;
        pid_t *pids = n > 0 ? calloc((size_t)n, sizeof *pids) : NULL;
        if (n > 0 && !pids)
            return 1;
        for (int i = 0; i < n; i++) {
            pid_t p = fork();
            if (p == 0) {
                pause();
                _exit(0);
            }
            if (p > 0)
                pids[ok++] = p;
            else
                err = errno;
        }
        printf("forks %d of %d%s%s\n", ok, n, err ? ": " : "", err ? strerror(err) : "");
        for (int i = 0; i < ok; i++)
            kill(pids[i], SIGKILL);
        while (wait(NULL) > 0)
            ;
        free(pids);
        return 0;
    }
    fprintf(stderr, "fl-probe: bad arguments\n");
    return 2;
}
