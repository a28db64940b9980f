/* libcommon/exec.c: UTF-8 repair, capture, environment, and entering a real process's
 * namespaces (a holder made here with unshare(1), no dsec-spawn needed). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec.h"
#include "tap.h"

static char probe[PATH_MAX];

static int utf8_is(const char *in, size_t len, const char *want)
{
	json_t *j = dsec_utf8_json(in, len);
	int r = j && json_string_length(j) == strlen(want) &&
		!memcmp(json_string_value(j), want, strlen(want));

	if (!r && j)
		printf("# got '%s'\n", json_string_value(j));
	json_decref(j);
	return r;
}

/* Run argv in t with stdout captured; returns the wait status, -1/-2 for start failures. */
static int run(struct dsec_exec_target *t, const char *const *argv, char *out, size_t outsz,
	       int killable)
{
	struct dsec_env env;
	struct dsec_err err = {0};
	struct dsec_exec_spec s = {.argv = (char *const *)argv, .killable = killable};
	struct dsec_exec_proc pr;
	int p[2], r, st = -1;
	ssize_t n;

	dsec_env_init(&env, &t->sb, &err);
	s.envp = env.v;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -3;
	s.fd[0] = -1;
	s.fd[1] = p[1];
	s.fd[2] = 2;
	r = dsec_exec_start(t, &s, &pr, &err);
	close(p[1]);
	if (r < 0) {
		printf("# start: %s\n", err.msg);
		close(p[0]);
		dsec_env_free(&env);
		return r;
	}
	n = read(p[0], out, outsz - 1);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	close(p[0]);
	dsec_exec_wait(&pr, 0, &st, NULL, &err);
	dsec_exec_release(&pr);
	dsec_env_free(&env);
	return st;
}

static void on_usr2(int sig)
{
	(void)sig;
}

static int count_lines(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	return len < 0 ? -1 : n;
}

/* A tree of setsid'd sleepers that ignore SIGTERM, killed whole. */
static void kill_tree(struct dsec_exec_target *t, const char *sbcg, const char *what)
{
	const char *a[] = {probe, "sleepers", "3", NULL};
	struct dsec_exec_spec s = {.argv = (char *const *)a, .killable = 1};
	struct dsec_exec_proc pr;
	struct dsec_env env;
	struct dsec_err err;
	char cg[sizeof(pr.cg)], path[sizeof(cg) + 16], out[64];
	int p[2], st;

	dsec_env_init(&env, NULL, &err);
	s.envp = env.v;
	ok(pipe2(p, O_CLOEXEC) == 0, "pipe");
	s.fd[0] = -1;
	s.fd[1] = p[1];
	s.fd[2] = 2;
	ok(dsec_exec_start(t, &s, &pr, &err) == 0, "%s: start sleepers", what);
	close(p[1]);
	ok(read(p[0], out, sizeof(out)) > 0, "%s: they run", what); /* "3" */
	close(p[0]);
	usleep(200000); /* the grandchildren fork after "3" */
	snprintf(cg, sizeof(cg), "%s", pr.cg);
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	st = count_lines(path);
	ok(st == 7, "%s: 7 processes in the exec cgroup (%d)", what, st);
	ok(dsec_exec_kill(&pr, &err) == 0, "%s: kill", what);
	ok(dsec_exec_wait(&pr, 0, &st, NULL, &err) == 1 && WIFSIGNALED(st), "%s: reaped", what);
	dsec_exec_release(&pr);
	ok(access(cg, F_OK) < 0, "%s: exec cgroup removed", what);
	snprintf(path, sizeof(path), "%s/cgroup.procs", sbcg);
	ok(count_lines(path) == 0, "%s: no survivors in the sandbox cgroup", what);
	dsec_env_free(&env);
}

