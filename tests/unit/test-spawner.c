/* spawner.h: host names, K=V, and spec records over the options' defaults. The making itself
 * is tested against the kernel by tests/300-spawn.bats. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spawner.h"
#include "tap.h"

static struct dsec_net_policy defpol;

static struct dsec_spawn_spec defaults(void)
{
	struct dsec_spawn_spec s = {
	    .image = "busybox",
	    .lim = {.cpus = 1, .memory = 1 << 30, .pids = 512, .disk = 1 << 30},
	    .ttl_us = 3600000000ULL,
	    .net = DSEC_NET_NONE,
	    .pol = &defpol};

	s.env = json_array();
	json_array_append_new(s.env, json_string("A=1"));
	s.labels = json_object();
	return s;
}

static void release(struct dsec_spawn_spec *s)
{
	json_decref(s->env);
	json_decref(s->labels);
	if (s->pol != &defpol)
		free(s->pol);
}

/* Apply the record in text over the defaults; 0 or -1, *s filled, err set. */
static int apply(const char *text, struct dsec_spawn_spec *s, json_t **rec, struct dsec_err *err)
{
	*s = defaults();
	*rec = json_loads(text, 0, NULL);
	memset(err, 0, sizeof(*err));
	return dsec_spawn_spec_from_record(*rec, s, err);
}

/* A record that must be refused, EINVAL or ERANGE, with a message naming key. */
static void refused(const char *text, const char *key)
{
	struct dsec_spawn_spec s;
	struct dsec_err err;
	json_t *rec;
	int r = apply(text, &s, &rec, &err);

	ok(r < 0 && (err.errnum == EINVAL || err.errnum == ERANGE) && strstr(err.msg, key),
	   "%s refused: %s", text, err.msg);
	release(&s);
	json_decref(rec);
}

int main(void)
{
	struct dsec_spawn_spec s;
	struct dsec_err err;
	json_t *rec;
	char long_name[80];

	ok(dsec_hostname_ok("sb-1.example"), "a dotted host name");
	ok(!dsec_hostname_ok("") && !dsec_hostname_ok("-a") && !dsec_hostname_ok(".a"),
	   "empty, '-' or '.' first");
	ok(!dsec_hostname_ok("a b") && !dsec_hostname_ok("a/b") && !dsec_hostname_ok("a_b"),
	   "a space, a slash, an underscore");
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ok(!dsec_hostname_ok(long_name), "over DSEC_HOSTNAME_MAX");
	ok(dsec_kv_ok("K=V") && dsec_kv_ok("K=") && !dsec_kv_ok("=V") && !dsec_kv_ok("K"),
	   "K=V needs a name and an '='");

	/* an empty record keeps every default */
	ok(apply("{}", &s, &rec, &err) == 0, "empty record");
	ok(!strcmp(s.image, "busybox") && s.lim.cpus == 1 && s.lim.memory == 1 << 30 &&
	       s.ttl_us == 3600000000ULL && !s.hostname && !s.user && s.pol == &defpol,
	   "defaults kept");
	release(&s);
	json_decref(rec);

	/* every key over the defaults, in each of its forms */
	ok(apply(
	       "{\"image\":\"py\",\"cpus\":0.5,\"memory\":\"256M\",\"pids\":64,\"disk\":"
	       "\"64M\",\"ttl\":\"90s\",\"hostname\":\"box\",\"workdir\":\"/srv\",\"run_as\":1000,"
	       "\"env\":{\"B\":\"2\"},\"labels\":{\"task\":\"t1\"},\"net\":\"host\",\"task\":7}",
	       &s, &rec, &err) == 0,
	   "full record: %s", err.msg);
	ok(!strcmp(s.image, "py") && s.lim.cpus == 0.5 && s.lim.memory == 256u << 20 &&
	       s.lim.pids == 64 && s.lim.disk == 64u << 20,
	   "image and limits from the record");
	ok(s.ttl_us == 90000000ULL && !strcmp(s.hostname, "box") && !strcmp(s.workdir, "/srv"),
	   "ttl, hostname and workdir");
	ok(s.user && !strcmp(s.user, "1000"), "a numeric run_as is a uid: %s", s.user ?: "NULL");
	ok(s.net == DSEC_NET_HOST, "net");
	ok(json_array_size(s.env) == 2 &&
	       !strcmp(json_string_value(json_array_get(s.env, 1)), "B=2"),
	   "env object added after the defaults");
	ok(!strcmp(json_string_value(json_object_get(s.labels, "task")), "t1"), "labels");
	release(&s);
	json_decref(rec);

	/* a ttl in seconds; an allow-list gets a policy of its own */
	ok(apply("{\"ttl\":2.5,\"env\":[\"C=3\"],\"net\":\"nat\",\"allow\":[\"10.0.0.0/8:443\"]}",
		 &s, &rec, &err) == 0,
	   "ttl as a number, env as an array, allow: %s", err.msg);
	ok(s.ttl_us == 2500000ULL, "ttl 2.5 s");
	ok(json_array_size(s.env) == 2, "env array added");
	ok(s.pol != &defpol && s.pol->n == defpol.n + 1 && defpol.n == 0,
	   "the record's allow-list is its own; the defaults' is untouched");
	release(&s);
	json_decref(rec);

	/* bad values: one message naming the key, EINVAL (ERANGE: out of bounds) */
	refused("{\"image\":7}", "image");
	refused("{\"memory\":true}", "memory");
	refused("{\"memory\":\"lots\"}", "memory");
	refused("{\"cpus\":-1}", "cpus");
	refused("{\"ttl\":-1}", "ttl");
	refused("{\"ttl\":\"forever\"}", "ttl");
	refused("{\"hostname\":\"a b\"}", "hostname");
	refused("{\"workdir\":\"rel\"}", "workdir");
	refused("{\"run_as\":-9}", "run_as");
	refused("{\"env\":[\"=x\"]}", "env");
	refused("{\"env\":{\"K\":1}}", "env");
	refused("{\"env\":\"K=V\"}", "env");
	refused("{\"labels\":[1]}", "labels");
	refused("{\"labels\":{\"k\":1}}", "labels");
	refused("{\"allow\":\"x\"}", "allow");
	refused("{\"bandwidth\":\"fast\"}", "bandwidth");
	return tap_done();
}
