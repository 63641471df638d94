package transport

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// The rail sub-protocol (docs/wire.md, "Rails"). A RailSet sends, on each
// of its links, frames of two types:
//
//   - MsgRail: a 80-byte rail header (railHead) as payload, optionally
//     followed by a part's bytes (inline parts, up to railInlineMax). It
//     announces a part of a message, cancels a sequence number (skip),
//     acknowledges (ack) or says goodbye (bye).
//   - MsgRailData: the bytes of a part announced by the previous MsgRail
//     frame for that (sequence, offset) on the same link. Its outer header
//     says where the bytes go, so that the receiver's Alloc hook can place
//     them straight in the reassembly buffer: Flags = rail index, Seq =
//     message sequence, Comm:Tag = offset (high:low 32 bits).
//
// The upper layer's header (type, flags, comm, tag, seq) travels in the
// rail header; the outer header's fields belong to the rail layer.

// railHeadSize is the size of an encoded rail header.
const railHeadSize = 80

// railInlineMax is the largest part sent inline, in its MsgRail frame.
const railInlineMax = 16 << 10

// railKind says what a MsgRail frame does.
type railKind uint8

const (
	railKindPart railKind = 1 // announces a part (inline or followed by MsgRailData)
	railKindSkip railKind = 2 // a sequence number that carries no message (a cancelled Send)
	railKindAck  railKind = 3 // acknowledgement only
	railKindBye  railKind = 4 // the sender is closing the rail set
)

// Rail header flags.
const (
	railFlagInline = 1 << 0 // the part's bytes follow the header in this frame
	railFlagAckReq = 1 << 1 // acknowledge as soon as the message is complete
	railFlagsKnown = railFlagInline | railFlagAckReq
)

