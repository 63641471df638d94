package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// The membership handshake (docs/wire.md, "Handshake"). Four messages:
//
//	dialer   -> listener  hello   (56 B): version, job, dialer rank, wanted rank, nonceD
//	listener -> dialer    reply   (88 B): version, job, listener rank, dialer rank, nonceL, macL
//	dialer   -> listener  finish  (40 B): macD
//	listener -> dialer    accept  ( 8 B)
//
// macL = HMAC-SHA256(secret, "hetcomm/1 listener" | fields | binding) and
// macD likewise with "hetcomm/1 dialer", over both nonces and both ranks,
// so neither a recorded handshake nor a reflected MAC verifies.

var hsMagic = [4]byte{'H', 'C', 'H', 'S'}

const (
	hsHello  = 1
	hsReply  = 2
	hsFinish = 3
	hsAccept = 4

	nonceSize   = 32
	macSize     = sha256.Size
	hsHelloLen  = 24 + nonceSize
	hsReplyLen  = 24 + nonceSize + macSize
	hsFinishLen = 8 + macSize
	hsAcceptLen = 8

	wireAnyRank = ^uint32(0)
)

// hsParams is what a side brings to the handshake.
type hsParams struct {
	job     uint64
	rank    int
	secret  []byte
	binding []byte // channel binding (TLS exporter), nil on plain streams
	// check, if set, vets the authenticated peer (certificate pinning)
	// before the handshake completes, so a refused peer never sees it
	// succeed.
	check func(peer int) error
}

func putHSPrefix(b []byte, kind byte) {
	copy(b, hsMagic[:])
	b[4] = Version
	b[5] = kind
	b[6], b[7] = 0, 0
}

// readHS reads one handshake message of n bytes and checks its prefix.
func readHS(r io.Reader, b []byte, kind byte) error {
	if _, err := io.ReadFull(r, b[:8]); err != nil {
		return err
	}
	if [4]byte(b[:4]) != hsMagic {
		return ErrMalformed
	}
	if b[4] != Version {
		return fmt.Errorf("%w: peer speaks version %d, we speak %d", ErrVersion, b[4], Version)
	}
	if b[5] != kind || b[6] != 0 || b[7] != 0 {
		return ErrMalformed
	}
	_, err := io.ReadFull(r, b[8:])
	return err
}

func hsMAC(secret []byte, label string, job uint64, dialer, listener uint32, nonceD, nonceL, binding []byte) []byte {
	m := hmac.New(sha256.New, secret)
	var b [8 + 4 + 4 + 1]byte
	b[0] = Version
	binary.BigEndian.PutUint64(b[1:], job)
	binary.BigEndian.PutUint32(b[9:], dialer)
	binary.BigEndian.PutUint32(b[13:], listener)
	m.Write([]byte(label))
	m.Write(b[:])
	m.Write(nonceD)
	m.Write(nonceL)
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(binding)))
	m.Write(l[:])
	m.Write(binding)
	return m.Sum(nil)
}

func wireRank(r int) uint32 {
	if r < 0 {
		return wireAnyRank
	}
	return uint32(r)
}

// rankOf converts a wire rank to an int, rejecting values that no Config
// can hold.
func rankOf(w uint32) (int, bool) {
	if w > uint32(^uint32(0)>>1) {
		return AnyRank, false
	}
	return int(w), true
}

