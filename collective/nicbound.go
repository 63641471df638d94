package collective

// NICBound is a lower bound on a total exchange when ranks are limited by
// their network interfaces rather than by a one-port discipline: a rank
// may send to (and receive from) several ranks at once, but no faster in
// total than its interface. Interface rates are estimated from the pair
// rates of the model ([Model.NICRates]: an underestimate when every peer
// is slower than the interface, so the bound stays a bound only where some
// peer is as fast; it errs towards the one-port planners). Each rank's latency is paid once.
//
// On a switched network where the pair rate is min(sender's NIC,
// receiver's NIC), sending everything at once (the naive exchange) runs
// close to this bound, and one-port schedules can be far above it when
// fast ranks talk to slow ones: this is what Alltoallv's auto choice
// compares. It is not part of the total-exchange paper, whose model is
// one-port.
func NICBound(m *Model, x *Exchange) float64 {
	n := x.Size()
	if n < 2 {
		return 0
	}
	out, in := m.NICRates()
	lat := make([]float64, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			if m.Latency != nil && x.Bytes[i][j] > 0 {
				lat[i] = max(lat[i], m.Latency[i][j])
				lat[j] = max(lat[j], m.Latency[i][j])
			}
		}
	}
	bound := 0.0
	for i := 0; i < n; i++ {
		var sent, recv float64
		for j := 0; j < n; j++ {
			if i != j {
				sent += float64(x.Bytes[i][j])
				recv += float64(x.Bytes[j][i])
			}
		}
		if out[i] > 0 {
			bound = max(bound, lat[i]+sent/out[i])
		}
		if in[i] > 0 {
			bound = max(bound, lat[i]+recv/in[i])
		}
	}
	return bound
}
