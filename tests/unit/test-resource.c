/* resource.c: parsing the resource options and keys, request <= limit, the state's members. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "resource.h"
#include "tap.h"

int main(void)
{
	struct dsec_err err = {0};
	struct dsec_res r = {0};
	struct dsec_sandbox sb, back;
	unsigned set = 0;
	json_t *rec, *o;

	ok(dsec_res_parse("cpu-request", "0.5", 1, &r, &set, &err) == 0 && r.req.cpus == 0.5 &&
	       set == DSEC_RES_REQ_CPUS,
	   "--cpu-request");
	ok(dsec_res_parse("memory_request", "64M", 0, &r, &set, &err) == 0 &&
	       r.req.memory == 64ULL << 20,
	   "memory_request key");
	ok(dsec_res_parse("class", "be", 1, &r, &set, &err) == 0 && r.cls == DSEC_CLASS_BE,
	   "--class be");
	ok(dsec_res_parse("class", "rt", 1, &r, &set, &err) < 0 && strstr(err.msg, "--class 'rt'"),
	   "bad class: %s", err.msg);
	ok(dsec_res_parse("io-bps", "10M", 1, &r, &set, &err) == 0 && r.lim.io_bps == 10ULL << 20,
	   "--io-bps");
	ok(dsec_res_parse("io-weight", "0", 1, &r, &set, &err) < 0, "io weight 0 refused");
	ok(dsec_res_parse("cpus", "2", 1, &r, &set, &err) == 0 && r.lim.cpus == 2 &&
	       (set & DSEC_RES_CPUS),
	   "limits through dsec_limit_parse");
	ok(dsec_res_parse("net", "host", 1, &r, &set, &err) < 0 && err.errnum == EINVAL,
	   "net is no resource");
	ok(dsec_res_parse("cpu-request", "-1", 1, &r, &set, &err) < 0, "negative request refused");

	rec = json_loads("{\"cpu_request\":0.25,\"requests\":{\"memory\":\"1M\"},\"pids\":9}", 0,
			 NULL);
	memset(&r, 0, sizeof(r));
	set = 0;
	ok(dsec_res_from_record(rec, 0, &r, &set, &err) == 0 && r.req.cpus == 0.25 &&
	       r.req.memory == 1 << 20 && r.lim.pids == 0,
	   "record keys, requests object; limits only when asked");
	ok(dsec_res_from_record(rec, 1, &r, &set, &err) == 0 && r.lim.pids == 9, "with limits");
	json_decref(rec);
	rec = json_loads("{\"class\":[1]}", 0, NULL);
	ok(dsec_res_from_record(rec, 0, &r, &set, &err) < 0, "wrong type refused");
	json_decref(rec);

	memset(&sb, 0, sizeof(sb));
	sb.limits = (struct dsec_limits){.cpus = 1, .memory = 100, .disk = 10, .io_bps = 5};
	sb.req = (struct dsec_requests){.cpus = 2};
	ok(dsec_res_check(&sb, &err) < 0 && strstr(err.msg, "above the cpus limit"),
	   "request above limit");
	sb.req = (struct dsec_requests){.cpus = 1, .memory = 100, .io_weight = 50};
	ok(dsec_res_check(&sb, &err) == 0, "request equal to limit");
	sb.cls = DSEC_CLASS_BE;
	snprintf(sb.io_dev, sizeof(sb.io_dev), "8:0");
	o = json_pack("{s:{s:i}}", "limits", "cpus", 1);
	dsec_res_to_json(&sb, o);
	memset(&back, 0, sizeof(back));
	dsec_res_from_json(o, &back);
	ok(back.cls == DSEC_CLASS_BE && back.req.cpus == 1 && back.req.memory == 100 &&
	       back.req.io_weight == 50 && back.limits.io_bps == 5 && !strcmp(back.io_dev, "8:0"),
	   "state members round trip");
	json_decref(o);
	o = json_object();
	memset(&back, 1, sizeof(back));
	dsec_res_from_json(o, &back);
	ok(back.cls == DSEC_CLASS_LS && back.req.cpus == 0 && back.limits.io_bps == 0,
	   "older state: no requests, ls");
	json_decref(o);
	return tap_done();
}
