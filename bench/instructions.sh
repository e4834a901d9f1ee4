#!/usr/bin/env bash
# instructions.sh OLD [NEW]: instructions one operation costs, counted by
# callgrind, for two revisions of the library (NEW defaults to the working
# tree): a Transport round trip over a stub base (BenchmarkTransportStub's)
# and one headers.Parse, for each header set of rtloop. Unlike ns/op on a
# shared machine the counts repeat: to within about ±1 % at N=20000 (the
# default), ±0.2 % at N=100000 (maps iterate in a random order, so a
# header's fields are not met in the same order twice). Each figure is
# (I(2N) − I(N)) / N with the garbage collector off, so start-up cancels
# out; allocation is counted, garbage collection is not. Needs valgrind.
#
#   bench/instructions.sh 26fb669
#   N=100000 bench/instructions.sh 26fb669 main
set -euo pipefail
old=${1:?usage: instructions.sh OLD [NEW]}
new=${2:-}
n=${N:-20000}
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
top=$(git -C "$here" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'for d in old new; do [ -d "$tmp/src-$d" ] && git -C "$top" worktree remove --force "$tmp/src-$d" >/dev/null 2>&1; done; rm -rf "$tmp"' EXIT

build() { # build REV|"" NAME: $tmp/NAME.bin
	local dir=$top
	if [ -n "$1" ]; then
		dir=$tmp/src-$2
		git -C "$top" worktree add -q --detach "$dir" "$1"
		mkdir -p "$dir/bench/rtloop"
		cp "$here/rtloop/main.go" "$dir/bench/rtloop/main.go" # the same driver for both
	fi
	(cd "$dir/bench" && go build -o "$tmp/$2.bin" ./rtloop)
}
build "$old" old
build "$new" new

count() { # count BIN OP SET N; a run killed before its summary (memory: GC is off) is run again
	local v try
	for try in 1 2 3; do
		v=$(GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" "$3" "$4" 2>&1 |
			sed -n 's/.*I *refs: *//p' | tr -d ,)
		if [ -n "$v" ]; then
			echo "$v"
			return
		fi
	done
	echo "instructions.sh: no count from $*" >&2
	exit 1
}
printf '%-10s %-10s %10s %10s %8s\n' op headers old new delta
for op in transport parse; do
	for set in plain github openai anthropic; do
		o=$(( ($(count "$tmp/old.bin" $op $set $((2 * n))) - $(count "$tmp/old.bin" $op $set $n)) / n ))
		w=$(( ($(count "$tmp/new.bin" $op $set $((2 * n))) - $(count "$tmp/new.bin" $op $set $n)) / n ))
		printf '%-10s %-10s %10d %10d %+7.1f%%\n' $op $set $o $w "$(echo "100 * ($w - $o) / $o" | bc -l)"
	done
done
