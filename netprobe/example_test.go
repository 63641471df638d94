package netprobe_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/netprobe"
)

// A probe's sweep on a link of 1 ms and 10 MB/s: three repetitions of
// each size, some slowed down by noise (a retransmission, a scheduling
// delay). FitLine keeps the fastest repetition of each size and fits
// T + m/B through them.
func ExampleFitLine() {
	const latency, rate = 1e-3, 10e6
	var samples []netprobe.Sample
	for _, m := range []int64{8, 1 << 10, 16 << 10, 256 << 10, 1 << 20} {
		t := latency + float64(m)/rate
		samples = append(samples,
			netprobe.Sample{Bytes: m, Seconds: t * 1.5},
			netprobe.Sample{Bytes: m, Seconds: t},
			netprobe.Sample{Bytes: m, Seconds: t + 0.2})
	}
	f, err := netprobe.FitLine(samples)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("T = %.3f ms, B = %.3f MB/s\n", f.Latency*1e3, f.Bandwidth/1e6)
	// Output:
	// T = 1.000 ms, B = 10.000 MB/s
}

// The probe's rounds for 5 ranks: every pair once, no rank twice in a
// round (one rests), and A measures its direction before B.
func ExampleSchedule() {
	for r, round := range netprobe.Schedule(5) {
		fmt.Println("round", r, round)
	}
	// Output:
	// round 0 [{1 4} {2 3}]
	// round 1 [{0 2} {3 4}]
	// round 2 [{1 3} {4 0}]
	// round 3 [{2 4} {0 1}]
	// round 4 [{0 3} {2 1}]
}

// A link the model believes runs at 100 MB/s delivers 40 MB/s for a
// while: after three observations in a row, Drift proposes a new rate.
func ExampleDrift() {
	d := netprobe.NewDrift()
	const model = 100e6
	for k, seconds := range []float64{0.025, 0.026, 0.024} { // 1 MB each from rank 3
		d.Observe(3, 1e6, seconds, model)
		fmt.Printf("after %d: %v\n", k+1, d.Proposals())
	}
	// Output:
	// after 1: map[]
	// after 2: map[]
	// after 3: map[3:4e+07]
}

// The cache keeps a directory for the network it was measured on (its
// Key); another network finds no cached model, and probes.
func ExampleLoadCache() {
	dir, err := os.MkdirTemp("", "netprobe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	key := netprobe.Key{Transport: "tcp", Hosts: []string{"a", "b"}, Rails: [][]string{{"10.0.0.1"}, {"10.0.0.2"}}}
	res := &netprobe.Result{Model: collective.NewUniformModel(2, 50e-6, 1e9), Offsets: []float64{0, 0}}
	if err := netprobe.SaveCache(dir, key, res); err != nil {
		log.Fatal(err)
	}
	got, err := netprobe.LoadCache(dir, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cached:", got.Model.Latency[0][1], got.Model.Bandwidth[1][0])
	other := key
	other.Hosts = []string{"a", "c"}
	_, err = netprobe.LoadCache(dir, other)
	fmt.Println("other network, missing:", errors.Is(err, netprobe.ErrCacheMissing))
	// Output:
	// cached: 5e-05 1e+09
	// other network, missing: true
}