// ErrRailChecksum reports a rail part or header whose CRC-32C does not
// match: the rail delivered corrupted bytes and is dropped.
var ErrRailChecksum = errors.New("transport: rail checksum mismatch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// railHead is the decoded rail header.
type railHead struct {
	Kind  railKind
	Flags uint8
	Rail  uint16 // the rail (link index) the frame was sent on
	CRC   uint32 // CRC-32C of the part's bytes
	Seq   uint64 // message sequence number (per RailSet and direction)
	Ack   uint64 // every reverse-direction message below this is complete
	Off   uint64 // the part's offset in the message
	Len   uint64 // the part's length
	Total uint64 // the message's length

	// The upper layer's header fields.
	Type   MsgType
	UFlags uint16
	Comm   uint32
	Tag    int32
	Parts  uint32 // number of parts of the message
	USeq   uint64
	// Gen counts the part's moves: 0 on its first rail, one more each
	// time the sender re-sends it on another rail after its rail failed.
	// A receiver that has a later copy knows an earlier one for stale.
	Gen uint32
}

// putRailHead encodes h into b (at least railHeadSize bytes) with its
// header checksum.
func putRailHead(b []byte, h *railHead) {
	_ = b[railHeadSize-1]
	b[0] = byte(h.Kind)
	b[1] = h.Flags
	binary.BigEndian.PutUint16(b[2:], h.Rail)
	binary.BigEndian.PutUint32(b[4:], h.CRC)
	binary.BigEndian.PutUint64(b[8:], h.Seq)
	binary.BigEndian.PutUint64(b[16:], h.Ack)
	binary.BigEndian.PutUint64(b[24:], h.Off)
	binary.BigEndian.PutUint64(b[32:], h.Len)
	binary.BigEndian.PutUint64(b[40:], h.Total)
	b[48] = byte(h.Type)
	b[49] = 0
	binary.BigEndian.PutUint16(b[50:], h.UFlags)
	binary.BigEndian.PutUint32(b[52:], h.Comm)
	binary.BigEndian.PutUint32(b[56:], uint32(h.Tag))
	binary.BigEndian.PutUint32(b[60:], h.Parts)
	binary.BigEndian.PutUint64(b[64:], h.USeq)
	binary.BigEndian.PutUint32(b[72:], h.Gen)
	binary.BigEndian.PutUint32(b[76:], crc32c(b[:76]))
}

func railFrameErr(field string, v, limit uint64, err error) error {
	return &FrameError{Field: "rail " + field, Value: v, Limit: limit, Err: err}
}

// decodeRailFrame decodes the payload of a MsgRail frame: the rail header
// and, for an inline part, its bytes (aliasing payload). It checks the
// header checksum, the kind and flags, the reserved byte, and that the
// part fits its message (offset + length <= total <= maxMsg, at most
// MaxRails parts, no empty part in a non-empty message). It never
// allocates. Errors are *FrameError wrapping ErrMalformed, ErrTooLarge or
// ErrRailChecksum.
func decodeRailFrame(payload []byte, maxMsg uint64) (railHead, []byte, error) {
	var h railHead
	if len(payload) < railHeadSize {
		return h, nil, railFrameErr("header size", uint64(len(payload)), railHeadSize, ErrMalformed)
	}
	b := payload[:railHeadSize]
	if sum := binary.BigEndian.Uint32(b[76:]); sum != crc32c(b[:76]) {
		return h, nil, railFrameErr("header checksum", uint64(sum), 0, ErrRailChecksum)
	}
	h.Kind = railKind(b[0])
	h.Flags = b[1]
	h.Rail = binary.BigEndian.Uint16(b[2:])
	h.CRC = binary.BigEndian.Uint32(b[4:])
	h.Seq = binary.BigEndian.Uint64(b[8:])
	h.Ack = binary.BigEndian.Uint64(b[16:])
	h.Off = binary.BigEndian.Uint64(b[24:])
	h.Len = binary.BigEndian.Uint64(b[32:])
	h.Total = binary.BigEndian.Uint64(b[40:])
	h.Type = MsgType(b[48])
	h.UFlags = binary.BigEndian.Uint16(b[50:])
	h.Comm = binary.BigEndian.Uint32(b[52:])
	h.Tag = int32(binary.BigEndian.Uint32(b[56:]))
	h.Parts = binary.BigEndian.Uint32(b[60:])
	h.USeq = binary.BigEndian.Uint64(b[64:])
	h.Gen = binary.BigEndian.Uint32(b[72:])
	switch {
	case b[49] != 0:
		return h, nil, railFrameErr("reserved0", uint64(b[49]), 0, ErrMalformed)
	case h.Flags&^railFlagsKnown != 0:
		return h, nil, railFrameErr("flags", uint64(h.Flags), 0, ErrMalformed)
	case h.Rail >= MaxRails:
		return h, nil, railFrameErr("rail", uint64(h.Rail), MaxRails-1, ErrMalformed)
	}
	rest := payload[railHeadSize:]
	inline := h.Flags&railFlagInline != 0
	switch h.Kind {
	case railKindPart:
		switch {
		case h.Type == 0:
			return h, nil, railFrameErr("type", 0, 0, ErrMalformed)
		case h.Total > maxMsg:
			return h, nil, railFrameErr("total", h.Total, maxMsg, ErrTooLarge)
		case h.Len > h.Total || h.Off > h.Total-h.Len:
			return h, nil, railFrameErr("offset", h.Off, h.Total-min(h.Len, h.Total), ErrMalformed)
		case h.Parts == 0 || h.Parts > MaxRails:
			return h, nil, railFrameErr("parts", uint64(h.Parts), MaxRails, ErrMalformed)
		case h.Total == 0 && h.Parts != 1:
			return h, nil, railFrameErr("parts", uint64(h.Parts), 1, ErrMalformed)
		case h.Total > 0 && h.Len == 0:
			return h, nil, railFrameErr("length", 0, 0, ErrMalformed)
		case h.Total > 0 && uint64(h.Parts) > h.Total:
			return h, nil, railFrameErr("parts", uint64(h.Parts), h.Total, ErrMalformed)
		case inline && h.Len > railInlineMax:
			return h, nil, railFrameErr("inline length", h.Len, railInlineMax, ErrMalformed)
		case inline && uint64(len(rest)) != h.Len:
			return h, nil, railFrameErr("inline bytes", uint64(len(rest)), h.Len, ErrMalformed)
		case !inline && len(rest) != 0:
			return h, nil, railFrameErr("trailing bytes", uint64(len(rest)), 0, ErrMalformed)
		case !inline && h.Len == 0:
			return h, nil, railFrameErr("length", 0, 0, ErrMalformed) // an empty part is always inline
		}
		if inline {
			if sum := crc32c(rest); sum != h.CRC {
				return h, nil, railFrameErr("part checksum", uint64(sum), 0, ErrRailChecksum)
			}
			return h, rest, nil
		}
		return h, nil, nil
	case railKindSkip, railKindAck, railKindBye:
		if h.Flags != 0 || len(rest) != 0 || h.CRC != 0 || h.Off != 0 || h.Len != 0 || h.Total != 0 ||
			h.Type != 0 || h.UFlags != 0 || h.Comm != 0 || h.Tag != 0 || h.Parts != 0 || h.USeq != 0 {
			return h, nil, railFrameErr("control fields", uint64(h.Kind), 0, ErrMalformed)
		}
		if h.Kind != railKindSkip && h.Seq != 0 {
			return h, nil, railFrameErr("seq", h.Seq, 0, ErrMalformed)
		}
		return h, nil, nil
	}
	return h, nil, railFrameErr("kind", uint64(h.Kind), uint64(railKindBye), ErrMalformed)
}

// railDataHeader is the outer header of the MsgRailData frame carrying the
// bytes at off of message seq on rail.
func railDataHeader(rail int, seq, off uint64) Header {
	return Header{Type: MsgRailData, Flags: uint16(rail), Comm: uint32(off >> 32), Tag: int32(uint32(off)), Seq: seq}
}

// railDataOffset is the offset a MsgRailData header carries.
func railDataOffset(h *Header) uint64 {
	return uint64(h.Comm)<<32 | uint64(uint32(h.Tag))
}
