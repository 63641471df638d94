package comm

import (
	"context"
	"fmt"
	"unsafe"
)

// Number is the element type of the typed helpers: integers and floats.
// Typed slices travel as their in-memory bytes (no per-element encoding),
// so every rank must share the byte order, as on all common hosts.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Op combines src into dst: it receives whole slices of equal length, so
// the built-in ops work element by element (dst[i] = dst[i] op src[i]) and
// a user op may also combine groups of elements, as MPI's MAXLOC does with
// (value, index) pairs laid out side by side. It must be associative;
// Reduce combines in rank order starting at root.
type Op[T Number] func(dst, src []T)

// Sum adds.
func Sum[T Number](dst, src []T) {
	for i := range dst {
		dst[i] += src[i]
	}
}

// Prod multiplies.
func Prod[T Number](dst, src []T) {
	for i := range dst {
		dst[i] *= src[i]
	}
}

// Min keeps the smaller.
func Min[T Number](dst, src []T) {
	for i := range dst {
		if src[i] < dst[i] {
			dst[i] = src[i]
		}
	}
}

// Max keeps the larger.
func Max[T Number](dst, src []T) {
	for i := range dst {
		if src[i] > dst[i] {
			dst[i] = src[i]
		}
	}
}

// OpFunc turns an element function into an Op.
func OpFunc[T Number](f func(a, b T) T) Op[T] {
	return func(dst, src []T) {
		for i := range dst {
			dst[i] = f(dst[i], src[i])
		}
	}
}

// AsBytes views a typed slice as its bytes, without copying.
func AsBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// FromBytes views bytes as a typed slice, copying only when b is not
// aligned for T. It fails if len(b) is not a multiple of T's size.
func FromBytes[T Number](b []byte) ([]T, error) {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte elements", ErrMismatch, len(b), size)
	}
	n := len(b) / size
	if n == 0 {
		return []T{}, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(z) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
	}
	out := make([]T, n)
	copy(AsBytes(out), b)
	return out, nil
}

// Reduce combines every rank's data with op and returns the result at
// root (nil elsewhere). Every rank must pass the same length. Binomial
// tree: ceil(log2 P) rounds.
func Reduce[T Number](ctx context.Context, c *Comm, root int, data []T, op Op[T]) ([]T, error) {
	return reduce(ctx, c, root, data, op, opReduce)
}

func reduce[T Number](ctx context.Context, c *Comm, root int, data []T, op Op[T], code uint16) ([]T, error) {
	if err := c.checkPeer(opName(code), "root", root, false); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, &ArgError{Op: opName(code), Arg: "op", Msg: "nil"}
	}
	k, cancel, err := c.begin(ctx, code)
	if err != nil {
		return nil, err
	}
	defer cancel()
	n := c.Size()
	vr := (c.rank - root + n) % n
	acc := append([]T{}, data...)
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := k.send((vr-mask+root)%n, AsBytes(acc)); err != nil {
				return nil, k.err(err)
			}
			return nil, nil
		}
		if vr+mask < n {
			src := (vr + mask + root) % n
			b, err := k.recv(src)
			if err != nil {
				return nil, k.err(err)
			}
			other, err := FromBytes[T](b)
			if err == nil && len(other) != len(acc) {
				err = fmt.Errorf("%w: rank %d contributed %d elements, this rank %d", ErrMismatch, src, len(other), len(acc))
			}
			if err != nil {
				return nil, k.err(&RankError{Rank: c.group[src], Err: err})
			}
			op(acc, other)
		}
	}
	return acc, nil
}

// Allreduce combines every rank's data with op and gives every rank the
// result (a reduction to rank 0, then a broadcast).
func Allreduce[T Number](ctx context.Context, c *Comm, data []T, op Op[T]) ([]T, error) {
	res, err := reduce(ctx, c, 0, data, op, opAllreduce)
	if err != nil {
		return nil, err
	}
	b, err := c.Bcast(ctx, 0, AsBytes(res))
	if err != nil {
		return nil, err
	}
	out, err := FromBytes[T](b)
	if err != nil {
		return nil, opErr("Allreduce", err)
	}
	return append([]T(nil), out...), nil
}

// SendSlice sends a typed slice (see Comm.Send).
func SendSlice[T Number](ctx context.Context, c *Comm, dst, tag int, data []T) error {
	return c.Send(ctx, dst, tag, AsBytes(data))
}

// RecvSlice receives a typed slice (see Comm.Recv).
func RecvSlice[T Number](ctx context.Context, c *Comm, src, tag int) ([]T, Status, error) {
	b, st, err := c.Recv(ctx, src, tag)
	if err != nil {
		return nil, st, err
	}
	out, err := FromBytes[T](b)
	return out, st, opErr("recv", err)
}

// BcastSlice broadcasts a typed slice from root (see Comm.Bcast).
func BcastSlice[T Number](ctx context.Context, c *Comm, root int, data []T) ([]T, error) {
	var b []byte
	if c.Rank() == root {
		b = AsBytes(data)
	}
	out, err := c.Bcast(ctx, root, b)
	if err != nil {
		return nil, err
	}
	if c.Rank() == root {
		return data, nil
	}
	res, err := FromBytes[T](out)
	return res, opErr("Bcast", err)
}

// AllgathervSlice gathers typed slices on every rank (see Comm.Allgatherv).
func AllgathervSlice[T Number](ctx context.Context, c *Comm, data []T) ([][]T, error) {
	parts, err := c.Allgatherv(ctx, AsBytes(data))
	if err != nil {
		return nil, err
	}
	return typedParts[T]("Allgatherv", parts)
}

// GathervSlice gathers typed slices at root (see Comm.Gatherv).
func GathervSlice[T Number](ctx context.Context, c *Comm, root int, data []T) ([][]T, error) {
	parts, err := c.Gatherv(ctx, root, AsBytes(data))
	if err != nil || parts == nil {
		return nil, err
	}
	return typedParts[T]("Gatherv", parts)
}

// ScattervSlice scatters typed slices from root (see Comm.Scatterv).
func ScattervSlice[T Number](ctx context.Context, c *Comm, root int, parts [][]T) ([]T, error) {
	var b [][]byte
	if c.Rank() == root {
		b = make([][]byte, len(parts))
		for i, p := range parts {
			b[i] = AsBytes(p)
		}
	}
	out, err := c.Scatterv(ctx, root, b)
	if err != nil {
		return nil, err
	}
	res, err := FromBytes[T](out)
	return res, opErr("Scatterv", err)
}

// AlltoallvSlice exchanges typed slices (see Comm.Alltoallv).
func AlltoallvSlice[T Number](ctx context.Context, c *Comm, send [][]T) ([][]T, error) {
	b := make([][]byte, len(send))
	for i, s := range send {
		b[i] = AsBytes(s)
	}
	parts, err := c.Alltoallv(ctx, b)
	if err != nil {
		return nil, err
	}
	return typedParts[T]("Alltoallv", parts)
}

func typedParts[T Number](op string, parts [][]byte) ([][]T, error) {
	out := make([][]T, len(parts))
	for i, p := range parts {
		var err error
		if out[i], err = FromBytes[T](p); err != nil {
			return nil, opErr(op, err)
		}
	}
	return out, nil
}
