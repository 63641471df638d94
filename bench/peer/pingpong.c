/*
 * OSU-style latency and bandwidth between two MPI ranks, the reference the
 * transport benchmarks are read against (README.md, "Transport
 * performance"). Build and run it with run-openmpi.sh.
 *
 *   latency:   ping-pong of SIZE bytes; prints the round trip and, as the OSU
 *              latency test does, half of it.
 *   bandwidth: rank 0 posts WINDOW non-blocking sends of SIZE bytes, rank 1
 *              WINDOW receives, then rank 1 acknowledges; repeated.
 *
 * usage: pingpong [lat_bytes [bw_bytes]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAT_WARMUP 2000
#define LAT_ITERS 20000
#define BW_WARMUP 5
#define BW_ITERS 40
#define WINDOW 16

int main(int argc, char **argv) {
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0) fprintf(stderr, "pingpong: run with exactly 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	long lat_bytes = argc > 1 ? atol(argv[1]) : 8;
	long bw_bytes = argc > 2 ? atol(argv[2]) : 4L << 20;
	long maxb = lat_bytes > bw_bytes ? lat_bytes : bw_bytes;
	char *buf = malloc(maxb ? maxb : 1);
	char **wbuf = malloc(WINDOW * sizeof(char *));
	for (int i = 0; i < WINDOW; i++) {
		wbuf[i] = malloc(bw_bytes ? bw_bytes : 1);
		memset(wbuf[i], i, bw_bytes);
	}
	memset(buf, 1, maxb);
	MPI_Request req[WINDOW];
	char ack = 0;

	/* latency */
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = 0;
	for (int i = 0; i < LAT_WARMUP + LAT_ITERS; i++) {
		if (i == LAT_WARMUP) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (rank == 0) {
			MPI_Send(buf, lat_bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, lat_bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, lat_bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, lat_bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
		}
	}
	double rtt = (MPI_Wtime() - t0) / LAT_ITERS;
	if (rank == 0) {
		printf("# OSU-style latency, Open MPI\n# Size    Avg Latency(us)    Round trip(us)\n");
		printf("%-9ld %-18.2f %.2f\n", lat_bytes, rtt / 2 * 1e6, rtt * 1e6);
	}

	/* bandwidth */
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = 0; i < BW_WARMUP + BW_ITERS; i++) {
		if (i == BW_WARMUP) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (rank == 0) {
			for (int w = 0; w < WINDOW; w++)
				MPI_Isend(wbuf[w], bw_bytes, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			for (int w = 0; w < WINDOW; w++)
				MPI_Irecv(wbuf[w], bw_bytes, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
			MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
		}
	}
	double el = MPI_Wtime() - t0;
	if (rank == 0) {
		double mbs = (double)bw_bytes * WINDOW * BW_ITERS / el / 1e6;
		printf("# OSU-style bandwidth, Open MPI (window %d)\n# Size    Bandwidth(MB/s)\n", WINDOW);
		printf("%-9ld %.2f\n", bw_bytes, mbs);
	}
	for (int i = 0; i < WINDOW; i++) free(wbuf[i]);
	free(wbuf);
	free(buf);
	MPI_Finalize();
	return 0;
}
