/*
 * relay: the least a process between an MCP client and a stdio server
 * can do, the baseline of BenchmarkGatewayCall. It starts the server
 * (argv[1], with the rest of argv) on two pipes and copies bytes both
 * ways with poll(2), read(2) and write(2) on one thread: no parsing, no
 * buffering beyond one read, no checks. Whatever mcpbox's gateway costs
 * above this is the gateway's own work; this much any relay pays here.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_all(int fd, const char *p, ssize_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, (size_t)n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: relay SERVER [ARG...]\n");
		return 2;
	}
	int in[2], out[2];
	if (pipe(in) < 0 || pipe(out) < 0) {
		perror("relay: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("relay: fork");
		return 1;
	}
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		execv(argv[1], argv + 1);
		perror("relay: exec");
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	static char buf[65536];
	struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = out[0], .events = POLLIN}};
	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[0].revents) { /* client to server; at its end, close the server's stdin */
			ssize_t n = read(0, buf, sizeof buf);
			if (n <= 0 || write_all(in[1], buf, n) < 0) {
				close(in[1]);
				fds[0].fd = -1;
			}
		}
		if (fds[1].revents) { /* server to client; its end is the relay's */
			ssize_t n = read(out[0], buf, sizeof buf);
			if (n <= 0 || write_all(1, buf, n) < 0)
				break;
		}
	}
	close(out[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}
