package collective

import (
	"fmt"
	"math"
)

// Model is the cost model of a heterogeneous system of N nodes (ranks).
//
// One type serves both papers that hetcomm plans with:
//
//   - Total exchange (Bhat, Prasanna, Raghavendra): a message of m bytes from
//     i to j costs T_ij + m/B_ij and keeps both i's send port and j's receive
//     port busy for that long. T_ij is Latency[i][j] (seconds) and B_ij is
//     Bandwidth[i][j] (bytes per second). See [Model.Cost].
//   - Multiple multicast (Wu, Yeh, Liu): sending m bytes from i to j costs a
//     send overhead S(i,m) = Sc_i + Sm_i*m on i, a transmission X(i,j)*m on
//     the wire, and a receive overhead R(j,m) = Rc_j + Rm_j*m on j. Sc/Sm are
//     SendOverhead[i].Const/PerByte, Rc/Rm are RecvOverhead[j], and X(i,j)
//     is PerByte[i][j] (seconds per byte), or 1/Bandwidth[i][j] when PerByte
//     is nil. When Latency is present it is added to the wire time, so a
//     probed model (latency + bandwidth + overheads) maps onto the multicast
//     model without losing the propagation delay; the paper's own problems
//     leave Latency nil. See [Model.SendCost], [Model.Transmit],
//     [Model.RecvCost].
//
// Row index is always the sender, column the receiver. The diagonal is a
// local copy and costs nothing.
//
// A model with several rails (NICs) keeps in the top-level matrices the
// best rail for bulk transfers and lists every rail in Rails.
type Model struct {
	// Latency[i][j] is the start-up time T_ij in seconds. May be nil for a
	// pure multicast model.
	Latency [][]float64 `json:"latency,omitempty"`
	// Bandwidth[i][j] is the rate B_ij in bytes per second.
	Bandwidth [][]float64 `json:"bandwidth,omitempty"`
	// PerByte[i][j] is the multicast paper's X(i,j), seconds per byte. Nil
	// means 1/Bandwidth[i][j].
	PerByte [][]float64 `json:"per_byte,omitempty"`
	// SendOverhead[i] is S(i,m) = Const + PerByte*m. Nil means zero.
	SendOverhead []Overhead `json:"send_overhead,omitempty"`
	// RecvOverhead[j] is R(j,m) = Const + PerByte*m. Nil means zero.
	RecvOverhead []Overhead `json:"recv_overhead,omitempty"`
	// Rails describes each rail separately, when there is more than one.
	Rails []Rail `json:"rails,omitempty"`
	// Segments are the shared links measured between groups of nodes (a
	// backbone between two clusters): every flow that crosses one shares
	// its capacity (see Fabric). The pair rates alone cannot show them.
	Segments []Segment `json:"segments,omitempty"`
}

// Overhead is a per-node software overhead Const + PerByte*m, in seconds.
type Overhead struct {
	Const   float64 `json:"const"`
	PerByte float64 `json:"per_byte"`
}

// At returns the overhead for a message of m bytes.
func (o Overhead) At(m int64) float64 { return o.Const + o.PerByte*float64(m) }

// Rail is the pair part of the model for one rail (one NIC or address).
type Rail struct {
	Name      string      `json:"name"`
	Latency   [][]float64 `json:"latency"`
	Bandwidth [][]float64 `json:"bandwidth"`
}

// NewUniformModel returns a model of n nodes in which every ordered pair has
// the given latency (seconds) and bandwidth (bytes per second).
func NewUniformModel(n int, latency, bandwidth float64) *Model {
	m := &Model{Latency: Matrix(n, latency), Bandwidth: Matrix(n, bandwidth)}
	for i := 0; i < n; i++ {
		m.Latency[i][i] = 0
	}
	return m
}

// Matrix returns an n x n matrix filled with v.
func Matrix(n int, v float64) [][]float64 {
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = make([]float64, n)
		for j := range rows[i] {
			rows[i][j] = v
		}
	}
	return rows
}

// Size returns the number of nodes the model describes.
func (m *Model) Size() int {
	switch {
	case m == nil:
		return 0
	case m.Bandwidth != nil:
		return len(m.Bandwidth)
	case m.PerByte != nil:
		return len(m.PerByte)
	case m.Latency != nil:
		return len(m.Latency)
	case m.SendOverhead != nil:
		return len(m.SendOverhead)
	default:
		return len(m.RecvOverhead)
	}
}

// Cost returns the total-exchange cost T_ij + m/B_ij of sending m bytes from
// i to j; zero when i == j.
func (m *Model) Cost(i, j int, bytes int64) float64 {
	if i == j {
		return 0
	}
	t := 0.0
	if m.Latency != nil {
		t = m.Latency[i][j]
	}
	return t + float64(bytes)*m.SecondsPerByte(i, j)
}

