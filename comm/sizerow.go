package comm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// sizeRow is the head that every rank sends every other in the first
// round of an Alltoallv on a communicator of n ranks (docs/wire.md,
// "Alltoallv size row"). From the n rows every rank learns the whole size
// matrix, checks that all ranks asked for the same algorithm and plan
// with the same model, and gets every small message, which rides behind
// the head.
type sizeRow struct {
	// sizes[j] is how many bytes this rank sends to rank j.
	sizes []int64
	// inline[j] says that the message to rank j rides behind the head
	// (never set for this rank itself).
	inline []bool
	// algo is the hash of the algorithm's name (hashString).
	algo uint32
	// model is the digest of the cost model this rank plans with
	// (collective.Model.Digest: 63 bits).
	model uint64
	// drift[j] is the rate this rank observed on its link from rank j that
	// drifted from the model, in bytes per second; 0 for none. Only the
	// world communicator carries drift; elsewhere it is all 0.
	drift []float64
	// grants[j] is the capacity of the receive buffer this rank granted
	// rank j in advance; 0 for none.
	grants []int64
	// plans is the digest of the calls this rank's planner for the
	// algorithm has planned on this communicator (a2aplan.go), 0 if
	// none: ranks whose digests differ have planners that would make
	// different plans, and all start again from an empty one.
	plans uint64
}

func newSizeRow(n int) *sizeRow {
	return &sizeRow{sizes: make([]int64, n), inline: make([]bool, n), drift: make([]float64, n), grants: make([]int64, n)}
}

// sizeRowLen is the encoded length of a row for n ranks: 4n+3 words.
func sizeRowLen(n int) int { return 8 * (4*n + 3) }

// encode writes the row as 4n+3 little-endian 64-bit words: the sizes (n),
// the inline flags (n, 0 or 1), the algorithm hash, the model digest, the
// drifted rates (n, float64 bits), the grants (n) and the plans digest.
func (r *sizeRow) encode() []byte {
	n := len(r.sizes)
	b := make([]byte, sizeRowLen(n))
	word := func(i int, v uint64) { binary.LittleEndian.PutUint64(b[8*i:], v) }
	for j := range n {
		word(j, uint64(r.sizes[j]))
		if r.inline[j] {
			word(n+j, 1)
		}
		word(2*n+2+j, math.Float64bits(r.drift[j]))
		word(3*n+2+j, uint64(r.grants[j]))
	}
	word(2*n, uint64(r.algo))
	word(2*n+1, r.model)
	word(4*n+2, r.plans)
	return b
}

// decodeSizeRow decodes the row of a communicator of n ranks from b, which
// must be exactly sizeRowLen(n) bytes. It rejects, with an error that
// wraps ErrProtocol and names the field, what no rank sends: a negative
// size or grant, an inline flag other than 0 or 1, an algorithm hash
// beyond 32 bits, a model digest beyond 63 bits, and a drifted rate that
// is negative, infinite or not a number.
func decodeSizeRow(b []byte, n int) (*sizeRow, error) {
	if len(b) != sizeRowLen(n) {
		return nil, fmt.Errorf("%w: a %d-byte size row for %d ranks, expected %d", ErrProtocol, len(b), n, sizeRowLen(n))
	}
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	r := newSizeRow(n)
	for j := range n {
		if r.sizes[j] = int64(word(j)); r.sizes[j] < 0 {
			return nil, fmt.Errorf("%w: size row: negative size %d for rank %d", ErrProtocol, r.sizes[j], j)
		}
		switch f := word(n + j); f {
		case 0:
		case 1:
			r.inline[j] = true
		default:
			return nil, fmt.Errorf("%w: size row: inline flag %d for rank %d", ErrProtocol, f, j)
		}
		r.drift[j] = math.Float64frombits(word(2*n + 2 + j))
		if d := r.drift[j]; !(d >= 0) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("%w: size row: drifted rate %v from rank %d", ErrProtocol, d, j)
		}
		if r.grants[j] = int64(word(3*n + 2 + j)); r.grants[j] < 0 {
			return nil, fmt.Errorf("%w: size row: negative grant %d to rank %d", ErrProtocol, r.grants[j], j)
		}
	}
	algo := word(2 * n)
	if algo > math.MaxUint32 {
		return nil, fmt.Errorf("%w: size row: algorithm hash %#x beyond 32 bits", ErrProtocol, algo)
	}
	r.algo = uint32(algo)
	if r.model = word(2*n + 1); r.model>>63 != 0 {
		return nil, fmt.Errorf("%w: size row: model digest %#x beyond 63 bits", ErrProtocol, r.model)
	}
	r.plans = word(4*n + 2)
	return r, nil
}
