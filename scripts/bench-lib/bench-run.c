/* bench-run: run a command many times for scripts/bench, timed with CLOCK_MONOTONIC, so that the
 * timing loop costs no shell fork per run (posix_spawn, i.e. vfork + exec).
 *
 *   bench-run [-j J] [-n N] [-e FILE] -- CMD [ARG...]
 *       run CMD N times, at most J at once; prints "<elapsed_us> <failed>" for the batch
 *   bench-run -l [-n N] [-e FILE] -- CMD [ARG...]
 *       run CMD N times one after the other; prints "<median_us> <p99_us> <min_us> <failed>"
 *   bench-run -F [-n N]
 *       fork() and _exit() N times, no exec; prints "<median_us> <p99_us> <min_us> 0": what
 *       copying and tearing down an address space costs on this machine
 *   bench-run -p LINE [-n N] [-e FILE] -- CMD [ARG...]
 *       start CMD once with pipes on its standard input and output, then N times write LINE
 *       and a newline to it and read one line back, timing each round trip; prints
 *       "<median_us> <p99_us> <min_us> <failed>", a line that holds "error" failing: a
 *       long-running dsec-exec fed records one at a time, as an agent's loop drives it
 *
 * "{}" in an argument is replaced by the run's index (0 … N-1), e.g. for container names.
 * Standard input and output of CMD are /dev/null; its standard error goes to FILE (appended)
 * or /dev/null. A run fails when CMD exits non-zero or is killed. Built by scripts/bench with
 * `cc -O2`; not part of the installed toolkit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fputs("usage: bench-run [-l] [-j J] [-n N] [-e FILE] -- CMD [ARG...]\n"
	      "       bench-run -F [-n N]\n"
	      "       bench-run -p LINE [-n N] [-e FILE] -- CMD [ARG...]\n",
	      stderr);
	exit(2);
}

static void print_lat(uint64_t *t, long n, long failed)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	uint64_t med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	long i99 = (long)((double)n * 0.99 + 0.999999) - 1;
	if (i99 < 0)
		i99 = 0;
	if (i99 >= n)
		i99 = n - 1;
	printf("%llu %llu %llu %ld\n", (unsigned long long)(med / 1000),
	       (unsigned long long)(t[i99] / 1000), (unsigned long long)(t[0] / 1000), failed);
}

static int fork_lat(long n)
{
	uint64_t *t = calloc((size_t)n, sizeof(uint64_t));
	if (!t)
		return 1;
	for (long i = 0; i < n; i++) {
		uint64_t s = now_ns();
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0) {
			perror("bench-run: fork");
			return 1;
		}
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		t[i] = now_ns() - s;
	}
	print_lat(t, n, 0);
	return 0;
}

/* -p: one CMD, N request/response round trips over its stdin and stdout. */
static int pipe_lat(char **cmd, const char *line, long n, int errfd)
{
	int in[2], out[2], st;
	pid_t pid;
	size_t len = strlen(line), cap = 1 << 20, have = 0;
	char *req = malloc(len + 2), *buf = malloc(cap);
	uint64_t *t = calloc((size_t)n, sizeof(uint64_t));
	long failed = 0;
	posix_spawn_file_actions_t fa;

	if (!req || !buf || !t || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		perror("bench-run: setup");
		return 1;
	}
	memcpy(req, line, len);
	req[len++] = '\n';
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errfd, 2);
	if ((errno = posix_spawnp(&pid, cmd[0], &fa, NULL, cmd, environ)) != 0) {
		fprintf(stderr, "bench-run: %s: %s\n", cmd[0], strerror(errno));
		return 1;
	}
	close(in[0]);
	close(out[1]);
	for (long i = 0; i < n; i++) {
		uint64_t s = now_ns();
		char *nl = NULL;

		if (write(in[1], req, len) != (ssize_t)len) {
			perror("bench-run: write");
			return 1;
		}
		while (!(nl = memchr(buf, '\n', have))) {
			ssize_t r = read(out[0], buf + have, cap - have);

			if (r <= 0) {
				fprintf(stderr, "bench-run: %s: no answer to request %ld\n", cmd[0], i);
				return 1;
			}
			have += (size_t)r;
			if (have == cap)
				have = 0; /* a line this long is no answer we time */
		}
		t[i] = now_ns() - s;
		*nl = '\0';
		if (strstr(buf, "\"error\""))
			failed++;
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have);
	}
	close(in[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	print_lat(t, n, failed);
	return 0;
}

/* argv for run i: "{}" anywhere in an argument becomes i. Only the arguments that hold "{}"
 * are rebuilt; the others point into the original argv. */
static char **make_argv(char **cmd, int argc, char **buf, long i)
{
	char num[24];
	snprintf(num, sizeof(num), "%ld", i);
	for (int k = 0; k < argc; k++) {
		char *p = strstr(cmd[k], "{}");
		if (!p) {
			buf[k] = cmd[k];
			continue;
		}
		size_t len = strlen(cmd[k]) + strlen(num);
		char *s = malloc(len + 1);
		if (!s) {
			perror("bench-run: malloc");
			exit(1);
		}
		snprintf(s, len + 1, "%.*s%s%s", (int)(p - cmd[k]), cmd[k], num, p + 2);
		buf[k] = s;
	}
	buf[argc] = NULL;
	return buf;
}

static void free_argv(char **cmd, int argc, char **buf)
{
	for (int k = 0; k < argc; k++)
		if (buf[k] != cmd[k])
			free(buf[k]);
}

int main(int argc, char **argv)
{
	long n = 1, j = 1;
	int lat = 0, forks = 0, opt;
	const char *errfile = NULL, *line = NULL;

	while ((opt = getopt(argc, argv, "+Flj:n:e:p:")) != -1) {
		switch (opt) {
		case 'p':
			line = optarg;
			break;
		case 'F':
			forks = 1;
			break;
		case 'l':
			lat = 1;
			break;
		case 'j':
			j = strtol(optarg, NULL, 10);
			break;
		case 'n':
			n = strtol(optarg, NULL, 10);
			break;
		case 'e':
			errfile = optarg;
			break;
		default:
			usage();
		}
	}
	if (forks && n >= 1)
		return fork_lat(n);
	if (optind >= argc || n < 1 || j < 1)
		usage();
	if (lat)
		j = 1;
	char **cmd = argv + optind;
	int cargc = argc - optind;
	char **abuf = calloc((size_t)cargc + 1, sizeof(char *));
	uint64_t *t = calloc((size_t)n, sizeof(uint64_t));
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	int errfd =
	    errfile ? open(errfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : devnull;
	if (!abuf || !t || devnull < 0 || errfd < 0) {
		perror("bench-run: setup");
		return 1;
	}
	if (line)
		return pipe_lat(cmd, line, n, errfd);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 0);
	posix_spawn_file_actions_adddup2(&fa, devnull, 1);
	posix_spawn_file_actions_adddup2(&fa, errfd, 2);

	long started = 0, running = 0, failed = 0;
	uint64_t t0 = now_ns(), t1;
	while (started < n || running > 0) {
		while (started < n && running < j) {
			pid_t pid;
			char **a = make_argv(cmd, cargc, abuf, started);
			uint64_t s = now_ns();
			int rc = posix_spawnp(&pid, a[0], &fa, NULL, a, environ);
			free_argv(cmd, cargc, abuf);
			started++;
			if (rc != 0) {
				fprintf(stderr, "bench-run: %s: %s\n", cmd[0], strerror(rc));
				failed++;
				continue;
			}
			running++;
			if (lat) {
				int st;
				while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
					;
				t[started - 1] = now_ns() - s;
				running--;
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
					failed++;
			}
		}
		if (running > 0) {
			int st;
			pid_t pid = wait(&st);
			if (pid < 0) {
				if (errno == EINTR)
					continue;
				perror("bench-run: wait");
				return 1;
			}
			running--;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				failed++;
		}
	}
	t1 = now_ns();
	if (lat) {
		print_lat(t, n, failed);
	} else {
		printf("%llu %ld\n", (unsigned long long)((t1 - t0) / 1000), failed);
	}
	return 0;
}
