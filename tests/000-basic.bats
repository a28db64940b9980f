#!/usr/bin/env bats
# Every tool: --help, --version, a bad option, and a man page that matches --help.

load helpers

tools() { # the user-facing tools: one per cmd/dsec-*.c (helpers like dsec-holder are not)
	local c
	for c in "$TOP"/cmd/dsec-*.c; do
		c=$(basename "$c" .c)
		[ -x "$TOP/build/$c" ] && echo "$c"
	done
}

@test "at least one tool is built" {
	[ -n "$(tools)" ]
}

@test "every tool: --help prints usage on stdout and exits 0" {
	for t in $(tools); do
		run "$t" --help
		[ "$status" -eq 0 ] || { echo "$t --help: $status"; return 1; }
		[[ "$output" == *"Usage: $t"* ]] || { echo "$t --help has no 'Usage: $t'"; return 1; }
		run "$t" -h
		[ "$status" -eq 0 ]
	done
}

@test "every tool: --version names the tool and exits 0" {
	for t in $(tools); do
		run "$t" --version
		[ "$status" -eq 0 ]
		[[ "$output" == "$t "[0-9]* ]] || { echo "$t --version: $output"; return 1; }
	done
}

@test "every tool: an unknown option exits 2 with a hint" {
	for t in $(tools); do
		run "$t" --no-such-option
		[ "$status" -eq 2 ] || { echo "$t: status $status"; return 1; }
		[[ "$output" == *"Try '$t --help'"* ]] || { echo "$t: $output"; return 1; }
	done
}

@test "every tool: an empty --root or --run, or an argument with control bytes, is one escaped usage error" {
	for t in $(tools); do
		for o in --root --run; do
			run "$t" "$o" '' x
			[ "$status" -eq 2 ] || { echo "$t $o '': status $status"; return 1; }
			[ "${lines[0]}" = "$t: error: $o: empty path" ] || { echo "$t $o '': $output"; return 1; }
		done
	done
	run dsec-spawn --image $'a\e[31m\nb'
	[ "$status" -ne 0 ]
	[[ "$output" != *$'\e'* ]] && [[ "$output" == *'\x1b[31m\x0ab'* ]] || { echo "$output"; return 1; }
}

@test "every tool has a man page that lints clean" {
	for t in $(tools); do
		[ -f "$TOP/man/$t.1" ] || { echo "no man/$t.1"; return 1; }
		run mandoc -Tlint -Wwarning "$TOP/man/$t.1"
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	done
	for m in dsec.7 dsec-jsonl.5; do
		run mandoc -Tlint -Wwarning "$TOP/man/$m"
		[ "$status" -eq 0 ] || { echo "$m: $output"; return 1; }
	done
}

@test "every tool: --help and the man page name the same long options" {
	for t in $(tools); do
		local h m
		# the options --help lists: the first long option of each option line
		h=$("$t" --help | grep -E '^[[:space:]]+(-[A-Za-z0-9],[[:space:]]*)?--[a-z]' |
			sed -E 's/^[[:space:]]+(-[A-Za-z0-9],[[:space:]]*)?(--[a-z][a-z0-9-]+).*/\2/' | sort -u)
		# the options the page documents: its .It Fl items (prose may name other tools' options)
		m=$(grep -E '^\.It .*Fl ' "$TOP/man/$t.1" | sed 's/\\-/-/g' |
			grep -oE 'Fl -[a-z][a-z0-9-]+' | sed -E 's/^Fl -/--/' | sort -u)
		if [ "$h" != "$m" ]; then
			echo "$t: --help and man page differ:"
			diff <(echo "$h") <(echo "$m") || true
			return 1
		fi
	done
}

@test "every tool is listed in dsec(7) and the README" {
	for t in $(tools); do
		grep -q "$t" "$TOP/man/dsec.7" || { echo "$t not in dsec.7"; return 1; }
		grep -q "$t" "$TOP/README.md" || { echo "$t not in README.md"; return 1; }
	done
}

@test "a failed write to stdout is an error (exit 3), not a silent success" {
	for t in $(tools); do
		run bash -c "'$t' --help >/dev/full"
		[ "$status" -ne 0 ] || { echo "$t --help >/dev/full exited 0"; return 1; }
	done
}

@test "only dsec-layer loads libarchive: the tools a script runs per sandbox start without it" {
	# libarchive brings libxml2, ICU and libstdc++, some 3 ms at every start here; dsec-spawn
	# --from runs dsec-layer commit instead, dsec-exec cp loads it when it copies
	command -v ldd >/dev/null || skip "no ldd"
	for t in dsec-spawn dsec-reap dsec-warm dsec-ps libexec/dsec-exec; do
		run ldd "$TOP/build/$t"
		[ "$status" -eq 0 ]
		[[ "$output" != *libarchive* ]] || { echo "$t links libarchive"; return 1; }
	done
	run ldd "$TOP/build/dsec-layer"
	[[ "$output" == *libarchive* ]]
}
