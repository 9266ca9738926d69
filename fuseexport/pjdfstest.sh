#!/bin/sh
# pjdfstest on capfs FUSE mounts (issues 17 and 29), run by `make stress`.
#
# Builds pjdfstest from source (it is not packaged: $PJDFSTEST_SRC, else a
# shallow clone of github.com/pjd/pjdfstest) and runs every test file of every
# group it has (tests/*/) on each target, one target at a time, as root, in
# the mount's root:
#
#	physical  `capfs mount --allow-other` of a fresh host directory (the
#	          physical backend at the namespace's root, default policy)
#	memory    `capfs mount --allow-other` of a memory backend at the root
#	lazy      the copy-on-write layer `capfs run` serves by default
#	          (run.StartLazy over a physical Dir of a fresh host directory,
#	          with run's view policy), served by the test helper
#	          TestPjdfstestLazyServe
#
# It prints one line per target and group:
#
#	pjdfstest TARGET GROUP: N tests, F failed (E expected, U unexpected)
#
# Every failing test must be listed for its target in pjdfstest_expected.txt
# (targets, file, test numbers, reason); a failure not listed there makes the
# script exit 1 after printing it, with the line pjdfstest printed for it. A
# listed test that passes is reported (the list should shrink) but does not
# fail the run.
#
# It needs root (pjdfstest does, and chown's tests switch users), gcc, perl,
# openssl and FUSE; without them it says what is missing and exits 0.
#
# Environment: PJDFSTEST_SRC (a pjdfstest checkout), PJDFSTEST_TARGETS (the
# targets, space-separated; default "physical memory lazy"), PJDFSTEST_GROUPS
# (the groups, space-separated; default every one), PJDFSTEST_KEEP=1 (keep the
# work directory with the TAP logs of every test file, in logs/TARGET).
set -u
if [ "$(id -u)" != 0 ]; then echo "pjdfstest: skipped (needs root)"; exit 0; fi
for t in gcc perl openssl git; do
	command -v $t >/dev/null 2>&1 || { echo "pjdfstest: skipped ($t not installed)"; exit 0; }
done
if [ ! -e /dev/fuse ]; then echo "pjdfstest: skipped (no /dev/fuse)"; exit 0; fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
expected="$here/pjdfstest_expected.txt"
targets=${PJDFSTEST_TARGETS:-physical memory lazy}
for target in $targets; do
	case $target in
	physical | memory | lazy) ;;
	*) echo "pjdfstest: PJDFSTEST_TARGETS: unknown target $target (want physical, memory, lazy)"; exit 2 ;;
	esac
done
work=$(mktemp -d /tmp/capfs-pjdfstest-XXXXXX)
pid=
stop() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	fi
	pid=
}
cleanup() {
	cd /
	stop
	if [ "${PJDFSTEST_KEEP:-}" = 1 ]; then
		echo "pjdfstest: logs kept in $work/logs"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM
if [ -n "${PJDFSTEST_SRC:-}" ]; then
	cp -r "$PJDFSTEST_SRC" "$work/pjd"
elif ! git clone -q --depth 1 https://github.com/pjd/pjdfstest "$work/pjd" 2>/dev/null; then
	echo "pjdfstest: skipped (cannot clone github.com/pjd/pjdfstest; set PJDFSTEST_SRC to a checkout)"
	exit 0
fi
groups=${PJDFSTEST_GROUPS:-$(cd "$work/pjd/tests" && for g in */; do ls "$g"*.t >/dev/null 2>&1 && echo "${g%/}"; done)}
# Every TAP line names the call it checked, passing or not (the classification
# of failures in pjdfstest_expected.txt was made from these lines).
sed -i -e '/^expect()/,/^}/s/echo "ok ${ntest}"/echo "ok ${ntest} - tried '"'"'$*'"'"', expected ${e}"/' \
	-e '/^test_check()/,/^}/s/echo "\(not \)\{0,1\}ok ${ntest}"/echo "\1ok ${ntest} - $*"/' "$work/pjd/tests/misc.sh"
: > "$work/pjd/config.h"
gcc -O2 -D_GNU_SOURCE -DHAVE_FACCESSAT -DHAVE_FCHMODAT -DHAVE_FCHOWNAT -DHAVE_FSTATAT \
	-DHAVE_LINKAT -DHAVE_MKDIRAT -DHAVE_MKFIFOAT -DHAVE_MKNODAT -DHAVE_OPENAT \
	-DHAVE_POSIX_FALLOCATE -DHAVE_RENAMEAT -DHAVE_SYMLINKAT -DHAVE_UNLINKAT -DHAVE_UTIMENSAT \
	-DHAVE_STRUCT_STAT_ST_ATIM -DHAVE_STRUCT_STAT_ST_MTIM -DHAVE_STRUCT_STAT_ST_CTIM \
	-DHAVE_SYS_SYSMACROS_H -o "$work/pjd/pjdfstest" "$work/pjd/pjdfstest.c" || exit 1
(cd "$repo" && go build -o "$work/capfs" ./cmd/capfs) || exit 1
case " $targets " in
*" lazy "*) (cd "$repo" && go test -c -o "$work/lazyserve" ./fuseexport) || exit 1 ;;
esac
mkdir "$work/logs"
# pjdfstest switches to other users (65534, 65533...): they must reach the mount.
chmod 755 "$work"

