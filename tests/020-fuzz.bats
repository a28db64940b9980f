#!/usr/bin/env bats
# Each libFuzzer harness (make fuzz) runs for a bounded time over its corpus in tests/fuzz/.
# DSEC_FUZZ_SECONDS sets the time per harness (default 15).

load helpers

fuzz_one() {
	local name=$1 bin="$TOP/build/fuzz/fuzz-$1"
	[ -x "$bin" ] || skip "fuzz-$name not built (make fuzz needs clang)"
	mkdir -p "$TESTDIR/corpus"
	cp -r "$TOP/tests/fuzz/corpus/$name/." "$TESTDIR/corpus/" 2>/dev/null || true
	run timeout 300 "$bin" -max_total_time="${DSEC_FUZZ_SECONDS:-15}" -max_len=65536 \
		-rss_limit_mb=1024 -artifact_prefix="$TESTDIR/" "$TESTDIR/corpus"
	if [ "$status" -ne 0 ]; then
		echo "$output" | tail -40
		ls "$TESTDIR"/crash-* "$TESTDIR"/leak-* "$TESTDIR"/oom-* 2>/dev/null || true
		return 1
	fi
}

@test "fuzz: JSON-lines record reader" {
	fuzz_one jsonl
}

@test "fuzz: size, duration and count parsers" {
	fuzz_one spec
}

@test "fuzz: seccomp profile parser and compiler" {
	fuzz_one seccomp
}

@test "fuzz: archive importer (tar in any compression, OCI and docker archives)" {
	fuzz_one import
	run bash -c 'ls -d /tmp/dsec-fuzz.* 2>/dev/null'
	[ -z "$output" ] || { echo "left: $output"; return 1; }
}