// dialHandshake runs the dialer's side. want is the rank expected at the
// other end, or AnyRank. It returns the authenticated peer rank.
func dialHandshake(rw io.ReadWriter, p hsParams, want int) (int, error) {
	fail := func(job uint64, rank int, err error) (int, error) {
		return AnyRank, &AuthError{Role: "dialer", Job: job, Rank: rank, Err: err}
	}
	var hello [hsHelloLen]byte
	putHSPrefix(hello[:], hsHello)
	binary.BigEndian.PutUint64(hello[8:], p.job)
	binary.BigEndian.PutUint32(hello[16:], uint32(p.rank))
	binary.BigEndian.PutUint32(hello[20:], wireRank(want))
	nonceD := hello[24 : 24+nonceSize]
	if _, err := rand.Read(nonceD); err != nil {
		return fail(0, AnyRank, err)
	}
	if _, err := rw.Write(hello[:]); err != nil {
		return fail(0, AnyRank, err)
	}

	var reply [hsReplyLen]byte
	if err := readHS(rw, reply[:], hsReply); err != nil {
		return fail(0, AnyRank, err)
	}
	job := binary.BigEndian.Uint64(reply[8:])
	peer, ok := rankOf(binary.BigEndian.Uint32(reply[16:]))
	echo := binary.BigEndian.Uint32(reply[20:])
	nonceL := reply[24 : 24+nonceSize]
	macL := reply[24+nonceSize:]
	switch {
	case job != p.job:
		return fail(job, peer, ErrJobMismatch)
	case !ok:
		return fail(job, AnyRank, ErrMalformed)
	case want != AnyRank && peer != want:
		return fail(job, peer, fmt.Errorf("%w: dialed rank %d, reached rank %d", ErrRankMismatch, want, peer))
	case echo != uint32(p.rank):
		return fail(job, peer, ErrMalformed)
	}
	exp := hsMAC(p.secret, "hetcomm/1 listener", p.job, uint32(p.rank), uint32(peer), nonceD, nonceL, p.binding)
	if !hmac.Equal(exp, macL) {
		return fail(job, peer, ErrBadSecret)
	}
	if p.check != nil {
		if err := p.check(peer); err != nil {
			return fail(job, peer, err)
		}
	}

	var fin [hsFinishLen]byte
	putHSPrefix(fin[:], hsFinish)
	copy(fin[8:], hsMAC(p.secret, "hetcomm/1 dialer", p.job, uint32(p.rank), uint32(peer), nonceD, nonceL, p.binding))
	if _, err := rw.Write(fin[:]); err != nil {
		return fail(job, peer, err)
	}
	var acc [hsAcceptLen]byte
	if err := readHS(rw, acc[:], hsAccept); err != nil {
		return fail(job, peer, err)
	}
	return peer, nil
}

// listenHandshake runs the listener's side and returns the authenticated
// dialer's rank.
func listenHandshake(rw io.ReadWriter, p hsParams) (int, error) {
	fail := func(job uint64, rank int, err error) (int, error) {
		return AnyRank, &AuthError{Role: "listener", Job: job, Rank: rank, Err: err}
	}
	var hello [hsHelloLen]byte
	if err := readHS(rw, hello[:], hsHello); err != nil {
		return fail(0, AnyRank, err)
	}
	job := binary.BigEndian.Uint64(hello[8:])
	peer, ok := rankOf(binary.BigEndian.Uint32(hello[16:]))
	want := binary.BigEndian.Uint32(hello[20:])
	nonceD := hello[24 : 24+nonceSize]
	switch {
	case job != p.job:
		return fail(job, peer, ErrJobMismatch)
	case !ok:
		return fail(job, AnyRank, ErrMalformed)
	case want != wireAnyRank && want != uint32(p.rank):
		return fail(job, peer, fmt.Errorf("%w: dialer wants rank %d, this is rank %d", ErrRankMismatch, want, p.rank))
	}

	var reply [hsReplyLen]byte
	putHSPrefix(reply[:], hsReply)
	binary.BigEndian.PutUint64(reply[8:], p.job)
	binary.BigEndian.PutUint32(reply[16:], uint32(p.rank))
	binary.BigEndian.PutUint32(reply[20:], uint32(peer))
	nonceL := reply[24 : 24+nonceSize]
	if _, err := rand.Read(nonceL); err != nil {
		return fail(job, peer, err)
	}
	copy(reply[24+nonceSize:], hsMAC(p.secret, "hetcomm/1 listener", p.job, uint32(peer), uint32(p.rank), nonceD, nonceL, p.binding))
	if _, err := rw.Write(reply[:]); err != nil {
		return fail(job, peer, err)
	}

	var fin [hsFinishLen]byte
	if err := readHS(rw, fin[:], hsFinish); err != nil {
		return fail(job, peer, err)
	}
	exp := hsMAC(p.secret, "hetcomm/1 dialer", p.job, uint32(peer), uint32(p.rank), nonceD, nonceL, p.binding)
	if !hmac.Equal(exp, fin[8:]) {
		return fail(job, peer, ErrBadSecret)
	}
	if p.check != nil {
		if err := p.check(peer); err != nil {
			return fail(job, peer, err)
		}
	}
	var acc [hsAcceptLen]byte
	putHSPrefix(acc[:], hsAccept)
	if _, err := rw.Write(acc[:]); err != nil {
		return fail(job, peer, err)
	}
	return peer, nil
}