# serve TARGET: serves a fresh tree for TARGET in the background ($pid) and
# sets $mnt to its mount point.
serve() {
	rm -rf "$work/root" "$work/mnt" "$work/lazy" "$work/ready"
	mkdir "$work/root" "$work/mnt" "$work/lazy"
	chmod 755 "$work/root" "$work/mnt" "$work/lazy"
	mnt=$work/mnt
	# Each backend is mounted at the namespace's root, so a path from the
	# mount point is the Dir's own path (exporting a subtree with --work would
	# lengthen every path by the subtree's, beyond PATH_MAX in the PATH_MAX
	# tests).
	case $1 in
	physical)
		"$work/capfs" -m "/=physical:$work/root" --audit "$work/audit-$1.jsonl" mount --allow-other "$mnt" 2>"$work/mount-$1.log" &
		;;
	memory)
		"$work/capfs" -m "/=memory:" --audit "$work/audit-$1.jsonl" mount --allow-other "$mnt" 2>"$work/mount-$1.log" &
		;;
	lazy)
		CAPFS_PJDFSTEST_LAZY=$work/root CAPFS_PJDFSTEST_LAZY_MOUNTDIR=$work/lazy CAPFS_PJDFSTEST_LAZY_READY=$work/ready \
			"$work/lazyserve" -test.run '^TestPjdfstestLazyServe$' -test.timeout 0 >"$work/mount-$1.log" 2>&1 &
		;;
	esac
	pid=$!
	i=0
	while :; do
		if [ "$1" = lazy ] && [ -s "$work/ready" ]; then mnt=$(cat "$work/ready"); fi
		grep -q " $mnt " /proc/mounts && break
		i=$((i + 1))
		if [ $i -gt 300 ]; then echo "pjdfstest: the $1 mount did not come up:"; cat "$work/mount-$1.log"; exit 1; fi
		sleep 0.1
	done
}

# expand "1-3,7" into one number a line.
expand() {
	echo "$1" | tr ',' '\n' | awk -F- 'NF == 1 && $1 != "" {print $1} NF == 2 {for (i = $1; i <= $2; i++) print i}'
}

# failures LOG: the numbers of the tests in the TAP log LOG that failed or never
# ran (a failure pjdfstest marks TODO for this system is not one, as for prove).
failures() {
	awk '
		/^1\.\.[0-9]+/ { split($0, a, "\\."); plan = a[3] + 0 }
		/^ok [0-9]+/ { ok[$2 + 0] = 1 }
		/^not ok [0-9]+ # TODO/ { ok[$3 + 0] = 1 }
		END { for (i = 1; i <= plan; i++) if (!(i in ok)) print i }
	' "$1"
}

# listed TARGET GROUP/FILE.t: the test numbers pjdfstest_expected.txt lists
# for it on TARGET (sorted as text, for comm).
listed() {
	grep -v '^#' "$expected" | awk -v t="$1" -v f="$2" '
		$2 == f { n = split($1, ts, ","); for (i = 1; i <= n; i++) if (ts[i] == t || ts[i] == "all") print $3 }
	' | while read -r r; do expand "$r"; done | sort -u
}

unexpected=0
for target in $targets; do
	serve "$target"
	mkdir "$work/logs/$target"
	for g in $groups; do
		tests=0 failed=0 exp=0 unexp=0
		for t in "$work/pjd/tests/$g"/*.t; do
			f="$g/$(basename "$t")"
			log="$work/logs/$target/$g-$(basename "$t" .t).tap"
			# In the mount's root, as pjdfstest is meant to run: its PATH_MAX
			# tests build paths of PATH_MAX-1 bytes from the working directory.
			(cd "$mnt" && timeout 600 sh "$t") >"$log" 2>&1
			n=$(sed -n 's/^1\.\.\([0-9]*\).*/\1/p' "$log" | head -1)
			tests=$((tests + ${n:-0}))
			failures "$log" | sort >"$work/failed"
			listed "$target" "$f" >"$work/listed"
			failed=$((failed + $(wc -l <"$work/failed")))
			for num in $(comm -12 "$work/failed" "$work/listed"); do exp=$((exp + 1)); done
			for num in $(comm -23 "$work/failed" "$work/listed"); do
				unexp=$((unexp + 1))
				line=$(grep -E "^not ok $num( |$)" "$log" | head -1)
				echo "pjdfstest: $target: unexpected failure $f $num: ${line:-did not run}" >&2
			done
			fixed=$(comm -13 "$work/failed" "$work/listed" | tr '\n' ' ')
			if [ -n "$fixed" ]; then
				echo "pjdfstest: $target: $f passes tests listed as expected failures: $fixed" >&2
			fi
		done
		unexpected=$((unexpected + unexp))
		echo "pjdfstest $target $g: $tests tests, $failed failed ($exp expected, $unexp unexpected)"
	done
	cd /
	stop
done
if [ $unexpected -gt 0 ]; then
	echo "pjdfstest: FAIL: $unexpected unexpected failures (see fuseexport/pjdfstest_expected.txt)"
	exit 1
fi
echo "pjdfstest: ok"
