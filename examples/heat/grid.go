package main

import (
	"context"
	"fmt"
	"math"

	"github.com/hetcomm/hetcomm/comm"
)

// The grid: nx x ny interior points of a plate whose top edge is held at
// 1 and whose other edges are held at 0, relaxed with Jacobi sweeps (the
// explicit heat equation with the largest stable time step, whose steady
// state is Laplace's equation). Rank r owns the interior rows
// bounds[r]..bounds[r+1]-1, at least one.

// Message tags of the example's point-to-point traffic.
const (
	tagDown     = 1 // a rank's last row, to the rank below
	tagUp       = 2 // a rank's first row, to the rank above
	tagCapacity = 3 // AASR: a node's capacity, to the master
	tagDecision = 4 // AASR: the master's decision, to every node
)

const topTemperature = 1.0

// block is one rank's rows with a halo row above and below and the
// boundary columns, row major, (rows+2) x (ny+2); u holds the current
// iterate and v receives the next.
type block struct {
	nx, ny int
	me     int
	bounds []int
	u, v   []float64
}

func newBlock(nx, ny, me int, bounds []int) *block {
	b := &block{nx: nx, ny: ny, me: me, bounds: append([]int(nil), bounds...)}
	n := (b.rows() + 2) * b.width()
	b.u, b.v = make([]float64, n), make([]float64, n)
	b.setBoundary(b.u)
	b.setBoundary(b.v)
	return b
}

func (b *block) lo() int    { return b.bounds[b.me] }
func (b *block) hi() int    { return b.bounds[b.me+1] }
func (b *block) rows() int  { return b.hi() - b.lo() }
func (b *block) width() int { return b.ny + 2 }

// row returns local row i of g (0 is the upper halo, rows()+1 the lower).
func (b *block) row(g []float64, i int) []float64 {
	w := b.width()
	return g[i*w : (i+1)*w]
}

// setBoundary writes the fixed boundary values into g: the top edge when
// this block holds the first row; the side columns and the bottom edge
// are 0 and stay so.
func (b *block) setBoundary(g []float64) {
	if b.lo() == 0 {
		top := b.row(g, 0)
		for j := 1; j <= b.ny; j++ {
			top[j] = topTemperature
		}
	}
}

// sweep computes one Jacobi sweep from u into v and returns the largest
// change. It only reads u, so repeating it (the work emulation) gives the
// same v.
func (b *block) sweep() float64 {
	return sweepRows(b.u, b.v, b.width(), 1, b.rows())
}

// sweepRows relaxes rows first..last of a grid of the given width: the
// same arithmetic, in the same order, as the serial reference.
func sweepRows(u, v []float64, w, first, last int) float64 {
	maxDiff := 0.0
	for i := first; i <= last; i++ {
		up, mid, dn, out := u[(i-1)*w:i*w], u[i*w:(i+1)*w], u[(i+1)*w:(i+2)*w], v[i*w:(i+1)*w]
		for j := 1; j < w-1; j++ {
			x := 0.25 * (up[j] + dn[j] + mid[j-1] + mid[j+1])
			if d := math.Abs(x - mid[j]); d > maxDiff {
				maxDiff = d
			}
			out[j] = x
		}
	}
	return maxDiff
}

func (b *block) swap() { b.u, b.v = b.v, b.u }

