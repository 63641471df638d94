package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/comm"
)

func TestFillCheck(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 1000, 4099} {
		b := make([]byte, n)
		fill(b, 42)
		require.True(t, check(b, 42, n), "n=%d", n)
		require.False(t, check(b, 42, n+1), "a wrong length")
		if n > 0 {
			require.False(t, check(b, 43, n), "another seed, n=%d", n)
			b[n-1] ^= 1
			require.False(t, check(b, 42, n), "a flipped last byte, n=%d", n)
		}
	}
	for it := range 5 {
		for src := range 4 {
			for dst := range 4 {
				s := blockSize(1000, it, src, dst)
				require.True(t, s >= 500 && s <= 1000, "block %d", s)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	ev := classify(event{Ev: "error"}, fmt.Errorf("wrapped: %w", &comm.RankError{Op: "bcast", Rank: 2, Err: comm.ErrRankFailed}))
	require.True(t, ev.RankErr)
	require.Equal(t, 2, ev.Blame)
	require.True(t, ev.Failed)
	ev = classify(event{Ev: "error"}, comm.ErrConcurrent)
	require.False(t, ev.RankErr)
	require.Equal(t, -1, ev.Blame)
	require.True(t, ev.Concurrent)
	require.True(t, classify(event{}, fmt.Errorf("x: %w", comm.ErrMismatch)).Mismatch)
	require.False(t, classify(event{}, errors.New("other")).Mismatch)
}

func TestParseProcAddr(t *testing.T) {
	ap, ok := parseProcAddr("0100007F:1F90")
	require.True(t, ok)
	require.Equal(t, netip.MustParseAddrPort("127.0.0.1:8080"), ap)
	ap, ok = parseProcAddr("0000000000000000FFFF00000100007F:0035")
	require.True(t, ok)
	require.Equal(t, netip.MustParseAddrPort("127.0.0.1:53"), ap)
	_, ok = parseProcAddr("00000000:0035") // unspecified
	require.False(t, ok)
	_, ok = parseProcAddr("garbage")
	require.False(t, ok)
}

func TestRowAndTable(t *testing.T) {
	r := &Row{Scenario: "kill/bcast", Transport: "tcp", TimeName: "detection"}
	r.add(outcome{expected: true, time: 3 * time.Millisecond, hasTime: true}, 0)
	r.add(outcome{late: true, time: 7 * time.Second, hasTime: true, notes: []string{"slow"}}, 1)
	r.add(outcome{blame: true, time: 20 * time.Millisecond, hasTime: true, notes: []string{"rank 2 blamed"}}, 2)
	r.add(outcome{skipped: "no root"}, 3)
	require.Equal(t, 3, r.Trials)
	require.Equal(t, 1, r.Expected)
	require.Equal(t, 1, r.Late)
	require.Equal(t, 1, r.Blame)
	require.Equal(t, 20*time.Millisecond, r.median())
	require.Equal(t, 7*time.Second, r.max())
	require.Equal(t, []string{"trial 1: slow", "trial 2: rank 2 blamed"}, r.Notes)
	var b bytes.Buffer
	printTable(&b, []*Row{r, {Scenario: "loss", Transport: "udp", Skipped: "needs root"}}, &suite{trials: 3, limit: 6 * time.Second, hang: time.Minute}, 1, "1 1 1", "2 2 2", time.Minute, 1)
	out := b.String()
	require.Contains(t, out, "| kill/bcast")
	require.Contains(t, out, "20 ms")
	require.Contains(t, out, "7.0 s")
	require.Contains(t, out, "skipped: needs root")
	require.Contains(t, out, "- kill/bcast tcp trial 2: rank 2 blamed")
	require.Equal(t, "0.5 ms", fmtDur(500*time.Microsecond))
	require.Equal(t, "-", fmtDur(-1))
}

func TestCollected(t *testing.T) {
	c := &collected{}
	c.add(event{Ev: "ready", Rank: 0})
	c.add(event{Ev: "wrong", Rank: 1, Msg: "bad"})
	c.add(event{Ev: "error", Rank: 1, Err: "x"})
	c.add(event{Ev: "exit", Rank: 1, Code: 1})
	c.add(event{Ev: "exit", Rank: 2, Code: 2, Stderr: "a\npanic: boom"})
	require.Len(t, c.wrong, 1)
	require.Equal(t, "error", c.final[1].Ev, "the first final event counts")
	require.Equal(t, "rank 2 exited (status 2) without a report: panic: boom", c.final[2].describe())
}

func TestCommandUsage(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, Command([]string{"-scenarios", "nothing-like-this"}, &out, &errb))
	require.Contains(t, errb.String(), "no scenario selected")
	errb.Reset()
	require.Equal(t, 2, Command([]string{"extra"}, &out, &errb))
	names := map[string]bool{}
	for _, sc := range scenarios() {
		names[sc.name] = true
		_, ok := shortTransport[sc.name]
		require.True(t, ok, "%s has no transport for -short", sc.name)
		require.NotEmpty(t, sc.transports)
	}
	for name := range shortTransport {
		require.True(t, names[name], "shortTransport names %s, no scenario", name)
	}
	require.True(t, strings.HasPrefix("stop/send-sender", "stop/"))
}
