/*
 * alltoallv.c: the live benchmark's patterns run with MPI, so that
 * hetbench live --peer mpi compares hetcomm with the system's MPI on the
 * same bytes.
 *
 * usage: mpirun -n N alltoallv PATTERN MAXBYTES SEED ITERS WARMUP
 *
 * PATTERN is an Alltoallv pattern of bench/live/patterns.go (uniform, random,
 * servers, sparse), whose sizes come from the same splitmix64 generator;
 * or one of the collectives of hetbench live without a pattern:
 *   "bcast": one MPI_Bcast of MAXBYTES bytes from rank 0;
 *   "allgather": one MPI_Allgather of MAXBYTES bytes per rank;
 *   "allreduce": one MPI_Allreduce (MPI_SUM) of MAXBYTES/8 doubles;
 *   "reducescatter": one MPI_Reduce_scatter_block (MPI_SUM) of MAXBYTES/8
 *       doubles, a block of MAXBYTES/8/N to each rank;
 * or @FILE, a pattern written by hetbench:
 *   "matrix N" and N rows of N byte counts: one MPI_Alltoallv (the
 *       cluster-to-cluster redistribution, zero outside sender->receiver);
 *   "multicast M" and M lines "SRC BYTES NDEST DEST...": one sub-
 *       communicator per message (its source and destinations, made once,
 *       untimed), and per iteration one MPI_Ibcast per message from its
 *       source, all started at once and then waited for.
 * The result of the last bcast, allgather, allreduce or reducescatter is
 * checked (the
 * run fails when it is wrong).
 * prints, on rank 0, one line per run:
 *   RESULT pattern=P bytes=B ranks=N median=S min=S max=S avg=S p99=S
 * (seconds; each iteration's time is the slowest rank's).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t x) {
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static long long size_of(const char *pattern, int n, int i, int j, long long max, uint64_t seed) {
	long long small = max < 1024 ? max : 1024;
	if (i == j) return 0;
	if (!strcmp(pattern, "uniform")) return max;
	if (!strcmp(pattern, "random"))
		return (long long)(splitmix64(seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 1000003ULL + (uint64_t)j) % (uint64_t)(max + 1));
	if (!strcmp(pattern, "servers")) return (i % 5 == 0 && j % 5 != 0) ? max : small;
	if (!strcmp(pattern, "sparse")) {
		int k = n / 4 < 1 ? 1 : n / 4;
		int d = (j - i + n) % n;
		return (d >= 1 && d <= k) ? max : 0;
	}
	return -1;
}

/* A multiple multicast read from a pattern file. */
struct mcast {
	int m;
	long long *bytes;
	MPI_Comm *comms; /* MPI_COMM_NULL where this rank takes no part */
	char **bufs;
	MPI_Request *reqs;
};

