#!/usr/bin/env bats
# The JSON-lines contract, run against every tool that reads records.

load helpers

readers() {
	local t
	for t in dsec-exec dsec-reap; do
		[ -x "$TOP/build/$t" ] && echo "$t"
	done
}

args_for() { # what each reader needs besides its records
	case "$1" in
	dsec-exec) echo "-- /bin/true" ;;
	"dsec-spawn --resize") echo "--memory 64M" ;;
	*) echo "" ;;
	esac
}

@test "malformed lines: a diagnostic and an error record with the line number, the rest goes on, exit 1" {
	[ -n "$(readers)" ] || skip "no record-reading tool built yet"
	for t in $(readers); do
		# shellcheck disable=SC2046
		run bash -c "printf '%s\n' '{\"id\":\"sb-none1\",\"task\":1}' '{bad' '[1,2]' '{\"id\":\"sb-none2\",\"task\":2}' | $t $(args_for "$t") 2>$TESTDIR/err"
		[ "$status" -eq 1 ] || { echo "$t: status $status"; return 1; }
		grep -q '<stdin>:2:' "$TESTDIR/err" || { echo "$t: no line 2 diagnostic"; cat "$TESTDIR/err"; return 1; }
		grep -q '<stdin>:3:' "$TESTDIR/err" || { echo "$t: no line 3 diagnostic"; return 1; }
		# both good lines come out, in order, with the user's key and an error for the unknown id
		[ "$(records | jq -s 'map(select(.task) | .task) | join(",")' -r)" = "1,2" ] || { echo "$t: $output"; return 1; }
		# each bad line is an error record naming its line
		[ "$(records | jq -s -r 'map(select(.task == null) | .error.msg | capture("<stdin>:(?<n>[0-9]+):").n) | join(",")')" = "2,3" ] || {
			echo "$t: no error records for lines 2 and 3: $output"
			return 1
		}
		records | jq -e -s --arg t "$t" 'map(select(.task)) | all(.error.tool == $t and (.error.msg | test("sb-none")))' >/dev/null || {
			echo "$t: records lack an error: $output"
			return 1
		}
	done
}

@test "a record without an id string: an error record naming its line, the rest goes on, exit 1" {
	[ -n "$(readers)" ] || skip "no record-reading tool built yet"
	local t
	for t in $(readers) "dsec-spawn --resize"; do
		# shellcheck disable=SC2046
		run bash -c "printf '%s\n' '{\"id\":5,\"task\":1}' '' '{\"task\":2}' '{\"id\":\"sb-none3\",\"task\":3}' | $t $(args_for "$t") 2>$TESTDIR/err"
		[ "$status" -eq 1 ] || { echo "$t: status $status"; return 1; }
		[ "$(records | jq -s -r 'map(.task) | join(",")')" = "1,2,3" ] || { echo "$t: $output"; return 1; }
		[ "$(records | jq -s -r 'map(.error.msg | capture("<stdin>:(?<n>[0-9]+):").n // "-") | join(",")')" = "1,3,-" ] || {
			echo "$t: the error records do not name lines 1 and 3: $output"
			return 1
		}
		grep -q '<stdin>:3: record without an "id"' "$TESTDIR/err" || { echo "$t: no diagnostic"; cat "$TESTDIR/err"; return 1; }
	done
}

@test "a line over the maximum length is refused with its number, the next is read" {
	[ -n "$(readers)" ] || skip "no record-reading tool built yet"
	for t in $(readers); do
		long=$(printf '{"id":"sb-x","pad":"%0500d"}' 0)
		# shellcheck disable=SC2046
		run bash -c "printf '%s\n' '$long' '{\"id\":\"sb-none3\",\"task\":3}' | DSEC_MAX_LINE=100 $t $(args_for "$t")"
		[ "$status" -eq 1 ]
		[[ "$output" == *"<stdin>:1: line longer than 100 bytes"* ]] || { echo "$t: $output"; return 1; }
		[ "$(records | jq -r 'select(.task) | .task')" = "3" ] || { echo "$t: $output"; return 1; }
	done
}

@test "an upstream error record passes through untouched" {
	[ -n "$(readers)" ] || skip "no record-reading tool built yet"
	in='{"task":9,"error":{"tool":"dsec-spawn","errno":28,"msg":"no space"}}'
	for t in $(readers); do
		# shellcheck disable=SC2046
		run bash -c "echo '$in' | $t $(args_for "$t") 2>/dev/null"
		[ "$(records | jq -c '{task,error}')" = "$(echo "$in" | jq -c '{task,error}')" ] || {
			echo "$t: $output"
			return 1
		}
	done
}

@test "a reader that goes away ends the tool cleanly (no crash)" {
	[ -n "$(readers)" ] || skip "no record-reading tool built yet"
	for t in $(readers); do
		# shellcheck disable=SC2046
		run bash -c "for i in \$(seq 2000); do echo '{\"id\":\"sb-gone\"}'; done | $t $(args_for "$t") 2>/dev/null | head -c 1 >/dev/null; echo \"\${PIPESTATUS[1]}\""
		[ "${lines[-1]}" -le 128 ] || { echo "$t died of a signal: ${lines[-1]}"; return 1; }
	done
}
