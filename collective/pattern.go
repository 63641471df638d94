package collective

import "fmt"

// Exchange is a total-exchange (all-to-all personalised) pattern:
// Bytes[i][j] is the size of the message rank i sends to rank j. The
// diagonal is a local copy: it is never planned and never costs anything.
// Pairs with zero bytes send no message.
type Exchange struct {
	Bytes [][]int64 `json:"bytes"`
}

// Size returns the number of ranks.
func (x *Exchange) Size() int { return len(x.Bytes) }

// MeshExchange is the exchange of n ranks in which rank i sends bytes(i,
// j) to every other rank j (nothing to itself).
func MeshExchange(n int, bytes func(i, j int) int64) *Exchange {
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
		for j := range x.Bytes[i] {
			if i != j {
				x.Bytes[i][j] = bytes(i, j)
			}
		}
	}
	return x
}

// Validate checks that the pattern is an n x n matrix of non-negative sizes.
func (x *Exchange) Validate(n int) error {
	if len(x.Bytes) != n {
		return fmt.Errorf("collective: bytes has %d rows, want %d", len(x.Bytes), n)
	}
	for i, row := range x.Bytes {
		if len(row) != n {
			return fmt.Errorf("collective: bytes row %d has %d columns, want %d", i, len(row), n)
		}
		for j, v := range row {
			if v < 0 {
				return fmt.Errorf("collective: bytes[%d][%d] = %d: negative size", i, j, v)
			}
		}
	}
	return nil
}

// Message is one multicast: Source sends Bytes bytes to every rank in Dests.
type Message struct {
	Source int   `json:"source"`
	Bytes  int64 `json:"bytes"`
	Dests  []int `json:"dests"`
}

// Multicast is a multiple-multicast pattern: several sources each send their
// own message to their own destination set, at once. A single broadcast and
// an all-to-all broadcast are special cases.
type Multicast struct {
	Messages []Message `json:"messages"`
}

// Validate checks sources and destinations against n ranks: in range, no
// destination equal to its source, no destination listed twice, no negative
// sizes. Empty destination sets are allowed (nothing to do).
func (mc *Multicast) Validate(n int) error {
	for k, msg := range mc.Messages {
		if msg.Source < 0 || msg.Source >= n {
			return fmt.Errorf("collective: messages[%d].source = %d: out of range [0,%d)", k, msg.Source, n)
		}
		if msg.Bytes < 0 {
			return fmt.Errorf("collective: messages[%d].bytes = %d: negative size", k, msg.Bytes)
		}
		seen := make(map[int]bool, len(msg.Dests))
		for _, d := range msg.Dests {
			switch {
			case d < 0 || d >= n:
				return fmt.Errorf("collective: messages[%d] destination %d: out of range [0,%d)", k, d, n)
			case d == msg.Source:
				return fmt.Errorf("collective: messages[%d] destination %d equals its source", k, d)
			case seen[d]:
				return fmt.Errorf("collective: messages[%d] destination %d listed twice", k, d)
			}
			seen[d] = true
		}
	}
	return nil
}

// Redistribution is a cluster-to-cluster redistribution through a backbone
// (the K-PBS problem of Jeannot and Wagner): Senders nodes of the first
// cluster send Bytes[i][j] bytes to receiver j of the second; every transfer
// runs at Rate bytes per second; at most K transfers run at once, each node
// takes part in at most one transfer at a time, and every step costs a
// setup time Setup (beta, seconds) on top of its longest transfer.
//
// Sender i and receiver j are indices within their own cluster; the
// runtime maps them to ranks.
type Redistribution struct {
	Senders   int       `json:"senders"`
	Receivers int       `json:"receivers"`
	Bytes     [][]int64 `json:"bytes"`
	Rate      float64   `json:"rate"`
	K         int       `json:"k"`
	Setup     float64   `json:"setup"`
}

// Validate checks shapes and parameters.
func (r *Redistribution) Validate() error {
	if r.Senders < 1 || r.Receivers < 1 {
		return fmt.Errorf("collective: redistribution needs at least one sender and one receiver (got %d, %d)", r.Senders, r.Receivers)
	}
	if len(r.Bytes) != r.Senders {
		return fmt.Errorf("collective: bytes has %d rows, want %d senders", len(r.Bytes), r.Senders)
	}
	for i, row := range r.Bytes {
		if len(row) != r.Receivers {
			return fmt.Errorf("collective: bytes row %d has %d columns, want %d receivers", i, len(row), r.Receivers)
		}
		for j, v := range row {
			if v < 0 {
				return fmt.Errorf("collective: bytes[%d][%d] = %d: negative size", i, j, v)
			}
		}
	}
	if !(r.Rate > 0) || !finiteNonNeg(r.Rate) {
		return fmt.Errorf("collective: rate = %v: must be a positive number of bytes per second", r.Rate)
	}
	if r.K < 1 {
		return fmt.Errorf("collective: k = %d: must be at least 1", r.K)
	}
	if !finiteNonNeg(r.Setup) {
		return fmt.Errorf("collective: setup = %v: must be finite and non-negative", r.Setup)
	}
	return nil
}
