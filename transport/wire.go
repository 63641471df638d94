package transport

import (
	"encoding/binary"
	"fmt"
)

// Version is the wire protocol version this package speaks. A peer or frame
// with another version is rejected with ErrVersion.
const Version = 1

// HeaderSize is the size in bytes of an encoded Header on the wire.
const HeaderSize = 48

// headerMagic opens every frame: the bytes 'h' 'c'.
const headerMagic = 0x6863

// MsgType says what a message is. Numbers are part of the wire format: they
// are only ever appended, never renumbered or reused. 0 is invalid.
type MsgType uint8

// Message types. See docs/wire.md.
const (
	// MsgEager carries user data sent eagerly (the payload is the data).
	MsgEager MsgType = 1
	// MsgRTS is a rendezvous request: the sender announces a large message
	// (msgpack payload chosen by the upper layer).
	MsgRTS MsgType = 2
	// MsgCTS is a rendezvous grant: the receiver is ready for the data.
	MsgCTS MsgType = 3
	// MsgRndvData carries the payload of a granted rendezvous.
	MsgRndvData MsgType = 4
	// MsgControl carries a msgpack-encoded control message.
	MsgControl MsgType = 5
	// MsgHeartbeat is a liveness probe; it normally has no payload.
	MsgHeartbeat MsgType = 6
	// MsgClose announces that the sender is about to close the link.
	MsgClose MsgType = 7
	// MsgRail is a rail-layer frame of a RailSet (a part announcement, an
	// acknowledgement, a skip or a goodbye); see docs/wire.md, "Rails".
	// Upper layers never see it: a RailSet consumes it.
	MsgRail MsgType = 8
	// MsgRailData carries the bytes of a part of a message sent over a
	// RailSet; its Flags, Comm, Tag and Seq say where the bytes go.
	MsgRailData MsgType = 9

	// maxKnownType is the highest type this version defines. Types above it
	// are still carried (a newer peer may append types), but upper layers
	// should ignore what they do not know.
	maxKnownType = MsgRailData
)

var msgTypeNames = [...]string{
	MsgEager:     "eager",
	MsgRTS:       "rts",
	MsgCTS:       "cts",
	MsgRndvData:  "rndv-data",
	MsgControl:   "control",
	MsgHeartbeat: "heartbeat",
	MsgClose:     "close",
	MsgRail:      "rail",
	MsgRailData:  "rail-data",
}

func (t MsgType) String() string {
	if t != 0 && int(t) < len(msgTypeNames) {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Channel is a logical channel of a link. Messages on one channel are
// delivered in the order they were sent. On transports with a single byte
// stream (TCP, TLS, UDP, mem) all channels share that stream, so all
// messages are delivered in order. On QUIC each channel is its own stream, so
// a bulk transfer never holds up control traffic.
type Channel uint8

const (
	// ChanControl carries everything except bulk data: eager data,
	// rendezvous requests and grants, control messages, heartbeats.
	ChanControl Channel = 0
	// ChanBulk carries rendezvous payloads.
	ChanBulk Channel = 1

	// NumChannels is the number of logical channels of a link: every
	// Channel value is below it.
	NumChannels = 2
	numChannels = NumChannels
)

// ChannelOf returns the channel a message type travels on. Eager data stays
// on the control channel so that it keeps its order relative to rendezvous
// requests (the MPI non-overtaking rule); only rendezvous payloads, which the
// receiver matches by the grant, take the bulk channel.
func ChannelOf(t MsgType) Channel {
	if t == MsgRndvData {
		return ChanBulk
	}
	return ChanControl
}

// Header is the fixed part of every message. On Send, the link fills in
// Version, Job, Src and Len; the caller sets Type, Flags, Comm, Tag and Seq.
type Header struct {
	Version uint8   // protocol version (Version)
	Type    MsgType // what the message is
	Flags   uint16  // free for the upper layer; not interpreted by transport
	Job     uint64  // job id: every rank of one job uses the same
	Src     uint32  // source rank (checked against the authenticated peer)
	Comm    uint32  // communicator id
	Tag     int32   // message tag
	Seq     uint64  // sequence number, chosen by the upper layer
	Len     uint64  // payload length in bytes
}

// PutHeader encodes h into b, which must be at least HeaderSize long. The
// layout is described in docs/wire.md: big-endian, 48 bytes.
func PutHeader(b []byte, h *Header) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint16(b[0:], headerMagic)
	b[2] = h.Version
	b[3] = byte(h.Type)
	binary.BigEndian.PutUint16(b[4:], h.Flags)
	binary.BigEndian.PutUint16(b[6:], 0)
	binary.BigEndian.PutUint64(b[8:], h.Job)
	binary.BigEndian.PutUint32(b[16:], h.Src)
	binary.BigEndian.PutUint32(b[20:], h.Comm)
	binary.BigEndian.PutUint32(b[24:], uint32(h.Tag))
	binary.BigEndian.PutUint32(b[28:], 0)
	binary.BigEndian.PutUint64(b[32:], h.Seq)
	binary.BigEndian.PutUint64(b[40:], h.Len)
}

// ParseHeader decodes and validates a header. It checks the magic, the
// version, the reserved fields, the type (0 is invalid) and that Len does
// not exceed maxLen; it never allocates. Errors are *FrameError.
// Checks that need the link's identity (job, source rank) are done by
// checkHeader.
func ParseHeader(b []byte, maxLen uint64) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, &FrameError{Field: "size", Value: uint64(len(b)), Limit: HeaderSize, Err: ErrMalformed}
	}
	if m := binary.BigEndian.Uint16(b[0:]); m != headerMagic {
		return h, &FrameError{Field: "magic", Value: uint64(m), Err: ErrMalformed}
	}
	h.Version = b[2]
	if h.Version != Version {
		return h, &FrameError{Field: "version", Value: uint64(h.Version), Limit: Version, Err: ErrVersion}
	}
	h.Type = MsgType(b[3])
	if h.Type == 0 {
		return h, &FrameError{Field: "type", Value: 0, Err: ErrMalformed}
	}
	h.Flags = binary.BigEndian.Uint16(b[4:])
	if r := binary.BigEndian.Uint16(b[6:]); r != 0 {
		return h, &FrameError{Field: "reserved0", Value: uint64(r), Err: ErrMalformed}
	}
	h.Job = binary.BigEndian.Uint64(b[8:])
	h.Src = binary.BigEndian.Uint32(b[16:])
	h.Comm = binary.BigEndian.Uint32(b[20:])
	h.Tag = int32(binary.BigEndian.Uint32(b[24:]))
	if r := binary.BigEndian.Uint32(b[28:]); r != 0 {
		return h, &FrameError{Field: "reserved1", Value: uint64(r), Err: ErrMalformed}
	}
	h.Seq = binary.BigEndian.Uint64(b[32:])
	h.Len = binary.BigEndian.Uint64(b[40:])
	if h.Len > maxLen {
		return h, &FrameError{Field: "length", Value: h.Len, Limit: maxLen, Err: ErrTooLarge}
	}
	return h, nil
}

// checkHeader verifies that a parsed header belongs to this link: the job id
// is ours and the source rank is the authenticated peer's.
func checkHeader(h *Header, job uint64, peer int) error {
	if h.Job != job {
		return &FrameError{Field: "job", Value: h.Job, Err: ErrJobMismatch}
	}
	if int64(h.Src) != int64(peer) {
		return &FrameError{Field: "src", Value: uint64(h.Src), Err: ErrRankMismatch}
	}
	return nil
}