/* The holder: unshare's child, pid 1 of new pid, mount and uts namespaces. */
static pid_t make_holder(pid_t *unshare_pid)
{
	char path[64], buf[64];
	pid_t u = fork();
	int i;

	if (u == 0) {
		execlp("unshare", "unshare", "--fork", "--pid", "--mount", "--uts", "--ipc",
		       "--mount-proc", "sh", "-c", "hostname unit-sb; exec sleep 60", (char *)NULL);
		_exit(127);
	}
	*unshare_pid = u;
	for (i = 0; i < 200; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", u, u);
		f = fopen(path, "r");
		if (f && fgets(buf, sizeof(buf), f) && atoi(buf) > 0) {
			pid_t h = atoi(buf);

			fclose(f);
			usleep(100000); /* let it set its hostname and exec sleep */
			return h;
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct dsec_exec_target t;
	struct dsec_capture cap = {.max = 10};
	struct dsec_err err = {0};
	struct dsec_env env = {0};
	char out[4096], frz[256], v2[256], *dir;
	pid_t u, h;
	int p[2], st;

	/* UTF-8 */
	ok(utf8_is("héllo", 6, "héllo"), "valid UTF-8 kept");
	ok(utf8_is("a\xff"
		   "b",
		   3,
		   "a\xef\xbf\xbd"
		   "b"),
	   "0xff replaced");
	ok(utf8_is("\xe2\x82", 2, "\xef\xbf\xbd"), "truncated sequence is one U+FFFD");
	ok(utf8_is("\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd"), "overlong: two U+FFFD");
	ok(utf8_is("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), "surrogate: three");
	ok(utf8_is("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"), "emoji kept");
	{
		json_t *j = dsec_utf8_json("a\0b", 3);
		char *s = json_dumps(j, JSON_ENCODE_ANY);

		ok(s && !strcmp(s, "\"a\\u0000b\""), "NUL kept as \\u0000: %s", s ? s : "");
		free(s);
		json_decref(j);
	}
	{
		/* cut to what fits written: the sizes are those of jansson's own output */
		static const struct {
			const char *in;
			size_t len, max;
			const char *out;
			int cut;
		} cuts[] = {
		    {"abcdefghijkl", 12, 10, "\"abcdefgh\"", 1},
		    {"abcdefgh", 8, 10, "\"abcdefgh\"", 0},
		    {"\0\0", 2, 10, "\"\\u0000\"", 1},
		    {"a\n\"", 3, 7, "\"a\\n\\\"\"", 0},
		    {"a\xf0\x9f\x98\x80", 5, 6, "\"a\"", 1},
		    {"abc", 3, 0, "\"\"", 1},
		};
		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			size_t sz = 0;
			int cut = -1;
			json_t *j =
			    dsec_utf8_json_max(cuts[i].in, cuts[i].len, cuts[i].max, &sz, &cut);
			char *s = json_dumps(j, JSON_ENCODE_ANY);

			ok(s && !strcmp(s, cuts[i].out) && cut == cuts[i].cut && sz == strlen(s),
			   "utf8_json_max %zu: %s cut %d size %zu", i, s ? s : "", cut, sz);
			free(s);
			json_decref(j);
		}
	}
	ok(!strcmp(dsec_signame(9), "SIGKILL"), "signame");

	/* environment */
	ok(dsec_env_init(&env, NULL, &err) == 0 && env.n == 2, "env defaults");
	ok(dsec_env_put(&env, "A=1", &err) == 0 && dsec_env_put(&env, "A=2", &err) == 0 &&
	       env.n == 3 && !strcmp(env.v[2], "A=2"),
	   "env replace");
	ok(dsec_env_put(&env, "=x", &err) < 0, "env bad name refused");
	setenv("DSEC_UNIT_X", "hostval", 1);
	ok(dsec_env_put(&env, "DSEC_UNIT_X", &err) == 0 && !strcmp(env.v[3], "DSEC_UNIT_X=hostval"),
	   "env from host");
	ok(dsec_env_put(&env, "DSEC_UNIT_UNSET_Y", &err) == 0 && env.n == 4, "env unset skipped");
	dsec_env_free(&env);

	/* capture: bounded, drains the rest */
	ok(pipe2(p, O_NONBLOCK) == 0, "pipe");
	ok(write(p[1], "0123456789abcdef", 16) == 16, "write");
	ok(dsec_capture_read(&cap, p[0], &err) == 1 && cap.len == 10 && cap.truncated, "truncated");
	close(p[1]);
	ok(dsec_capture_read(&cap, p[0], &err) == 0 && !memcmp(cap.buf, "0123456789", 10), "EOF");
	close(p[0]);
	dsec_capture_free(&cap);

	/* entering a process's namespaces */
	dir = realpath(argc > 0 ? argv[0] : ".", NULL);
	snprintf(probe, sizeof(probe), "%.*s/probe", (int)(strrchr(dir, '/') - dir), dir);
	free(dir);
	if (getuid() != 0 || access(probe, X_OK) < 0) {
		ok(1, "# SKIP not root or no probe");
		return tap_done();
	}
	h = make_holder(&u);
	ok(h > 0, "holder %d", (int)h);
	/* Dispositions and a mask the command must not inherit: the child shares our memory
	 * until exec (CLONE_VM), so none of our handlers may run there either. Set before the
	 * first start, which looks them up once. */
	{
		struct sigaction sa = {.sa_handler = on_usr2};
		sigset_t term;

		signal(SIGUSR1, SIG_IGN);
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR2, &sa, NULL);
		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		sigprocmask(SIG_BLOCK, &term, NULL);
	}
	memset(&t, 0, sizeof(t));
	snprintf(t.sb.id, sizeof(t.sb.id), "sb-unit");
	t.pidfd = (int)syscall(SYS_pidfd_open, h, 0);
	t.nsflags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC;
	t.cgdir = -1;
	for (st = 0; st < DSEC_CG_NCTRL; st++)
		t.cgprocs[st] = -1;
	snprintf(frz, sizeof(frz), "/sys/fs/cgroup/freezer/dsec-unit-%d", (int)getpid());
	if (mkdir(frz, 0755) == 0) {
		t.sb.cg.version = 1;
		snprintf(t.sb.cg.v1[DSEC_CG_FREEZER], sizeof(t.sb.cg.v1[0]), "%s", frz);
		snprintf(out, sizeof(out), "%s/cgroup.procs", frz);
		t.cgprocs[DSEC_CG_FREEZER] = open(out, O_WRONLY | O_CLOEXEC);
	}
	{
		const char *a1[] = {probe, "hostname", NULL}, *a2[] = {probe, "pid", NULL},
			   *a3[] = {probe, "fds", NULL}, *a4[] = {probe, "caps", NULL},
			   *a5[] = {probe, "nnp", NULL}, *a6[] = {probe, "exit", "7", NULL},
			   *a7[] = {"no-such-cmd", NULL}, *a8[] = {"/etc/passwd", NULL},
			   *a9[] = {probe, "kill", "15", NULL}, *a10[] = {probe, "cgroup", NULL};

		ok(run(&t, a1, out, sizeof(out), 0) == 0 && !strcmp(out, "unit-sb"),
		   "hostname of the sandbox: %s", out);
		ok(run(&t, a2, out, sizeof(out), 0) == 0 && atoi(out) > 1 && atoi(out) < 100,
		   "pid inside the pid namespace: %s", out);
		ok(run(&t, a3, out, sizeof(out), 0) == 0 && !strcmp(out, "0 1 2"), "fds: %s", out);
		ok(run(&t, a4, out, sizeof(out), 0) == 0 &&
		       !strcmp(out, "eff=00000000a00005fb prm=00000000a00005fb "
				    "inh=0000000000000000 bnd=00000000a00005fb "
				    "amb=0000000000000000"),
		   "caps: %s", out);
		ok(run(&t, a5, out, sizeof(out), 0) == 0 && !strcmp(out, "1"), "no_new_privs");
		{
			const char *sig[] = {"awk",
					     "/^Sig(Blk|Ign|Cgt)/ { printf \"%s%s \", $1, $2 }",
					     "/proc/self/status", NULL};
			sigset_t now;

			ok(run(&t, sig, out, sizeof(out), 0) == 0 &&
			       !strcmp(out, "SigBlk:0000000000000000 SigIgn:0000000000000000 "
					    "SigCgt:0000000000000000 "),
			   "no signal blocked, ignored or caught in the command: %s", out);
			sigprocmask(SIG_SETMASK, NULL, &now);
			ok(sigismember(&now, SIGTERM) == 1 && sigismember(&now, SIGUSR2) == 0,
			   "the caller's signal mask is back after start");
		}
		st = run(&t, a6, out, sizeof(out), 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 7, "exit status 7");
		ok(run(&t, a7, out, sizeof(out), 0) == DSEC_EXEC_NOT_FOUND, "missing command");
		ok(run(&t, a8, out, sizeof(out), 0) == DSEC_EXEC_CANNOT_RUN, "not executable");
		st = run(&t, a9, out, sizeof(out), 0);
		ok(WIFSIGNALED(st) && WTERMSIG(st) == 15, "killed by SIGTERM");
		if (t.sb.cg.version == 1) {
			ok(run(&t, a10, out, sizeof(out), 1) == 0 &&
			       strstr(out, "freezer:/dsec-unit-") && strstr(out, "/exec-"),
			   "killable exec in its own freezer cgroup: %s", out);
		}
	}
	if (t.sb.cg.version == 1)
		kill_tree(&t, frz, "v1 freezer");
	/* cgroup v2: the unified hierarchy here has no controllers, enough for CLONE_INTO_CGROUP
	 * and cgroup.kill */
	snprintf(v2, sizeof(v2), "/sys/fs/cgroup/unified/dsec-unit-%d", (int)getpid());
	if (access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0 && mkdir(v2, 0755) == 0) {
		struct dsec_exec_target t2 = t;
		const char *a[] = {probe, "cgroup", NULL};

		t2.sb.cg.version = 2;
		snprintf(t2.sb.cg.v2, sizeof(t2.sb.cg.v2), "%s", v2);
		t2.cgdir = open(v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ok(run(&t2, a, out, sizeof(out), 0) == 0 && strstr(out, "0::/dsec-unit-"),
		   "v2: born in the sandbox cgroup: %s", out);
		kill_tree(&t2, v2, "v2 cgroup.kill");
		close(t2.cgdir);
		ok(rmdir(v2) == 0, "v2 sandbox cgroup removed");
	} else
		ok(1, "# SKIP no cgroup2 mount");
	kill(u, SIGKILL);
	kill(h, SIGKILL);
	waitpid(u, NULL, 0);
	close(t.pidfd);
	if (t.sb.cg.version == 1) {
		close(t.cgprocs[DSEC_CG_FREEZER]);
		ok(rmdir(frz) == 0, "sandbox cgroup removed");
	}
	return tap_done();
}
