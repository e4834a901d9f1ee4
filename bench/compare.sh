#!/usr/bin/env bash
# compare.sh OLD [NEW] [REGEX]: benchmarks two revisions of the library on a
# shared machine fairly. It builds this bench module's test binary against
# each revision (git worktrees in a temporary directory), then runs the two
# binaries alternately, six rounds of -count=1, so that both see the same
# load, and prints benchstat's comparison. NEW defaults to the working tree.
#
#   bench/compare.sh 26fb669 HEAD 'TryAcquire|AcquireNoWait|Repository|Middleware'
set -euo pipefail
old=${1:?usage: compare.sh OLD [NEW] [REGEX]}
new=${2:-}
re=${3:-.}
rounds=${ROUNDS:-6}
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$top" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true;
      [ -d "$tmp/new" ] && git -C "$top" worktree remove --force "$tmp/new" >/dev/null 2>&1 || true;
      rm -rf "$tmp"' EXIT

build() { # build REV DIR OUT
	git -C "$top" worktree add -q --detach "$2" "$1"
	(cd "$2/bench" && go test -c -o "$3" .)
}
build "$old" "$tmp/old" "$tmp/old.test"
if [ -n "$new" ]; then
	build "$new" "$tmp/new" "$tmp/new.test"
	newdir=$tmp/new/bench
else
	(cd "$top/bench" && go test -c -o "$tmp/new.test" .)
	newdir=$top/bench
fi
for i in $(seq "$rounds"); do
	echo "round $i/$rounds" >&2
	(cd "$tmp/old/bench" && "$tmp/old.test" -test.run='^$' -test.bench="$re" -test.benchmem -test.count=1 -test.benchtime=200ms >>"$tmp/old.txt")
	(cd "$newdir" && "$tmp/new.test" -test.run='^$' -test.bench="$re" -test.benchmem -test.count=1 -test.benchtime=200ms >>"$tmp/new.txt")
done
go run golang.org/x/perf/cmd/benchstat@latest old="$tmp/old.txt" new="$tmp/new.txt"
