package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Control messages (MsgControl, and the payloads of MsgRTS and MsgCTS) are
// msgpack-encoded. Data payloads are never encoded: they travel as the
// caller's bytes.

// EncodeControl encodes v as msgpack, the encoding of control payloads.
func EncodeControl(v any) ([]byte, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("transport: encode control: %w", err)
	}
	return b, nil
}

// DecodeControl decodes a msgpack control payload into v. Trailing bytes
// are an error. It is safe on untrusted input: the payload's structure is
// checked first (every container's claimed element count must fit in the
// bytes that follow, nesting is at most MaxControlDepth), so the decoder
// never allocates for elements that are not there. (Fuzzing found that
// msgpack decoding into an interface allocates a claimed array length up
// front: a 5-byte payload could ask for 64 GiB.)
func DecodeControl(payload []byte, v any) error {
	if err := checkMsgpack(payload); err != nil {
		return fmt.Errorf("%w: control payload: %w", ErrMalformed, err)
	}
	r := bytes.NewReader(payload)
	d := msgpack.NewDecoder(r)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: control payload: %w", ErrMalformed, err)
	}
	if r.Len() != 0 {
		return fmt.Errorf("%w: control payload: %d trailing bytes", ErrMalformed, r.Len())
	}
	return nil
}

// SendControl encodes v with EncodeControl and sends it as a message of
// type h.Type (MsgControl if zero).
func SendControl(ctx context.Context, l Link, h Header, v any) error {
	b, err := EncodeControl(v)
	if err != nil {
		return err
	}
	if h.Type == 0 {
		h.Type = MsgControl
	}
	return l.Send(ctx, h, b)
}

// RecvControl receives l's next message, which must be a MsgControl
// message, and decodes it into v with DecodeControl.
func RecvControl(ctx context.Context, l Link, v any) error {
	m, err := l.Recv(ctx)
	if err != nil {
		return err
	}
	if m.Header.Type != MsgControl {
		return fmt.Errorf("%w: expected a control message, got %v", ErrMalformed, m.Header.Type)
	}
	return DecodeControl(m.Payload, v)
}

// MaxControlDepth bounds the nesting of arrays and maps in a control
// payload.
const MaxControlDepth = 32

// checkMsgpack walks one msgpack value without decoding it and verifies
// that it is well formed, that every claimed count fits in the remaining
// bytes (each element takes at least one), that nesting stays within
// MaxControlDepth, and that nothing follows it.
func checkMsgpack(b []byte) error {
	var stack [MaxControlDepth + 1]uint64 // elements still expected per level
	depth := 0
	stack[0] = 1
	i := 0
	need := func(n uint64) error {
		if n > uint64(len(b)-i) {
			return errors.New("truncated")
		}
		return nil
	}
	uintN := func(size int) (uint64, error) {
		if err := need(uint64(size)); err != nil {
			return 0, err
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(b[i])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += size
		return v, nil
	}
	for {
		for depth >= 0 && stack[depth] == 0 {
			depth--
		}
		if depth < 0 {
			break
		}
		stack[depth]--
		if i >= len(b) {
			return errors.New("truncated")
		}
		c := b[i]
		i++
		var skip uint64     // bytes of payload to skip
		var children uint64 // elements of a container
		container := false
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			children, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f:
			children, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			skip, err = uintN(1)
		case c == 0xc5 || c == 0xda:
			skip, err = uintN(2)
		case c == 0xc6 || c == 0xdb:
			skip, err = uintN(4)
		case c == 0xc7:
			skip, err = uintN(1)
			skip++
		case c == 0xc8:
			skip, err = uintN(2)
			skip++
		case c == 0xc9:
			skip, err = uintN(4)
			skip++
		case c == 0xca:
			skip = 4
		case c == 0xcb:
			skip = 8
		case c >= 0xcc && c <= 0xcf:
			skip = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3:
			skip = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8:
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc:
			children, err = uintN(2)
			container = true
		case c == 0xdd:
			children, err = uintN(4)
			container = true
		case c == 0xde:
			children, err = uintN(2)
			children *= 2
			container = true
		case c == 0xdf:
			children, err = uintN(4)
			children *= 2
			container = true
		default: // 0xc1 is never used
			return fmt.Errorf("invalid type byte 0x%02x", c)
		}
		if err != nil {
			return err
		}
		if err := need(skip); err != nil {
			return err
		}
		i += int(skip)
		if container && children > 0 {
			if err := need(children); err != nil {
				return fmt.Errorf("container claims %d elements: %w", children, err)
			}
			if depth+1 > MaxControlDepth {
				return errors.New("nested too deep")
			}
			depth++
			stack[depth] = children
		}
	}
	if i != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-i)
	}
	return nil
}
