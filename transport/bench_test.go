package transport

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports the process's CPU time (user + system, both ends of the
// link included) per GB moved: on loopback, where throughput is bound by
// CPU, this is the cost that does not depend on how loaded the machine is.
type cpuMeter struct{ start time.Duration }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuMeter { return cpuMeter{cpuTime()} }

func (m cpuMeter) report(b *testing.B, iters int, bytes int) {
	if iters == 0 {
		return
	}
	used := cpuTime() - m.start
	b.ReportMetric(used.Seconds()/(float64(iters)*float64(bytes)/1e9), "cpu-s/GB")
}

// Benchmarks on loopback: bandwidth at 4 MiB (one direction, streaming, the
// receiver reusing its buffer through Config.Alloc, as an OSU bandwidth test
// does) and the round trip of an 8-byte message, for every transport and
// for a plain net.Conn TCP baseline. See README.md, "Transport performance".
//
//	go test -run '^$' -bench . -count 5 ./transport/

const benchBig = 4 << 20

func benchTransports() []netFactory {
	var out []netFactory
	for _, f := range transports() {
		if f.name == "mem-shaped" || f.name == "tcp-shaped" {
			continue
		}
		out = append(out, f)
	}
	return out
}

func BenchmarkBandwidth(b *testing.B) {
	b.Run("transport=tcp-baseline/bytes=4MiB", func(b *testing.B) { benchRawBandwidth(b, 0) })
	// The baseline with the socket buffers the tcp link uses on loopback,
	// the best a plain net.Conn does here.
	b.Run("transport=tcp-baseline-256k/bytes=4MiB", func(b *testing.B) { benchRawBandwidth(b, LoopbackSocketBuffer) })
	for _, f := range benchTransports() {
		b.Run("transport="+f.name+"/bytes=4MiB", func(b *testing.B) { benchBandwidth(b, f) })
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	b.Run("transport=tcp-baseline/bytes=8", benchRawRoundTrip)
	for _, f := range benchTransports() {
		b.Run("transport="+f.name+"/bytes=8", func(b *testing.B) { benchRoundTrip(b, f) })
	}
}

func benchBandwidth(b *testing.B, f netFactory) {
	rbuf := make([]byte, benchBig)
	cb := testConfig(1)
	cb.Alloc = func(Header) []byte { return rbuf }
	benchBandwidthCfg(b, f, testConfig(0), cb)
}

func benchBandwidthCfg(b *testing.B, f netFactory, ca, cb Config) {
	a, r := pair(b, f, ca, cb)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := r.Recv(ctx); err != nil {
				return
			}
		}
	}()
	payload := make([]byte, benchBig)
	b.SetBytes(benchBig)
	var cpu cpuMeter
	n := 0
	for b.Loop() {
		if n == 0 {
			cpu = startCPU()
		}
		n++
		if err := a.Send(ctx, Header{Type: MsgRndvData}, payload); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b, n, benchBig)
	_ = a.Close()
	<-done
}

func benchRoundTrip(b *testing.B, f netFactory) {
	a, r := pair(b, f, testConfig(0), testConfig(1))
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := r.Recv(ctx)
			if err != nil {
				return
			}
			if err := r.Send(ctx, m.Header, m.Payload); err != nil {
				return
			}
		}
	}()
	msg := make([]byte, 8)
	for b.Loop() {
		if err := a.Send(ctx, Header{Type: MsgEager}, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := a.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	_ = a.Close()
	<-done
}

// rawPair returns two connected plain TCP connections on loopback.
func rawPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s := <-ch
	if s == nil {
		b.Fatal("accept failed")
	}
	b.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return c, s
}

// benchRawBandwidth is the physical limit: plain net.Conn writes of 4 MiB
// on loopback, read with io.ReadFull into a reused buffer, with the
// kernel's socket buffers or, if sockbuf > 0, buffers of that size.
func benchRawBandwidth(b *testing.B, sockbuf int) {
	c, s := rawPair(b)
	if sockbuf > 0 {
		for _, conn := range []net.Conn{c, s} {
			_ = conn.(*net.TCPConn).SetReadBuffer(sockbuf)
			_ = conn.(*net.TCPConn).SetWriteBuffer(sockbuf)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, benchBig)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
		}
	}()
	payload := make([]byte, benchBig)
	b.SetBytes(benchBig)
	var cpu cpuMeter
	n := 0
	for b.Loop() {
		if n == 0 {
			cpu = startCPU()
		}
		n++
		if _, err := c.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b, n, benchBig)
	_ = c.Close()
	<-done
}

func benchRawRoundTrip(b *testing.B) {
	c, s := rawPair(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 8)
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	_ = c.Close()
	<-done
}
