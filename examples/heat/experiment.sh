#!/usr/bin/env bash
# Reproduces the load-balancing table of examples/heat/README.md: 4 ranks,
# a 1200x1000 grid, 300 iterations, rank 3 twice as slow from iteration
# 100 on; every configuration RUNS times (default 5), medians reported.
# The runs are interleaved (round 1 of every configuration, then round
# 2, ...) so that a burst of load from other jobs on the machine hits
# several configurations a little rather than one a lot.
#
#   examples/heat/experiment.sh [RUNS]        # from the repository root
#
# Extra arguments for every run can be given in HEAT_ARGS; the raw
# heat-result lines are kept in the file named by HEAT_RAW, if set.
set -euo pipefail
runs=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/hetrun" ./cmd/hetrun
go build -o "$dir/heat" ./examples/heat

common="-rows 1200 -cols 1000 -iters 300 -tol 0 -verify off -rate 10e6 -probe-points 32768 ${HEAT_ARGS:-}"
slow="-slow 3:2:100"
configs=(
	"B0: balanced, no slowdown|-lb off -init speeds"
	"B1: balanced for the slowed platform|-lb off -init speeds -speeds 1,1,1,0.5"
	"static partition|-lb off -init speeds $slow"
	"SASR SAI|-lb sasr -policy sai $slow"
	"SASR SMI|-lb sasr -policy smi $slow"
	"SASR NINC|-lb sasr -policy ninc $slow"
	"SASR NINP|-lb sasr -policy ninp $slow"
	"AASR SAI|-lb aasr -policy sai $slow"
	"AASR SMI|-lb aasr -policy smi $slow"
	"AASR NINC|-lb aasr -policy ninc $slow"
	"AASR NINP|-lb aasr -policy ninp $slow"
	"SASR SAI, passive monitor|-lb sasr -policy sai -monitor passive $slow"
	"AASR SAI, passive monitor|-lb aasr -policy sai -monitor passive $slow"
)

# field NAME LINE: the value of NAME=... in a heat-result line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
for ((i = 0; i < runs; i++)); do
	for k in "${!configs[@]}"; do
		cfg=${configs[$k]}
		name=${cfg%%|*}
		args=${cfg#*|}
		# shellcheck disable=SC2086
		line=$("$dir/hetrun" -n 4 "$dir/heat" $common $args | sed -n 's/^\[0\] heat-result: //p')
		if [[ -z $line || $(field ok "$line") != true ]]; then
			echo "experiment: run of '$name' failed: $line" >&2
			exit 1
		fi
		echo "$line" >>"$dir/raw.$k"
		if [[ -n ${HEAT_RAW:-} ]]; then
			echo "round $((i + 1)) $name: $line" >>"$HEAT_RAW"
		fi
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

col() { while read -r l; do field "$1" "$l"; done <"$dir/raw.$2" | median; }
b0=$(col before 0)
b1=$(col before 1)
printf '| configuration | before (it/s) | after (it/s) | settled (it/s) | after/B0 | settled/B0 | after/B1 | settled/B1 | reconfigurations |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for k in "${!configs[@]}"; do
	name=${configs[$k]%%|*}
	b=$(col before "$k")
	a=$(col after "$k")
	s=$(col settled "$k")
	r=$(col reconfigs "$k")
	if [[ $a == nan || $a == NaN ]]; then
		printf '| %s | %.2f | | | | | | | |\n' "$name" "$b"
	else
		awk -v n="$name" -v b="$b" -v a="$a" -v s="$s" -v b0="$b0" -v b1="$b1" -v r="$r" \
			'BEGIN {printf "| %s | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f | %s |\n", n, b, a, s, a/b0, s/b0, a/b1, s/b1, r}'
	fi
done
echo
echo "medians of $runs interleaved runs; B0 = $b0 it/s, B1 = $b1 it/s; load average $load0 before, $load1 after; common flags: $common"
