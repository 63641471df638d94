package comm

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func testSizeRow() *sizeRow {
	r := newSizeRow(3)
	r.sizes = []int64{0, 1 << 20, 70}
	r.inline = []bool{false, false, true}
	r.algo = hashString("openshop")
	r.model = 1<<62 + 5
	r.drift = []float64{0, 12.5e6, 0}
	r.grants = []int64{0, 2 << 20, 0}
	r.plans = 1<<64 - 3
	return r
}

// TestSizeRowLayout pins the wire layout documented in docs/wire.md.
func TestSizeRowLayout(t *testing.T) {
	r := testSizeRow()
	b := r.encode()
	require.Len(t, b, sizeRowLen(3))
	require.Equal(t, 8*15, len(b), "4n+3 words")
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	require.Equal(t, []uint64{0, 1 << 20, 70}, []uint64{word(0), word(1), word(2)}, "sizes")
	require.Equal(t, []uint64{0, 0, 1}, []uint64{word(3), word(4), word(5)}, "inline flags")
	require.Equal(t, uint64(hashString("openshop")), word(6), "algorithm")
	require.Equal(t, uint64(1<<62+5), word(7), "model digest")
	require.Equal(t, math.Float64bits(12.5e6), word(9), "drift from rank 1")
	require.Equal(t, uint64(2<<20), word(12), "grant to rank 1")
	require.Equal(t, uint64(1<<64-3), word(14), "plans digest")

	got, err := decodeSizeRow(b, 3)
	require.NoError(t, err)
	require.Equal(t, r, got)
}

func TestSizeRowRejects(t *testing.T) {
	good := testSizeRow().encode()
	put := func(i int, v uint64) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(b[8*i:], v)
		return b
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"short":            {good[:len(good)-1], "a 119-byte size row for 3 ranks, expected 120"},
		"long":             {append(append([]byte(nil), good...), 0), "a 121-byte size row"},
		"negative size":    {put(1, ^uint64(0)), "negative size -1 for rank 1"},
		"inline flag 2":    {put(4, 2), "inline flag 2 for rank 1"},
		"algorithm hash":   {put(6, 1<<32), "algorithm hash 0x100000000 beyond 32 bits"},
		"model digest":     {put(7, 1<<63), "model digest 0x8000000000000000 beyond 63 bits"},
		"negative drift":   {put(8, math.Float64bits(-1)), "drifted rate -1 from rank 0"},
		"NaN drift":        {put(10, math.Float64bits(math.NaN())), "drifted rate NaN from rank 2"},
		"infinite drift":   {put(10, math.Float64bits(math.Inf(1))), "drifted rate +Inf from rank 2"},
		"negative grant":   {put(13, ^uint64(0)), "negative grant -1 to rank 2"},
		"for another size": {good, "for 4 ranks"},
	} {
		t.Run(name, func(t *testing.T) {
			n := 3
			if name == "for another size" {
				n = 4
			}
			_, err := decodeSizeRow(tc.b, n)
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzDecodeSizeRow: the decoder never panics, fails only with
// ErrProtocol, and what it accepts encodes back to the same bytes.
func FuzzDecodeSizeRow(f *testing.F) {
	f.Add(testSizeRow().encode(), 3)
	f.Add(newSizeRow(1).encode(), 1)
	f.Add([]byte{1, 2, 3}, 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<10 {
			return
		}
		r, err := decodeSizeRow(b, n)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error without ErrProtocol: %v", err)
			}
			return
		}
		if got := r.encode(); string(got) != string(b) {
			t.Fatalf("round trip changed the row:\n got %x\nwant %x", got, b)
		}
	})
}
