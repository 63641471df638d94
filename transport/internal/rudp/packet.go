package rudp

import (
	"encoding/binary"
	"errors"
)

// Wire format, version 1. All integers are big-endian. Every datagram starts
// with this 36-byte header, followed by nsack SACK blocks of 8 bytes, then
// the payload (docs/rudp.md has the same table):
//
//	off size field
//	 0   1   version (1)
//	 1   1   type (SYN=1 SYNACK=2 DATA=3 ACK=4 RST=5; only ever appended)
//	 2   1   flags (DATA: FIN=0x01, ACKNOW=0x04; ACK: PING=0x02;
//	             SYN, SYNACK, RST: AUTH=0x08; all others zero)
//	 3   1   nsack: number of SACK blocks, at most 16
//	 4   8   destination connection id (0 only in SYN)
//	12   4   seq: DATA: packet sequence number (low 32 bits)
//	16   4   ack: cumulative ack, next sequence number expected (low 32 bits)
//	20   4   wnd: receive window, in packets beyond ack
//	24   4   tsval: sender's clock in microseconds
//	28   4   tsecr: echoed tsval plus the time it was held at the receiver
//	32   2   payload length (must equal the bytes after the SACK blocks)
//	34   2   reserved, zero
//	36  8*n  SACK blocks: start (4), end (4, exclusive), low 32 bits
//
// SYN and SYNACK carry a 12-byte payload: the sender's connection id (8),
// the largest datagram it accepts (SYN) or the negotiated size (SYNACK) (2),
// and 2 reserved zero bytes. RST carries none.
//
// With AUTH (Config.Key set, auth.go) the payload of SYN and SYNACK is
// followed by a 16-byte MAC of everything before it, and an RST carries the
// sender's connection id (8, 0 when it has none for this peer) and the MAC.
const (
	protoVersion   = 1
	headerLen      = 36
	sackBlockLen   = 8
	maxSACKBlocks  = 16
	dataSACKBlocks = 4 // SACK blocks piggybacked on DATA packets
	maxHeaderLen   = headerLen + maxSACKBlocks*sackBlockLen
	// dataOff is where a data packet's payload starts inside a segment
	// buffer: room for the header and up to dataSACKBlocks blocks.
	dataOff    = headerLen + dataSACKBlocks*sackBlockLen
	synPayload = 12
	// tagLen is the length of the MAC that ends an authenticated control
	// packet.
	tagLen = 16
	// rstAuthPayload is the payload of an authenticated RST: the sender's
	// id and the MAC.
	rstAuthPayload = 8 + tagLen
	// maxCtrlLen is the largest control packet (an authenticated SYN or
	// SYNACK).
	maxCtrlLen = headerLen + synPayload + tagLen
)

type pktType uint8

const (
	typeSYN    pktType = 1
	typeSYNACK pktType = 2
	typeDATA   pktType = 3
	typeACK    pktType = 4
	typeRST    pktType = 5
	typeMax            = typeRST
)

func (t pktType) String() string {
	switch t {
	case typeSYN:
		return "SYN"
	case typeSYNACK:
		return "SYNACK"
	case typeDATA:
		return "DATA"
	case typeACK:
		return "ACK"
	case typeRST:
		return "RST"
	}
	return "unknown"
}

const (
	flagFIN    uint8 = 0x01 // DATA: the last packet of the stream
	flagPING   uint8 = 0x02 // ACK: answer with an ACK at once
	flagACKNOW uint8 = 0x04 // DATA: the sender has nothing more in flight for now; ACK at once
	flagAUTH   uint8 = 0x08 // SYN, SYNACK, RST: the payload ends with a MAC (tagLen bytes)
)

type sackBlock struct{ start, end uint32 }

// header is a decoded packet header (a plain value: decoding allocates
// nothing).
type header struct {
	typ   pktType
	flags uint8
	nsack uint8
	dst   uint64
	seq   uint32
	ack   uint32
	wnd   uint32
	tsval uint32
	tsecr uint32
	plen  uint16
	sack  [maxSACKBlocks]sackBlock
}

