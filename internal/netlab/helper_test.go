package netlab

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The root tests run traffic inside the lab by re-executing this test
// binary in a host's namespace with NETLAB_HELPER set: a tiny TCP sender
// and receiver, and a UDP counter.
const helperEnv = "NETLAB_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helperMain(mode, os.Args[len(os.Args)-2:]); err != nil {
			fmt.Fprintln(os.Stderr, "netlab helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperMain runs one helper. args are its last two command-line
// arguments: ADDR and a number (duration or count).
func helperMain(mode string, args []string) error {
	addr := args[0]
	switch mode {
	case "tcprecv":
		// Receive one connection until EOF; report the rate of the steady
		// part: from warm-up after the first byte to the last byte.
		warm, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		c, err := l.Accept()
		if err != nil {
			return err
		}
		buf := make([]byte, 256<<10)
		var total, atWarm int64
		var first, warmAt, last time.Time
		for {
			n, err := c.Read(buf)
			if n > 0 {
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				total += int64(n)
				if warmAt.IsZero() && now.Sub(first) >= warm {
					warmAt, atWarm = now, total
				}
				last = now
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		if warmAt.IsZero() || !last.After(warmAt) {
			return fmt.Errorf("transfer too short to measure (%d bytes)", total)
		}
		fmt.Printf("mbit %.4f\n", float64(total-atWarm)*8/last.Sub(warmAt).Seconds()/1e6)
		return nil
	case "tcpsend":
		d, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		buf := make([]byte, 64<<10)
		for end := time.Now().Add(d); time.Now().Before(end); {
			if _, err := c.Write(buf); err != nil {
				return err
			}
		}
		return c.Close()
	case "udprecv":
		// Count distinct sequence numbers until the sender's end marker or
		// a quiet second.
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		bigReadBuffer(pc, 16<<20)
		fmt.Println("ready")
		seen := map[uint32]bool{}
		buf := make([]byte, 2048)
		for {
			pc.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			if n >= 4 {
				seq := binary.BigEndian.Uint32(buf)
				if seq == 0xffffffff {
					break // the sender's end marker
				}
				seen[seq] = true
			}
		}
		fmt.Printf("received %d\n", len(seen))
		return nil
	case "udpsend":
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		buf := make([]byte, 200)
		for i := range n {
			binary.BigEndian.PutUint32(buf, uint32(i))
			if _, err := c.Write(buf); err != nil {
				return err
			}
			time.Sleep(200 * time.Microsecond)
		}
		// End markers, several in case the link drops some.
		binary.BigEndian.PutUint32(buf, 0xffffffff)
		for range 8 {
			time.Sleep(10 * time.Millisecond)
			// The receiver stops at the first marker; later ones may be
			// refused (ICMP port unreachable).
			c.Write(buf)
		}
		return nil
	}
	return fmt.Errorf("unknown helper %q", mode)
}

// helper starts this test binary as a helper in host's namespace.
func startHelper(ctx context.Context, t *testing.T, l *Lab, host, mode string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{exe, "-test.run=^$"}, args...)
	cmd, err := l.Command(ctx, host, argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testWriter{t: t, prefix: host + " " + mode + ": "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(out)
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimSpace(string(p)))
	return len(p), nil
}

// readField reads the helper's output until a line starting with key and
// returns the rest of it.
func readField(r *bufio.Reader, key string) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), key); ok {
			return strings.TrimSpace(f), nil
		}
		if err != nil {
			return "", fmt.Errorf("helper ended without %q: %w", key, err)
		}
	}
}

// flow is one TCP transfer to measure.
type flow struct {
	from, to, toAddr string
}

// measureTCP runs the flows at the same time for d and returns each one's
// steady rate in Mbit/s.
func measureTCP(t *testing.T, l *Lab, d time.Duration, flows ...flow) ([]float64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	type running struct {
		recv, send *exec.Cmd
		out        *bufio.Reader
	}
	rs := make([]running, len(flows))
	for i, f := range flows {
		port := 15001 + i
		recv, out := startHelper(ctx, t, l, f.to, "tcprecv", net.JoinHostPort(f.toAddr, strconv.Itoa(port)), (d / 4).String())
		if _, err := readField(out, "ready"); err != nil {
			return nil, err
		}
		rs[i] = running{recv: recv, out: out}
	}
	for i, f := range flows {
		send, _ := startHelper(ctx, t, l, f.from, "tcpsend", net.JoinHostPort(f.toAddr, strconv.Itoa(15001+i)), d.String())
		rs[i].send = send
	}
	rates := make([]float64, len(flows))
	for i, r := range rs {
		if err := r.send.Wait(); err != nil {
			return nil, fmt.Errorf("sender %s: %w", flows[i].from, err)
		}
		v, err := readField(r.out, "mbit")
		if err != nil {
			return nil, err
		}
		if err := r.recv.Wait(); err != nil {
			return nil, fmt.Errorf("receiver %s: %w", flows[i].to, err)
		}
		if rates[i], err = strconv.ParseFloat(v, 64); err != nil {
			return nil, err
		}
	}
	return rates, nil
}
