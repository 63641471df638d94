#!/usr/bin/env bash
# Runs the transport benchmarks (go test -bench) and the Open MPI reference
# (run-openmpi.sh) alternately, ROUNDS times, so that both see the same
# machine load, then prints the median of each number.
# usage: bench/peer/transport-bench.sh [ROUNDS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
go test -c -o "$out/transport.test" "$root/transport"
# Each benchmark runs in a process of its own (benchmarks run earlier in a
# process were seen to disturb later ones), and each round starts the list
# at a different place, so no transport always runs first.
benches=()
for b in Bandwidth RoundTrip; do
	for t in tcp-baseline tcp-baseline-256k tcp tls quic udp mem; do
		[ "$b/$t" = RoundTrip/tcp-baseline-256k ] && continue
		benches+=("^Benchmark$b\$/^transport=$t\$/")
	done
done
for i in $(seq "$rounds"); do
	echo "== round $i, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
	n=${#benches[@]}
	for k in $(seq 0 $((n - 1))); do
		b=${benches[$(((k + i) % n))]}
		(cd "$root/transport" && "$out/transport.test" -test.run '^$' -test.bench "$b" -test.benchtime "${BENCHTIME:-2s}") |
			{ grep '^Benchmark' || echo "# no result for $b" >&2; } >>"$out/go.txt"
	done
	"$here/run-openmpi.sh" 1 >>"$out/ompi.txt"
done
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo "# medians of $rounds rounds (raw output in $out)"
echo "# benchmark                                   median"
for b in $(grep -o '^Benchmark[^ ]*' "$out/go.txt" | sed 's/-[0-9]*$//' | sort -u); do
	if grep -q "^$b-[0-9]* .*MB/s" "$out/go.txt"; then
		v=$(grep "^$b-[0-9]* " "$out/go.txt" | awk '{for (i = 2; i <= NF; i++) if ($i == "MB/s") print $(i-1)}' | median)
		c=$(grep "^$b-[0-9]* " "$out/go.txt" | awk '{for (i = 2; i <= NF; i++) if ($i == "cpu-s/GB") print $(i-1)}' | median)
		printf '%-60s %10.0f MB/s  %6.3f cpu-s/GB\n' "$b" "$v" "$c"
	else
		v=$(grep "^$b-[0-9]* " "$out/go.txt" | awk '{print $3/1000}' | median)
		printf '%-60s %10.1f us/op\n' "$b" "$v"
	fi
done
v=$(awk '/^8 /{print $3}' "$out/ompi.txt" | median)
printf '%-60s %10.1f us round trip\n' "OpenMPI/btl=tcp/bytes=8" "$v"
v=$(awk '/^4194304 /{print $2}' "$out/ompi.txt" | median)
printf '%-60s %10.0f MB/s\n' "OpenMPI/btl=tcp/bytes=4MiB" "$v"