// SecondsPerByte returns X(i,j), the time per byte from i to j:
// PerByte[i][j], or 1/Bandwidth[i][j] when PerByte is nil, or 0 when the
// model has neither (a model of overheads only).
func (m *Model) SecondsPerByte(i, j int) float64 {
	if m.PerByte != nil {
		return m.PerByte[i][j]
	}
	if m.Bandwidth != nil {
		return 1 / m.Bandwidth[i][j]
	}
	return 0
}

// Rate returns the rate from i to j in bytes per second, 1/X(i,j): +Inf
// when the model gives no time per byte.
func (m *Model) Rate(i, j int) float64 { return 1 / m.SecondsPerByte(i, j) }

// SendCost returns the send overhead S(i, bytes).
func (m *Model) SendCost(i int, bytes int64) float64 {
	if m.SendOverhead == nil {
		return 0
	}
	return m.SendOverhead[i].At(bytes)
}

// RecvCost returns the receive overhead R(j, bytes).
func (m *Model) RecvCost(j int, bytes int64) float64 {
	if m.RecvOverhead == nil {
		return 0
	}
	return m.RecvOverhead[j].At(bytes)
}

// Transmit returns the wire time of the multicast model, X(i,j)*bytes plus
// the latency T_ij when the model has one.
func (m *Model) Transmit(i, j int, bytes int64) float64 {
	t := float64(bytes) * m.SecondsPerByte(i, j)
	if m.Latency != nil && i != j {
		t += m.Latency[i][j]
	}
	return t
}

// Validate checks that the model is internally consistent: square matrices
// of one size n, finite non-negative latencies and overheads, positive
// finite bandwidths off the diagonal. It needs at least one of Bandwidth and
// PerByte.
func (m *Model) Validate() error {
	if m == nil {
		return fmt.Errorf("collective: nil model")
	}
	n := m.Size()
	if n < 1 {
		return fmt.Errorf("collective: model has no nodes")
	}
	if m.Bandwidth == nil && m.PerByte == nil {
		return fmt.Errorf("collective: model has neither bandwidth nor per_byte")
	}
	if err := checkMatrix("latency", m.Latency, n, false, false); err != nil {
		return err
	}
	if err := checkMatrix("bandwidth", m.Bandwidth, n, true, true); err != nil {
		return err
	}
	if err := checkMatrix("per_byte", m.PerByte, n, false, false); err != nil {
		return err
	}
	for name, ov := range map[string][]Overhead{"send_overhead": m.SendOverhead, "recv_overhead": m.RecvOverhead} {
		if ov == nil {
			continue
		}
		if len(ov) != n {
			return fmt.Errorf("collective: %s has %d entries, want %d", name, len(ov), n)
		}
		for i, o := range ov {
			if !finiteNonNeg(o.Const) || !finiteNonNeg(o.PerByte) {
				return fmt.Errorf("collective: %s[%d] = %+v: must be finite and non-negative", name, i, o)
			}
		}
	}
	for i := range m.Segments {
		if err := m.Segments[i].validate(n); err != nil {
			return fmt.Errorf("collective: segments[%d] (%q): %w", i, m.Segments[i].Name, err)
		}
	}
	for r, rail := range m.Rails {
		if err := checkMatrix(fmt.Sprintf("rails[%d].latency", r), rail.Latency, n, false, false); err != nil {
			return err
		}
		if rail.Bandwidth == nil {
			return fmt.Errorf("collective: rails[%d] (%q) has no bandwidth", r, rail.Name)
		}
		if err := checkMatrix(fmt.Sprintf("rails[%d].bandwidth", r), rail.Bandwidth, n, true, true); err != nil {
			return err
		}
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// checkMatrix checks an optional n x n matrix. positive requires entries
// off the diagonal to be > 0; skipDiag ignores the diagonal entirely.
func checkMatrix(name string, a [][]float64, n int, positive, skipDiag bool) error {
	if a == nil {
		return nil
	}
	if len(a) != n {
		return fmt.Errorf("collective: %s has %d rows, want %d", name, len(a), n)
	}
	for i, row := range a {
		if len(row) != n {
			return fmt.Errorf("collective: %s row %d has %d columns, want %d", name, i, len(row), n)
		}
		for j, v := range row {
			if skipDiag && i == j {
				continue
			}
			if !finiteNonNeg(v) {
				return fmt.Errorf("collective: %s[%d][%d] = %v: must be finite and non-negative", name, i, j, v)
			}
			if positive && i != j && v <= 0 {
				return fmt.Errorf("collective: %s[%d][%d] = %v: must be positive", name, i, j, v)
			}
		}
	}
	return nil
}
