#!/usr/bin/env bash
# Runs every shmbus-bench measurement once, in one session, and prints the raw results that
# BENCHMARKS.md quotes. Usage: scripts/bench-all.sh > bench-run.txt
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p shmbus-bench
B=target/release/shmbus-bench
say() { printf '\n## %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }
echo "date: $(date -u +%FT%TZ)  kernel: $(uname -r)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 'model name' /proc/cpuinfo || true
say "ping-pong matrix" scripts/bench-table.py --bench "$B"
say "memcpy" "$B" throughput-memcpy --size 32768 --json
for k in 1 8 64; do say "fanout K=$k" "$B" fanout --subscribers "$k" --size 64 --iters 100000 --json; done
say "stream throughput 64 KiB" "$B" throughput --transport stream --size 65536 --capacity 8388608 --bytes 2147483648 --json
for jw in "2 3" "3 3" "5 3" "6 6"; do set -- $jw; say "pool $1/$2" "$B" pool --jobs "$1" --workers "$2" --rounds 1000 --mode block; done
say "queue table" "$B" queue-table
say "journal (seed 002 sizes), mode none" "$B" journal --mode none --json
say "journal 40 B, tailer after (the append rate)" "$B" journal --size 40 --mode none --tailer after --json
say "journal 40 B, 2 appenders" "$B" journal --size 40 --mode none --appenders 2 --json
say "journal 40 B, mode flush" "$B" journal --size 40 --mode flush --json
# The same on a tmpfs with 2 MiB pages (docs/journal.md, "Storage and huge pages"), if this
# user may mount one; otherwise say so and go on.
HUGE=$(mktemp -d)
if mount -t tmpfs -o huge=within_size,size=12g shmbus-bench-huge "$HUGE" 2>/dev/null; then
    trap 'umount "$HUGE"; rmdir "$HUGE"' EXIT
    say "journal (seed 002 sizes), mode none, tmpfs huge=within_size" "$B" journal --mode none --dir "$HUGE" --json
    say "journal 40 B, tmpfs huge, tailer after" "$B" journal --size 40 --mode none --dir "$HUGE" --tailer after --json
    say "journal 40 B, tmpfs huge, 2 appenders" "$B" journal --size 40 --mode none --dir "$HUGE" --appenders 2 --json
else
    rmdir "$HUGE"
    printf '\n## journal on a huge-page tmpfs: skipped (cannot mount a tmpfs as this user)\n'
fi
echo; echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
