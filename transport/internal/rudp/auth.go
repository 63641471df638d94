// Authentication of connection control (docs/rudp.md, "Authentication"):
// with Config.Key set, every packet that can open, reset or tear down a
// connection (SYN, SYNACK, RST) ends with a MAC, and a receiver drops such
// packets unless the MAC verifies. Data and acknowledgements carry none:
// they are accepted only from the connection's peer address and when they
// name the receiver's random 64-bit connection id.

package rudp

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
	"time"
)

// authLabel separates the key rudp derives from Config.Key from every
// other use of the same secret (the transport's handshake uses it as its
// HMAC key directly, with its own labels).
const authLabel = "hetcomm rudp v1"

// authKey signs and verifies control packets. A nil *authKey means no
// authentication: sign is never called, check accepts everything.
type authKey struct {
	macs sync.Pool // of hash.Hash: HMAC-SHA256 keyed with the derived key
}

// newAuthKey derives the control-packet key HMAC-SHA256(secret,
// "hetcomm rudp v1"); nil for an empty secret.
func newAuthKey(secret []byte) *authKey {
	if len(secret) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(authLabel))
	k := m.Sum(nil)
	a := &authKey{}
	a.macs.New = func() any { return hmac.New(sha256.New, k) }
	return a
}

// mac writes the truncated MAC of msg into out (tagLen bytes).
func (a *authKey) mac(out, msg []byte) {
	m := a.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(msg)
	var sum [sha256.Size]byte
	copy(out[:tagLen], m.Sum(sum[:0]))
	a.macs.Put(m)
}

// sign fills the last tagLen bytes of the control packet p with the MAC
// of the bytes before them.
func (a *authKey) sign(p []byte) {
	a.mac(p[len(p)-tagLen:], p[:len(p)-tagLen])
}

// verify reports whether the last tagLen bytes of p are the MAC of the
// bytes before them (in constant time).
func (a *authKey) verify(p []byte) bool {
	if len(p) < headerLen+tagLen {
		return false
	}
	var want [tagLen]byte
	a.mac(want[:], p[:len(p)-tagLen])
	return hmac.Equal(want[:], p[len(p)-tagLen:])
}

// check reports whether a decoded datagram pkt (header h) may go on to
// the demultiplexer: always without a key and for data and
// acknowledgements; a control packet (SYN, SYNACK, RST) only with the AUTH
// flag and a MAC that verifies. A datagram that fails it must change no
// state anywhere.
func (a *authKey) check(h *header, pkt []byte) bool {
	if a == nil {
		return true
	}
	switch h.typ {
	case typeSYN, typeSYNACK, typeRST:
		return h.flags&flagAUTH != 0 && a.verify(pkt)
	}
	return true
}

// RSTs sent in answer to packets for unknown connections (reflected RSTs)
// are limited per socket to a burst of rstBurst and rstRate per second:
// the packets that cause them cost nothing to forge, and the RST (60 bytes
// when authenticated) may be larger than its cause.
const (
	rstBurst = 32
	rstRate  = 200
)

// rstLimiter is a token bucket for reflected RSTs. It is used by one
// socket reader goroutine only, so it has no lock.
type rstLimiter struct {
	tokens float64
	last   time.Time
}

// allow takes a token if one is left.
func (r *rstLimiter) allow(now time.Time) bool {
	if r.last.IsZero() {
		r.tokens = rstBurst
	} else if d := now.Sub(r.last); d > 0 {
		r.tokens = min(rstBurst, r.tokens+d.Seconds()*rstRate)
	}
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}
