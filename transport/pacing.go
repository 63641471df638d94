package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"time"
)

// ErrNoPacing reports a link that cannot pace what it sends (SetPacing).
var ErrNoPacing = errors.New("transport: this link cannot pace")

// Pacer is a Link that can pace what it sends.
type Pacer interface {
	// SetPacing limits what the link sends to rate bytes of payload per
	// second, from now on; 0 removes the limit. Only what is sent after
	// the call is paced.
	SetPacing(rate float64) error
}

// SetPacing paces l (see Pacer): TCP and TLS links on Linux pace in the
// kernel (SO_MAX_PACING_RATE, kernel-internal TCP pacing, no qdisc
// needed); reliable UDP, QUIC, mem links and TCP elsewhere pace in user
// space (a chunk of 16 KiB at a time on streams; mem, a message at a
// time); a RailSet splits the rate over its rails in proportion to their
// rates, and a shaped link paces the link under it. Links that cannot
// pace fail with an error that matches ErrNoPacing.
func SetPacing(l Link, rate float64) error {
	if !(rate >= 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("%w: pacing rate %v", ErrBadConfig, rate)
	}
	p, ok := l.(Pacer)
	if !ok {
		return fmt.Errorf("%w (%v links)", ErrNoPacing, l.Kind())
	}
	return p.SetPacing(rate)
}

// CanPace reports whether SetPacing works on l.
func CanPace(l Link) bool {
	switch p := l.(type) {
	case *RailSet:
		for _, r := range p.rails {
			if !CanPace(r.link) {
				return false
			}
		}
		return true
	case *shapedLink:
		return CanPace(p.Link)
	}
	_, ok := l.(Pacer)
	return ok
}

// segmentOverhead is what each TCP segment adds to its payload on the
// wire: Ethernet, IP and TCP headers with timestamps. The kernel paces
// the bytes it sends, headers included, so the rate set is the payload
// rate times (MSS + segmentOverhead) / MSS: 4.6% on a 1500-byte MTU,
// 0.1% on loopback.
const segmentOverhead = 66

// tcp returns the TCP connection under a stream link (TLS included), or
// nil (reliable UDP).
func (l *streamLink) tcp() *net.TCPConn {
	switch c := l.conn.(type) {
	case *net.TCPConn:
		return c
	case *tls.Conn:
		tc, _ := c.NetConn().(*net.TCPConn)
		return tc
	}
	return nil
}

// SetPacing implements Pacer for stream links: TCP and TLS on Linux in
// the kernel, the others (reliable UDP, TCP elsewhere) in user space.
func (l *streamLink) SetPacing(rate float64) error {
	if l.upace != nil {
		l.upace.setRate(rate)
		return nil
	}
	tc := l.tcp()
	wire := uint64(0) // no limit
	if rate > 0 {
		mss := maxSegment(tc)
		wire = uint64(math.Ceil(rate * float64(mss+segmentOverhead) / float64(mss)))
	}
	return setMaxPacingRate(tc, wire)
}

// PacingRate returns the rate SetPacing set in user space (0:
// unlimited, or paced by the kernel).
func (l *streamLink) PacingRate() float64 {
	if l.upace == nil {
		return 0
	}
	return l.upace.limit()
}

// SetPacing implements Pacer: each rail gets the share of rate its
// bandwidth gives it.
func (rs *RailSet) SetPacing(rate float64) error {
	stats := rs.Stats()
	total := 0.0
	for _, st := range stats {
		total += st.Cost.Bandwidth
	}
	for i, r := range rs.rails {
		share := 0.0
		if rate > 0 && total > 0 && i < len(stats) {
			share = rate * stats[i].Cost.Bandwidth / total
		}
		if err := SetPacing(r.link, share); err != nil {
			return err
		}
	}
	return nil
}

// SetPacing implements Pacer for the link under the shaping.
func (l *shapedLink) SetPacing(rate float64) error { return SetPacing(l.Link, rate) }

// SetUserTimeout bounds, on a TCP or TLS link, how long sent data may stay
// unacknowledged before the connection fails (Config.UserTimeout, set
// after the link was made). Other links are left alone; it reports
// whether l is one it applies to.
func SetUserTimeout(l Link, d time.Duration) bool {
	sl, ok := l.(*streamLink)
	if !ok {
		return false
	}
	tc := sl.tcp()
	if tc == nil {
		return false
	}
	setUserTimeout(tc, d)
	return true
}