// synInfo is the payload of SYN and SYNACK.
type synInfo struct {
	srcID     uint64
	maxPacket uint16
}

// Decode errors (counted by the receiver, never returned to users).
var (
	errShort     = errors.New("rudp: truncated packet")
	errVersion   = errors.New("rudp: unknown version")
	errType      = errors.New("rudp: unknown packet type")
	errFlags     = errors.New("rudp: bad flags")
	errSACKCount = errors.New("rudp: too many SACK blocks")
	errLength    = errors.New("rudp: payload length mismatch")
	errSACKRange = errors.New("rudp: bad SACK block")
	errReserved  = errors.New("rudp: reserved field not zero")
	errSYN       = errors.New("rudp: malformed handshake")
)

// encodedLen is the header length with n SACK blocks.
func encodedLen(nsack int) int { return headerLen + nsack*sackBlockLen }

// encode writes h (with h.nsack blocks) into b, which must hold
// encodedLen(h.nsack) bytes, and returns that length.
func (h *header) encode(b []byte) int {
	n := encodedLen(int(h.nsack))
	_ = b[n-1]
	b[0] = protoVersion
	b[1] = byte(h.typ)
	b[2] = h.flags
	b[3] = h.nsack
	binary.BigEndian.PutUint64(b[4:], h.dst)
	binary.BigEndian.PutUint32(b[12:], h.seq)
	binary.BigEndian.PutUint32(b[16:], h.ack)
	binary.BigEndian.PutUint32(b[20:], h.wnd)
	binary.BigEndian.PutUint32(b[24:], h.tsval)
	binary.BigEndian.PutUint32(b[28:], h.tsecr)
	binary.BigEndian.PutUint16(b[32:], h.plen)
	b[34], b[35] = 0, 0
	for i := range int(h.nsack) {
		o := headerLen + i*sackBlockLen
		binary.BigEndian.PutUint32(b[o:], h.sack[i].start)
		binary.BigEndian.PutUint32(b[o+4:], h.sack[i].end)
	}
	return n
}

// decodePacket parses and validates a datagram. It never panics and never
// allocates; the returned payload aliases b.
func decodePacket(b []byte, h *header) (payload []byte, err error) {
	if len(b) < headerLen {
		return nil, errShort
	}
	if b[0] != protoVersion {
		return nil, errVersion
	}
	h.typ = pktType(b[1])
	if h.typ == 0 || h.typ > typeMax {
		return nil, errType
	}
	h.flags = b[2]
	switch h.typ {
	case typeDATA:
		if h.flags&^(flagFIN|flagACKNOW) != 0 {
			return nil, errFlags
		}
	case typeACK:
		if h.flags&^flagPING != 0 {
			return nil, errFlags
		}
	default: // SYN, SYNACK, RST
		if h.flags&^flagAUTH != 0 {
			return nil, errFlags
		}
	}
	h.nsack = b[3]
	if h.nsack > maxSACKBlocks {
		return nil, errSACKCount
	}
	hl := encodedLen(int(h.nsack))
	if len(b) < hl {
		return nil, errShort
	}
	if b[34] != 0 || b[35] != 0 {
		return nil, errReserved
	}
	h.dst = binary.BigEndian.Uint64(b[4:])
	h.seq = binary.BigEndian.Uint32(b[12:])
	h.ack = binary.BigEndian.Uint32(b[16:])
	h.wnd = binary.BigEndian.Uint32(b[20:])
	h.tsval = binary.BigEndian.Uint32(b[24:])
	h.tsecr = binary.BigEndian.Uint32(b[28:])
	h.plen = binary.BigEndian.Uint16(b[32:])
	if int(h.plen) != len(b)-hl {
		return nil, errLength
	}
	for i := range int(h.nsack) {
		o := headerLen + i*sackBlockLen
		s := binary.BigEndian.Uint32(b[o:])
		e := binary.BigEndian.Uint32(b[o+4:])
		if d := e - s; d == 0 || d >= 1<<31 {
			return nil, errSACKRange
		}
		h.sack[i] = sackBlock{s, e}
	}
	payload = b[hl:]
	auth := h.flags&flagAUTH != 0
	switch h.typ {
	case typeSYN, typeSYNACK:
		want := synPayload
		if auth {
			want += tagLen
		}
		if h.nsack != 0 || len(payload) != want || (h.typ == typeSYN) != (h.dst == 0) {
			return nil, errSYN
		}
	case typeACK:
		if len(payload) != 0 {
			return nil, errLength
		}
	case typeRST:
		want := 0
		if auth {
			want = rstAuthPayload
		}
		if len(payload) != want {
			return nil, errLength
		}
	}
	if h.typ != typeSYN && h.dst == 0 {
		return nil, errSYN
	}
	return payload, nil
}

