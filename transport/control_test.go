package transport

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

type testControl struct {
	Op    string         `msgpack:"op"`
	Ranks []int          `msgpack:"ranks"`
	Sizes map[string]int `msgpack:"sizes"`
}

func TestControlRoundTrip(t *testing.T) {
	for _, f := range transports()[:1] { // encoding does not depend on the transport
		a, b := pair(t, f, testConfig(0), testConfig(1))
		ctx := testCtx(t)
		in := testControl{Op: "grant", Ranks: []int{1, 2, 3}, Sizes: map[string]int{"x": 4 << 20}}
		require.NoError(t, SendControl(ctx, a, Header{Tag: 3}, in))
		m, err := b.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, MsgControl, m.Header.Type)
		var out testControl
		require.NoError(t, DecodeControl(m.Payload, &out))
		require.Equal(t, in, out)
	}
	// RecvControl decodes a control message and refuses anything else.
	la, lb := pair(t, transports()[0], testConfig(0), testConfig(1))
	ctx := testCtx(t)
	in := testControl{Op: "hello", Ranks: []int{7}}
	require.NoError(t, SendControl(ctx, la, Header{}, in))
	var got testControl
	require.NoError(t, RecvControl(ctx, lb, &got))
	require.Equal(t, in, got)
	require.NoError(t, la.Send(ctx, Header{Type: MsgEager}, []byte("data")))
	require.ErrorIs(t, RecvControl(ctx, lb, &got), ErrMalformed)

	var out testControl
	require.ErrorIs(t, DecodeControl([]byte{0xc1}, &out), ErrMalformed)
	b, err := EncodeControl(1)
	require.NoError(t, err)
	require.ErrorIs(t, DecodeControl(append(b, 0), new(int)), ErrMalformed)
}

// FuzzDecodeControl: the control decoder never panics on untrusted bytes and
// fails only with ErrMalformed.
func FuzzDecodeControl(f *testing.F) {
	for _, s := range controlSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c testControl
		if err := DecodeControl(data, &c); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
		var anyv any
		if err := DecodeControl(data, &anyv); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	})
}

func TestCheckMsgpack(t *testing.T) {
	deep := func(n int) []byte {
		b := make([]byte, n+1)
		for i := range n {
			b[i] = 0x91 // array of one element
		}
		b[n] = 0x01
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"int", []byte{0x05}, true},
		{"empty", nil, false},
		{"str", []byte{0xa3, 'a', 'b', 'c'}, true},
		{"str-short", []byte{0xa3, 'a'}, false},
		{"array32-claims-4G", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, false},
		{"map16-claims-too-much", []byte{0xde, 0x00, 0x02, 0x01, 0x02, 0x03}, false},
		{"map16-ok", []byte{0xde, 0x00, 0x02, 0x01, 0x02, 0x03, 0x04}, true},
		{"nested-ok", deep(MaxControlDepth), true},
		{"nested-too-deep", deep(MaxControlDepth + 1), false},
		{"bin32-huge", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 0}, false},
		{"fixext4", []byte{0xd6, 1, 0, 0, 0, 0}, true},
		{"trailing", []byte{0x01, 0x02}, false},
		{"c1", []byte{0xc1}, false},
	} {
		err := checkMsgpack(tc.b)
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.Error(t, err, tc.name)
		}
	}
	for _, v := range []any{testControl{Op: "x", Ranks: []int{1, -5, 1 << 40}, Sizes: map[string]int{"a": 1}}, 3.5, float32(2), []byte{1, 2}, map[string]any{"n": nil, "t": true}} {
		b, err := EncodeControl(v)
		require.NoError(t, err)
		require.NoError(t, checkMsgpack(b), "%#v", v)
	}
}

func controlSeeds() [][]byte {
	var out [][]byte
	for _, v := range []any{testControl{Op: "rts", Ranks: []int{0, 1}}, map[string]any{"a": []any{1, "b", 2.5}}, 7, "s", nil} {
		b, err := EncodeControl(v)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}) // array claiming 4 G elements
}