static void die(int me, const char *msg) {
	if (me == 0) fprintf(stderr, "alltoallv: %s\n", msg);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* read_file reads a pattern file: a matrix into *mat (n x n), or a
 * multicast into *mc. It returns 'm' or 'c'. */
static int read_file(const char *path, int me, int n, long long **mat, struct mcast *mc) {
	FILE *f = fopen(path, "r");
	char kind[16];
	int k;
	if (!f) die(me, "cannot open the pattern file");
	if (fscanf(f, "%15s %d", kind, &k) != 2) die(me, "malformed pattern file");
	if (!strcmp(kind, "matrix")) {
		if (k != n) die(me, "the matrix does not have one row per rank");
		*mat = malloc((size_t)n * n * sizeof(long long));
		for (int i = 0; i < n * n; i++)
			if (fscanf(f, "%lld", &(*mat)[i]) != 1 || (*mat)[i] < 0 || (*mat)[i] > 0x7fffffff) die(me, "malformed matrix");
		fclose(f);
		return 'm';
	}
	if (strcmp(kind, "multicast") || k < 0) die(me, "unknown pattern file kind");
	mc->m = k;
	mc->bytes = calloc(k + 1, sizeof(long long));
	mc->comms = calloc(k + 1, sizeof(MPI_Comm));
	mc->bufs = calloc(k + 1, sizeof(char *));
	mc->reqs = calloc(k + 1, sizeof(MPI_Request));
	char *member = malloc(n);
	for (int q = 0; q < k; q++) {
		int src, nd;
		if (fscanf(f, "%d %lld %d", &src, &mc->bytes[q], &nd) != 3 || src < 0 || src >= n || nd < 0 || nd > n ||
		    mc->bytes[q] < 0 || mc->bytes[q] > 0x7fffffff)
			die(me, "malformed multicast message");
		memset(member, 0, n);
		member[src] = 1;
		for (int d = 0; d < nd; d++) {
			int dst;
			if (fscanf(f, "%d", &dst) != 1 || dst < 0 || dst >= n) die(me, "malformed multicast destination");
			member[dst] = 1;
		}
		/* The source is rank 0 of the message's communicator. */
		MPI_Comm_split(MPI_COMM_WORLD, member[me] ? 0 : MPI_UNDEFINED, me == src ? -1 : me, &mc->comms[q]);
		mc->bufs[q] = malloc(mc->bytes[q] + 1);
		memset(mc->bufs[q], src, mc->bytes[q] + 1);
	}
	free(member);
	fclose(f);
	return 'c';
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int me, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (argc != 6) {
		if (me == 0) fprintf(stderr, "usage: alltoallv PATTERN MAXBYTES SEED ITERS WARMUP\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *pattern = argv[1];
	long long max = atoll(argv[2]);
	uint64_t seed = strtoull(argv[3], NULL, 10);
	int iters = atoi(argv[4]), warmup = atoi(argv[5]);
	int *scount = malloc(n * sizeof(int)), *sdispl = malloc(n * sizeof(int));
	int *rcount = malloc(n * sizeof(int)), *rdispl = malloc(n * sizeof(int));
	long long stot = 0, rtot = 0;
	long long *mat = NULL;
	struct mcast mc = {0};
	int kind = 'a';
	if (pattern[0] == '@') kind = read_file(pattern + 1, me, n, &mat, &mc);
	else if (!strcmp(pattern, "bcast")) kind = 'b';
	else if (!strcmp(pattern, "allgather")) kind = 'g';
	else if (!strcmp(pattern, "allreduce")) kind = 'r';
	else if (!strcmp(pattern, "reducescatter")) kind = 's';
	if ((kind == 'b' || kind == 'g' || kind == 'r' || kind == 's') && (max < 0 || max > 0x7fffffff)) die(me, "bad size");
	long long block = max / 8 / n; /* reducescatter: doubles per rank */
	for (int j = 0; j < n && (kind == 'a' || kind == 'm'); j++) {
		long long s = mat ? mat[me * n + j] : size_of(pattern, n, me, j, max, seed);
		long long r = mat ? mat[j * n + me] : size_of(pattern, n, j, me, max, seed);
		if (s < 0 || s > 0x7fffffff || r > 0x7fffffff) {
			if (me == 0) fprintf(stderr, "alltoallv: bad pattern or size\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		scount[j] = (int)s; sdispl[j] = (int)stot; stot += s;
		rcount[j] = (int)r; rdispl[j] = (int)rtot; rtot += r;
	}
	if (kind == 'b') stot = rtot = max; /* root's message, received in place */
	if (kind == 'g') stot = max, rtot = max * n;
	if (kind == 'r') stot = rtot = max / 8 * (long long)sizeof(double);
	if (kind == 's') stot = block * n * (long long)sizeof(double), rtot = block * (long long)sizeof(double);
	char *sbuf = malloc(stot + 1), *rbuf = malloc(rtot + 1);
	if (!sbuf || !rbuf) die(me, "out of memory");
	memset(sbuf, me, stot + 1);
	if (kind == 'r' || kind == 's')
		for (long long i = 0; i < stot / (long long)sizeof(double); i++) ((double *)sbuf)[i] = (double)(me + 1);
	double *t = malloc(iters * sizeof(double));
	for (int it = 0; it < warmup + iters; it++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		if (kind == 'c') {
			int nreq = 0;
			for (int q = 0; q < mc.m; q++)
				if (mc.comms[q] != MPI_COMM_NULL)
					MPI_Ibcast(mc.bufs[q], (int)mc.bytes[q], MPI_BYTE, 0, mc.comms[q], &mc.reqs[nreq++]);
			MPI_Waitall(nreq, mc.reqs, MPI_STATUSES_IGNORE);
		} else if (kind == 'b') {
			MPI_Bcast(sbuf, (int)max, MPI_BYTE, 0, MPI_COMM_WORLD);
		} else if (kind == 'g') {
			MPI_Allgather(sbuf, (int)max, MPI_BYTE, rbuf, (int)max, MPI_BYTE, MPI_COMM_WORLD);
		} else if (kind == 'r') {
			MPI_Allreduce(sbuf, rbuf, (int)(max / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		} else if (kind == 's') {
			MPI_Reduce_scatter_block(sbuf, rbuf, (int)block, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		} else {
			MPI_Alltoallv(sbuf, scount, sdispl, MPI_BYTE, rbuf, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD);
		}
		double dt = MPI_Wtime() - t0, slowest;
		MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (it >= warmup) t[it - warmup] = slowest;
	}
	/* The last run's result, so that a broken run reports no time: root's
	 * bytes (memset to 0), every rank's block of its rank, the sums. */
	int bad = 0;
	for (long long i = 0; kind == 'b' && i < max; i++) bad |= sbuf[i] != 0;
	for (long long i = 0; kind == 'g' && i < max * n; i++) bad |= rbuf[i] != (char)(i / max);
	for (long long i = 0; kind == 'r' && i < max / 8; i++) bad |= ((double *)rbuf)[i] != (double)n * (n + 1) / 2;
	for (long long i = 0; kind == 's' && i < block; i++) bad |= ((double *)rbuf)[i] != (double)n * (n + 1) / 2;
	int anybad;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (anybad) die(me, "wrong result");
	if (me == 0) {
		double sum = 0;
		for (int i = 0; i < iters; i++) sum += t[i];
		qsort(t, iters, sizeof(double), cmp);
		double med = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
		int p99 = (int)(0.99 * (iters - 1) + 0.5);
		printf("RESULT pattern=%s bytes=%lld ranks=%d median=%.9f min=%.9f max=%.9f avg=%.9f p99=%.9f\n",
		       pattern, max, n, med, t[0], t[iters - 1], sum / iters, t[p99]);
	}
	MPI_Finalize();
	return 0;
}