func encodeSYN(b []byte, s synInfo) {
	binary.BigEndian.PutUint64(b[0:], s.srcID)
	binary.BigEndian.PutUint16(b[8:], s.maxPacket)
	b[10], b[11] = 0, 0
}

// decodeSYN parses the payload of a SYN or SYNACK, with or without its MAC
// (which the reader has verified already).
func decodeSYN(p []byte) (synInfo, error) {
	if len(p) == synPayload+tagLen {
		p = p[:synPayload]
	}
	if len(p) != synPayload || p[10] != 0 || p[11] != 0 {
		return synInfo{}, errSYN
	}
	s := synInfo{srcID: binary.BigEndian.Uint64(p), maxPacket: binary.BigEndian.Uint16(p[8:])}
	if s.srcID == 0 || int(s.maxPacket) < MinPacketSize || int(s.maxPacket) > MaxPacketSizeLimit {
		return synInfo{}, errSYN
	}
	return s, nil
}

// buildSYN encodes a SYN or SYNACK (h.typ; h.plen and the AUTH flag are
// set here) carrying s into b, which holds at least maxCtrlLen bytes, and
// signs it when a is set. It returns the packet.
func buildSYN(b []byte, h header, s synInfo, a *authKey) []byte {
	h.plen = synPayload
	if a != nil {
		h.flags |= flagAUTH
		h.plen += tagLen
	}
	n := h.encode(b)
	encodeSYN(b[n:], s)
	n += int(h.plen)
	if a != nil {
		a.sign(b[:n])
	}
	return b[:n]
}

// buildRST encodes an RST naming dst into b (at least maxCtrlLen bytes)
// and returns it. Authenticated (a set), it also names the sender's own id
// src (0 when the sender has no connection with this peer: a reflected
// RST) and ends with the MAC.
func buildRST(b []byte, dst, src uint64, tsval uint32, a *authKey) []byte {
	h := header{typ: typeRST, dst: dst, tsval: tsval}
	if a == nil {
		return b[:h.encode(b)]
	}
	h.flags = flagAUTH
	h.plen = rstAuthPayload
	n := h.encode(b)
	binary.BigEndian.PutUint64(b[n:], src)
	n += rstAuthPayload
	a.sign(b[:n])
	return b[:n]
}

// rstSource returns the sender's id named by an authenticated RST; ok is
// false for an RST without one (no AUTH flag).
func rstSource(h *header, payload []byte) (src uint64, ok bool) {
	if h.flags&flagAUTH == 0 || len(payload) != rstAuthPayload {
		return 0, false
	}
	return binary.BigEndian.Uint64(payload), true
}

// unwrap extends a 32-bit sequence number to the 64-bit value nearest ref.
// ok is false when that value would be negative (older than the stream).
func unwrap(v uint32, ref uint64) (uint64, bool) {
	d := int64(int32(v - uint32(ref)))
	if d < 0 && uint64(-d) > ref {
		return 0, false
	}
	return uint64(int64(ref) + d), true
}
