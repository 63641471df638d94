#!/usr/bin/env bash
# Builds pingpong.c with mpicc into a temporary directory and runs it over
# Open MPI's TCP transport on loopback (two ranks, one machine), RUNS times.
# Needs Debian's openmpi-bin and libopenmpi-dev:
#   apt-get install -y openmpi-bin libopenmpi-dev
# usage: bench/peer/run-openmpi.sh [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/pingpong" "$here/pingpong.c"
for i in $(seq "$runs"); do
	echo "## run $i"
	mpirun --allow-run-as-root --oversubscribe -n 2 --bind-to none \
		--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
		--mca oob_tcp_if_include lo \
		"$tmp/pingpong" 8 4194304 </dev/null
done
