package comm

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"

	"github.com/hetcomm/hetcomm/collective"
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
// (value, index) pairs laid out side by side. It must be associative; it
// need not be commutative: the reductions combine in rank order, lower
// ranks on the left, as MPI does.
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
//
// It is not inlined, so that the ops it makes keep its name, by which
// Allreduce knows that they combine element by element (elementwise).
//
//go:noinline
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
// root (nil elsewhere). Every rank must pass the same length. Large
// vectors are reduce-scattered, in blocks in proportion to each rank's
// NIC rate, and the blocks gathered at root. The others go up a tree:
// with Sum, Prod, Min or Max, the one collective.PlanReduce plans from
// the model (Bcast's tree run backwards: slow senders are leaves, a rank
// collects from as many children as its ingress carries, and a vector of
// ReduceLargeFrom bytes or more streams up in pieces that every rank
// combines and passes on as they come); with any other op, on loopback,
// or with Bcast's algorithm forced to collective.BcastBinomial (Config.Bcast
// or WithAlgorithm), a binomial tree towards rank 0 that combines in rank
// order, then one message to root. The choice between the two is Allreduce's
// (collective.PlanAllreduce: AllreduceTree or AllreduceRSAG, forced by
// Config.Allreduce or WithAlgorithm), and only an element-wise op is
// reduce-scattered.
func Reduce[T Number](ctx context.Context, c *Comm, root int, data []T, op Op[T]) ([]T, error) {
	if err := c.checkPeer("Reduce", "root", root, false); err != nil {
		return nil, err
	}
	if op != nil && elementwise(op) && c.Size() > 1 {
		var z T
		plan := c.allreducePlan(ctx, len(data), int(unsafe.Sizeof(z)))
		if plan.Algorithm == collective.AllreduceRSAG {
			return reduceRSG(ctx, c, root, data, op, plan.Counts)
		}
	}
	return reduce(ctx, c, root, data, op, opReduce)
}