// exchange fills the halo rows of u from the neighbours: every rank sends
// its last row down and its first row up, with Sendrecv where it has
// neighbours on both sides (comm has no MPI_PROC_NULL, so the ends use
// Send and Recv).
func (b *block) exchange(ctx context.Context, c *comm.Comm) error {
	me, p := b.me, len(b.bounds)-1
	ny := b.ny
	first := b.row(b.u, 1)[1 : ny+1]
	last := b.row(b.u, b.rows())[1 : ny+1]
	upper := b.row(b.u, 0)[1 : ny+1]
	lower := b.row(b.u, b.rows()+1)[1 : ny+1]
	put := func(dst []float64, data []byte, from int) error {
		v, err := comm.FromBytes[float64](data)
		if err != nil || len(v) != len(dst) {
			return fmt.Errorf("halo row from rank %d: %d bytes, want %d", from, len(data), 8*len(dst))
		}
		copy(dst, v)
		return nil
	}
	// Downward: last row to me+1, upper halo from me-1.
	switch {
	case p == 1:
	case me == 0:
		if err := c.Send(ctx, me+1, tagDown, comm.AsBytes(last)); err != nil {
			return err
		}
	case me == p-1:
		data, _, err := c.Recv(ctx, me-1, tagDown)
		if err != nil {
			return err
		}
		if err := put(upper, data, me-1); err != nil {
			return err
		}
	default:
		data, _, err := c.Sendrecv(ctx, comm.AsBytes(last), me+1, tagDown, me-1, tagDown)
		if err != nil {
			return err
		}
		if err := put(upper, data, me-1); err != nil {
			return err
		}
	}
	// Upward: first row to me-1, lower halo from me+1.
	switch {
	case p == 1:
	case me == p-1:
		if err := c.Send(ctx, me-1, tagUp, comm.AsBytes(first)); err != nil {
			return err
		}
	case me == 0:
		data, _, err := c.Recv(ctx, me+1, tagUp)
		if err != nil {
			return err
		}
		if err := put(lower, data, me+1); err != nil {
			return err
		}
	default:
		data, _, err := c.Sendrecv(ctx, comm.AsBytes(first), me-1, tagUp, me+1, tagUp)
		if err != nil {
			return err
		}
		if err := put(lower, data, me+1); err != nil {
			return err
		}
	}
	return nil
}

// migrate moves rows so that the partition becomes newBounds: every rank
// sends the rows it loses to their new owners in one Alltoallv (in the
// 1-D decomposition mostly to its neighbours), then rebuilds its block.
// It returns how many rows this rank sent.
func (b *block) migrate(ctx context.Context, c *comm.Comm, newBounds []int) (int, error) {
	p := len(b.bounds) - 1
	ny := b.ny
	moves := migration(b.bounds, newBounds)
	send := make([][]byte, p)
	sent := 0
	for _, t := range moves {
		if t.from != b.me {
			continue
		}
		buf := make([]float64, 0, (t.hi-t.lo)*ny)
		for g := t.lo; g < t.hi; g++ {
			buf = append(buf, b.row(b.u, g-b.lo()+1)[1:ny+1]...)
		}
		send[t.to] = comm.AsBytes(buf)
		sent += t.hi - t.lo
	}
	for r := range send {
		if send[r] == nil {
			send[r] = []byte{}
		}
	}
	recv, err := c.Alltoallv(ctx, send)
	if err != nil {
		return 0, fmt.Errorf("migration: %w", err)
	}
	nb := newBlock(b.nx, b.ny, b.me, newBounds)
	// Rows I keep.
	for g := max(b.lo(), nb.lo()); g < min(b.hi(), nb.hi()); g++ {
		copy(nb.row(nb.u, g-nb.lo()+1), b.row(b.u, g-b.lo()+1))
	}
	// Rows I receive.
	for _, t := range moves {
		if t.to != b.me {
			continue
		}
		v, err := comm.FromBytes[float64](recv[t.from])
		if err != nil || len(v) != (t.hi-t.lo)*ny {
			return 0, fmt.Errorf("migration: rank %d sent %d bytes, want rows %d..%d (%d bytes)", t.from, len(recv[t.from]), t.lo, t.hi-1, 8*(t.hi-t.lo)*ny)
		}
		for g := t.lo; g < t.hi; g++ {
			copy(nb.row(nb.u, g-nb.lo()+1)[1:ny+1], v[(g-t.lo)*ny:(g-t.lo+1)*ny])
		}
	}
	*b = *nb
	return sent, nil
}

// interior returns this rank's rows without halos and boundary columns.
func (b *block) interior() []float64 {
	out := make([]float64, 0, b.rows()*b.ny)
	for i := 1; i <= b.rows(); i++ {
		out = append(out, b.row(b.u, i)[1:b.ny+1]...)
	}
	return out
}

// serial runs iters Jacobi sweeps on the whole grid in one process and
// returns the interior, row major: the reference of the check.
func serial(nx, ny, iters int) []float64 {
	w := ny + 2
	u, v := make([]float64, (nx+2)*w), make([]float64, (nx+2)*w)
	for j := 1; j <= ny; j++ {
		u[j], v[j] = topTemperature, topTemperature
	}
	for it := 0; it < iters; it++ {
		sweepRows(u, v, w, 1, nx)
		u, v = v, u
	}
	out := make([]float64, 0, nx*ny)
	for i := 1; i <= nx; i++ {
		out = append(out, u[i*w+1:i*w+1+ny]...)
	}
	return out
}
