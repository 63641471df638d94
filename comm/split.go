package comm

import (
	"context"
	"hash/fnv"
	"sort"
)

// Undefined, as a Split color, leaves this rank out of every new
// communicator (Split then returns nil).
const Undefined = -1

// Split partitions the communicator: ranks that pass the same color form a
// new communicator, ordered by key and then by their rank here. It is
// collective. A rank that passes Undefined (or any negative color) gets
// nil.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	k, cancel, err := c.begin(ctx, opSplit)
	if err != nil {
		return nil, err
	}
	defer cancel()
	all, err := k.exchangeSmall(putInt64s([]int64{int64(color), int64(key)}))
	if err != nil {
		return nil, k.err(err)
	}
	seq := c.splits.Add(1)
	if color < 0 {
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r, b := range all {
		v := getInt64s(b)
		if len(v) != 2 {
			return nil, k.err(&RankError{Rank: c.group[r], Err: ErrProtocol})
		}
		if int(v[0]) == color {
			ms = append(ms, member{int(v[1]), r})
		}
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].key != ms[j].key {
			return ms[i].key < ms[j].key
		}
		return ms[i].rank < ms[j].rank
	})
	group := make([]int, len(ms))
	for i, m := range ms {
		group[i] = c.group[m.rank]
	}
	return c.w.newComm(splitID(c.id, seq, color), group, c.w.rank), nil
}

// splitID derives the new communicator's id, the same on every member,
// from the parent's id, the split's sequence number and the color. Ids fit
// in 30 bits and never equal the world's.
func splitID(parent uint32, seq uint32, color int) uint32 {
	h := fnv.New32a()
	var b [16]byte
	for i := 0; i < 4; i++ {
		b[i] = byte(parent >> (8 * i))
		b[4+i] = byte(seq >> (8 * i))
	}
	for i := 0; i < 8; i++ {
		b[8+i] = byte(uint64(color) >> (8 * i))
	}
	h.Write(b[:])
	return h.Sum32()%(1<<30-2) + 2
}