// reduceRSG reduce-scatters data in blocks of counts elements and
// gathers the blocks at root.
func reduceRSG[T Number](ctx context.Context, c *Comm, root int, data []T, op Op[T], counts []int) ([]T, error) {
	mine, err := ReduceScatter(ctx, c, data, counts, op)
	if err != nil {
		return nil, opErr("Reduce", err)
	}
	blocks, err := c.Gatherv(ctx, root, AsBytes(mine))
	if err != nil || c.rank != root {
		return nil, opErr("Reduce", err)
	}
	var z T
	size := int(unsafe.Sizeof(z))
	out := make([]T, len(data))
	at := 0
	for r, b := range blocks {
		if len(b) != counts[r]*size {
			return nil, opErr("Reduce", &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d gathered a block of %d bytes, root expected %d", ErrMismatch, r, len(b), counts[r]*size)})
		}
		copy(AsBytes(out[at:at+counts[r]]), b)
		at += counts[r]
	}
	return out, nil
}

func reduce[T Number](ctx context.Context, c *Comm, root int, data []T, op Op[T], code uint16) ([]T, error) {
	return reduceInto(ctx, c, root, data, make([]T, len(data)), op, code)
}

// reduceInto is reduce accumulating in acc (len(data) elements; it may be
// data itself), which it returns at root.
func reduceInto[T Number](ctx context.Context, c *Comm, root int, data, acc []T, op Op[T], code uint16) ([]T, error) {
	if err := c.checkPeer(opName(code), "root", root, false); err != nil {
		return nil, err
	}
	if op == nil {
		return nil, &ArgError{Op: opName(code), Arg: "op", Msg: "nil"}
	}
	k, cancel, err := c.beginRooted(ctx, code, root)
	if err != nil {
		return nil, err
	}
	defer cancel()
	n, me := c.Size(), c.rank
	copy(acc, data)
	var z T
	plan, err := reducePlan(ctx, c, root, len(acc), int(unsafe.Sizeof(z)), op)
	if err != nil {
		return nil, k.err(err)
	}
	if plan != nil {
		if err := reduceAlong(k, plan, acc, op); err != nil || me != root {
			return nil, k.err(err)
		}
		return acc, nil
	}
	// A binomial tree towards rank 0 combines in rank order (a subtree's
	// ranks follow its parent's); rank 0 then hands the result to root.
	// Every message carries the sender's length, root and operator
	// (reduceHead), which the receiver checks.
	head := reduceHead(root, len(acc), opCode(op))
	k.sig = head
	send := func(dst int) error {
		done, err := k.isendSeq(dst, AsBytes(acc), head)
		if err == nil {
			err = done()
		}
		return err
	}
	for mask := 1; mask < n; mask <<= 1 {
		if me&mask != 0 {
			if err := send(me - mask); err != nil {
				return nil, k.err(err)
			}
			break
		}
		if me+mask < n {
			other, err := recvReduced[T](k, me+mask, head, len(acc))
			if err != nil {
				return nil, k.err(err)
			}
			op(acc, other)
		}
	}
	switch {
	case root == 0 && me == 0:
		return acc, nil
	case me == 0:
		if err := send(root); err != nil {
			return nil, k.err(err)
		}
	case me == root:
		res, err := recvReduced[T](k, 0, head, len(acc))
		if err != nil {
			return nil, k.err(err)
		}
		copy(acc, res)
		return acc, nil
	}
	return nil, nil
}

// recvReduced receives a vector of want elements from rank src in a
// reduction whose messages carry head (reduceHead).
func recvReduced[T Number](k *coll, src int, head uint64, want int) ([]T, error) {
	b, m, err := k.finishMsg(k.c.postRecv(collCtx(k.c.id), src, k.tag), nil)
	if err != nil {
		return nil, err
	}
	if err := k.checkHead(src, m.useq, head); err != nil {
		return nil, err
	}
	got, err := FromBytes[T](b)
	if err == nil && len(got) != want {
		// The head said want elements: the message contradicts it.
		err = fmt.Errorf("%w: %s: rank %d sent %d elements, its head said %d", ErrProtocol, opName(k.op), src, len(got), want)
	}
	if err != nil {
		return nil, &RankError{Rank: k.c.group[src], Err: err}
	}
	return got, nil
}

// Allreduce combines every rank's data with op and gives every rank the
// result. Small vectors are reduced to rank 0 as Reduce does and come
// back down Bcast's tree (collective.AllreduceTree); large ones are
// reduce-scattered, in blocks in proportion to each rank's NIC rate, and
// allgathered (collective.AllreduceRSAG), the two overlapped piece by
// piece where the model predicts that pays (AllreducePlan.Segments: a
// slow egress limits the first, a slow ingress the second). The choice follows the model's
// predictions unless Config.Allreduce or WithAlgorithm forces one. Only an element-wise op
// (Sum, Prod, Min, Max, or made by OpFunc) is reduce-scattered: any other
// op may combine groups of elements and always sees whole vectors.
func Allreduce[T Number](ctx context.Context, c *Comm, data []T, op Op[T]) ([]T, error) {
	out := make([]T, len(data))
	if err := AllreduceInto(ctx, c, data, out, op); err != nil {
		return nil, err
	}
	return out, nil
}

// AllreduceInto is Allreduce writing the result into out, which must have
// as many elements as data (out may be data itself), so that an iterative
// code does not allocate a result every call.
func AllreduceInto[T Number](ctx context.Context, c *Comm, data, out []T, op Op[T]) error {
	if len(out) != len(data) {
		return &ArgError{Op: "Allreduce", Arg: "out", Msg: fmt.Sprintf("%d elements for %d", len(out), len(data))}
	}
	var z T
	plan := c.allreducePlan(ctx, len(data), int(unsafe.Sizeof(z)))
	if plan.Algorithm == collective.AllreduceRSAG && elementwise(op) {
		if plan.Segments > 1 {
			return allreducePipelined(ctx, c, data, out, op, plan.Counts, plan.Segments)
		}
		return allreduceRSAG(ctx, c, data, out, op, plan.Counts)
	}
	if _, err := reduceInto(ctx, c, 0, data, out, op, opAllreduce); err != nil {
		return err
	}
	b, err := c.bcast(ctx, 0, AsBytes(out), AsBytes(out))
	if err != nil {
		return err
	}
	if len(b) != len(AsBytes(out)) {
		return opErr("Allreduce", &RankError{Rank: c.group[0], Err: fmt.Errorf("%w: rank 0 broadcast %d bytes, this rank expected %d", ErrMismatch, len(b), len(AsBytes(out)))})
	}
	if len(b) > 0 && &b[0] != &AsBytes(out)[0] {
		copy(AsBytes(out), b)
	}
	return nil
}

// elementwise reports whether op combines element by element, so that
// the vector may be cut anywhere: Sum, Prod, Min, Max and the ops OpFunc
// makes, recognised by their function names. Any other op may combine
// groups of elements (MAXLOC's pairs) and is applied to whole vectors.
func elementwise[T Number](op Op[T]) bool {
	return opIs(op, "Sum[", "Prod[", "Min[", "Max[", "OpFunc[")
}

// commutative reports whether op is one of Sum, Prod, Min and Max, whose
// operands may be combined in any order (MPI assumes so of its
// predefined operations, not of a user's).
func commutative[T Number](op Op[T]) bool {
	return opIs(op, "Sum[", "Prod[", "Min[", "Max[")
}

// opIs reports whether op is a function of this package whose name
// starts with one of prefixes.
func opIs[T Number](op Op[T], prefixes ...string) bool {
	if op == nil {
		return false
	}
	f := runtime.FuncForPC(reflect.ValueOf(op).Pointer())
	if f == nil {
		return false
	}
	const pkg = "github.com/hetcomm/hetcomm/comm."
	name, ok := strings.CutPrefix(f.Name(), pkg)
	if !ok {
		return false
	}
	for _, e := range prefixes {
		if strings.HasPrefix(name, e) {
			return true
		}
	}
	return false
}

// allreduceRSAG reduce-scatters data in blocks of counts elements, then
// gathers every rank's block into out.
func allreduceRSAG[T Number](ctx context.Context, c *Comm, data, out []T, op Op[T], counts []int) error {
	mine, err := ReduceScatter(ctx, c, data, counts, op)
	if err != nil {
		return err
	}
	var z T
	size := int(unsafe.Sizeof(z))
	sizes := make([]int64, len(counts))
	for r, k := range counts {
		sizes[r] = int64(k * size)
	}
	blocks, err := c.allgatherKnown(ctx, AsBytes(mine), sizes)
	if err != nil {
		return err
	}
	at := 0
	for r, b := range blocks {
		if len(b) != counts[r]*size {
			return opErr("Allreduce", &RankError{Rank: c.group[r], Err: fmt.Errorf("%w: rank %d gathered a block of %d bytes, this rank expected %d", ErrMismatch, r, len(b), counts[r]*size)})
		}
		copy(AsBytes(out[at:at+counts[r]]), b)
		at += counts[r]
	}
	return nil
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

// allreducePlan is collective.PlanAllreduce for this communicator with
// ctx's algorithm (on loopback Auto keeps the tree), reusing the last
// plan when nothing changed.
func (c *Comm) allreducePlan(ctx context.Context, elems, elemSize int) collective.AllreducePlan {
	algo := algorithmFor(ctx, c.w.cfg.Allreduce, collective.AllreduceTree, collective.AllreduceRSAG)
	if (algo == "" || algo == collective.Auto) && c.loopback() {
		algo = collective.AllreduceTree // see Comm.loopback
	}
	p, _ := cached(c, &c.arKey, &c.arPlan, planKey(c, string(algo), []int64{int64(elems), int64(elemSize)}), func() (collective.AllreducePlan, error) {
		return collective.PlanAllreduce(c.model(), elems, elemSize, algo), nil
	})
	return p
}
