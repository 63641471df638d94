#!/bin/sh
# Alltoallv of 4 ranks on loopback, 64 KiB and 1 MiB per pair, hetcomm on
# each transport against Open MPI's MPI_Alltoallv over its TCP transport
# (README.md, "Alltoallv against Open MPI on loopback").
#
# usage: bench/peer/alltoallv-vs-mpi.sh [ROUNDS] [TRANSPORTS]
#
# Every round runs `hetbench live -peer mpi` once per transport, which runs
# hetcomm and then Open MPI on the same pattern, so the two alternate
# through the machine's load. Prints, per transport and size, the medians
# over the rounds of hetcomm's median, Open MPI's median and their ratio.
# Needs openmpi-bin and libopenmpi-dev.
set -eu
rounds=${1:-5}
transports=${2:-"tcp udp quic tls"}
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/hetbench" ./bench/cmd/hetbench
for r in $(seq "$rounds"); do
	for t in $transports; do
		"$bin/hetbench" live -n 4 -transport "$t" -bytes 65536,1048576 -algo auto -iters 100 -peer mpi |
			awk -v t="$t" '/hetcomm P50/ { f = 1; next } f && NF == 5 { print t, $1, $3, $4, $5 }'
	done
done >"$bin/runs"

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '# %-9s %-9s %16s %16s %12s   (medians of %s rounds)\n' transport bytes "hetcomm P50(us)" "OpenMPI P50(us)" hetcomm/MPI "$rounds"
for t in $transports; do
	for b in 65536 1048576; do
		h=$(awk -v t="$t" -v b="$b" '$1 == t && $2 == b { print $3 }' "$bin/runs" | median)
		m=$(awk -v t="$t" -v b="$b" '$1 == t && $2 == b { print $4 }' "$bin/runs" | median)
		q=$(awk -v t="$t" -v b="$b" '$1 == t && $2 == b { print $5 }' "$bin/runs" | median)
		printf '  %-9s %-9s %16s %16s %12s\n' "$t" "$b" "$h" "$m" "$q"
	done
done
