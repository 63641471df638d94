package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/hetcomm/hetcomm/transport"
)

// Wildcards for Recv, Irecv and Probe.
const (
	AnySource = -1
	AnyTag    = -1
)

// ProcNull is the rank that is no rank, as MPI_PROC_NULL: a send to it and
// a receive or probe from it complete at once, the receive with an empty
// message whose Status has Source ProcNull and Tag AnyTag. Ranks at the
// edge of a halo exchange use it instead of special cases.
const ProcNull = -2

// nullStatus is the status of a receive from ProcNull.
var nullStatus = Status{Source: ProcNull, Tag: AnyTag}

// MaxTag is the largest user tag.
const MaxTag = 1<<31 - 1

// Status describes a received (or probed) message.
type Status struct {
	Source int // sender's rank in the communicator
	Tag    int
	Len    int // payload bytes
}

// pending is the state of one send after its envelope went out.
type pending struct {
	rndv bool
	dst  int // world rank
	key  slotKey
	s    *slot
	data []byte
	ctx  uint32
	tag  int32
}

// startSend sends the envelope of a message: the whole message when it is
// eager, a rendezvous request otherwise. The order of envelopes is the
// order in which messages match receives.
func (c *Comm) startSend(ctx context.Context, dst int, ctxID uint32, tag int32, flags uint16, data []byte) (*pending, error) {
	return c.startSendMode(ctx, dst, ctxID, tag, flags, data, false, 0)
}

// startSendMode is startSend; forceEager sends the message eagerly whatever
// its size (the caller bounds it); useq is the message's sequence number,
// which a receive may ask for.
func (c *Comm) startSendMode(ctx context.Context, dst int, ctxID uint32, tag int32, flags uint16, data []byte, forceEager bool, useq uint64) (*pending, error) {
	w := c.w
	g := c.group[dst]
	if g == w.rank {
		cp := make([]byte, len(data))
		copy(cp, data)
		w.deliver(ctxID, &inMsg{src: g, tag: tag, flags: flags, data: cp, useq: useq})
		return &pending{}, nil
	}
	if lim := w.cfg.EagerLimit; forceEager || lim < 0 || len(data) <= lim {
		return &pending{}, w.sendMsg(ctx, g, transport.Header{Type: transport.MsgEager, Comm: ctxID, Tag: tag, Flags: flags, Seq: useq}, data)
	}
	if int64(len(data)) > c.maxMessage() {
		return nil, &ArgError{Op: "send", Arg: "data", Msg: fmt.Sprintf("%d bytes is above the %d-byte message limit", len(data), c.maxMessage())}
	}
	id := w.nextID.Add(1)
	p := &pending{rndv: true, dst: g, key: slotKey{slotCTS, g, ctxID, tag, id}, data: data, ctx: ctxID, tag: tag}
	p.s = w.getSlot(p.key, nil)
	var rts [16]byte
	binary.BigEndian.PutUint64(rts[:], uint64(len(data)))
	binary.BigEndian.PutUint64(rts[8:], useq)
	if err := w.sendMsg(ctx, g, transport.Header{Type: transport.MsgRTS, Comm: ctxID, Tag: tag, Flags: flags, Seq: id}, rts[:]); err != nil {
		w.dropSlot(p.key)
		return nil, err
	}
	return p, nil
}

// finishSend waits for the receiver's grant and sends the payload of a
// rendezvous message. watch, if set, fails the wait when that communicator
// breaks.
func (c *Comm) finishSend(ctx context.Context, p *pending, watch *Comm) error {
	if !p.rndv {
		return nil
	}
	w := c.w
	defer w.dropSlot(p.key)
	if err := w.await(ctx, p.s.ch, p.dst, watch); err != nil {
		return err
	}
	if p.s.err != nil {
		return p.s.err
	}
	return w.sendMsg(ctx, p.dst, transport.Header{Type: transport.MsgRndvData, Comm: p.ctx, Tag: p.tag, Seq: p.key.seq}, p.data)
}

func (c *Comm) maxMessage() int64 {
	if m := c.w.cfg.Transport.MaxMessage; m > 0 {
		return m
	}
	return transport.DefaultMaxMessage
}

// postRecv posts a receive; src is a communicator rank or AnySource.
func (c *Comm) postRecv(ctxID uint32, src int, tag int32) *recvReq {
	g := anySource
	if src != AnySource {
		g = c.group[src]
	}
	return c.w.post(ctxID, g, tag, -1, false)
}

// finishRecv waits for a posted receive and completes a rendezvous. With
// buf != nil the payload goes into buf; if it does not fit, strict reports
// ErrTruncated (with what fitted) and !strict uses a new slice instead.
// Without buf the payload goes into a new slice. It returns the payload and
// the matched message.
func (c *Comm) finishRecv(ctx context.Context, ctxID uint32, r *recvReq, buf []byte, strict bool, watch *Comm) ([]byte, *inMsg, error) {
	w := c.w
	peer := r.src
	if peer == anySource {
		watch = c
	}
	if err := w.await(ctx, r.done, peer, watch); err != nil {
		w.unpost(ctxID, r)
		return nil, nil, err
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	m := r.msg
	if buf != nil && !strict && int64(cap(buf)) < int64(msgLen(m)) {
		buf = nil
	}
	if buf != nil && !strict {
		buf = buf[:cap(buf)]
	}
	if !m.rndv {
		if len(m.data) > 0 && len(buf) >= len(m.data) && unsafe.SliceData(m.data) == unsafe.SliceData(buf) {
			return m.data, m, nil // it landed in place (recvReq.land)
		}
		if buf != nil {
			// The payload is copied out and nothing else holds it (a
			// probe that matched it reads only its length): recycle it.
			defer putPayload(m.data)
			if len(m.data) > len(buf) {
				n := copy(buf, m.data)
				return buf[:n], m, fmt.Errorf("%w: %d bytes arrived from rank %d, the buffer holds %d", ErrTruncated, len(m.data), c.index[m.src], len(buf))
			}
			return buf[:copy(buf, m.data)], m, nil
		}
		if m.data == nil {
			m.data = []byte{}
		}
		return m.data, m, nil
	}
	if m.size < 0 || m.size > c.maxMessage() {
		return nil, m, &RankError{Rank: m.src, Err: &failure{msg: fmt.Sprintf("announced a %d-byte message", m.size), cause: ErrProtocol}}
	}
	dst := buf
	truncated := buf != nil && int64(len(buf)) < m.size
	if buf == nil || truncated {
		dst = make([]byte, m.size)
	} else {
		dst = buf[:m.size]
	}
	k := slotKey{slotData, m.src, ctxID, m.tag, m.id}
	s := w.getSlot(k, dst)
	defer w.dropSlot(k)
	if err := w.sendMsg(ctx, m.src, transport.Header{Type: transport.MsgCTS, Comm: ctxID, Tag: m.tag, Seq: m.id}, nil); err != nil {
		return nil, m, err
	}
	if err := w.await(ctx, s.ch, m.src, watch); err != nil {
		return nil, m, err
	}
	if s.err != nil {
		return nil, m, s.err
	}
	if truncated {
		n := copy(buf, dst)
		return buf[:n], m, fmt.Errorf("%w: %d bytes arrived from rank %d, the buffer holds %d", ErrTruncated, m.size, c.index[m.src], len(buf))
	}
	return dst, m, nil
}

func (c *Comm) checkPeer(op, arg string, r int, wildcard bool) error {
	if wildcard && r == AnySource {
		return nil
	}
	if r == ProcNull && arg != "root" {
		return nil
	}
	if r < 0 || r >= len(c.group) {
		return &ArgError{Op: op, Arg: arg, Msg: fmt.Sprintf("rank %d out of range [0,%d)", r, len(c.group))}
	}
	return nil
}

// checkRecv checks the arguments of a receive or probe: an open
// communicator, src a rank of it, AnySource or ProcNull, and tag a valid
// tag or AnyTag.
func (c *Comm) checkRecv(op string, src, tag int) error {
	if err := c.check(op); err != nil {
		return err
	}
	if err := c.checkPeer(op, "src", src, true); err != nil {
		return err
	}
	return checkTag(op, tag, true)
}

func checkTag(op string, tag int, wildcard bool) error {
	if wildcard && tag == AnyTag {
		return nil
	}
	if tag < 0 || tag > MaxTag {
		return &ArgError{Op: op, Arg: "tag", Msg: fmt.Sprintf("%d: user tags are 0..%d", tag, MaxTag)}
	}
	return nil
}

func userTag(tag int) int32 {
	if tag == AnyTag {
		return anyTag
	}
	return int32(tag)
}

// Send sends data to rank dst with a tag. Small messages are sent eagerly;
// larger ones (above Config.EagerLimit) wait until the receiver has posted
// a matching receive, and then go straight into its buffer. Send returns
// when data may be reused.
func (c *Comm) Send(ctx context.Context, dst, tag int, data []byte) error {
	if err := c.check("send"); err != nil {
		return err
	}
	if err := c.checkPeer("send", "dst", dst, false); err != nil {
		return err
	}
	if err := checkTag("send", tag, false); err != nil {
		return err
	}
	if dst == ProcNull {
		return nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	p, err := c.startSend(ctx, dst, p2pCtx(c.id), int32(tag), 0, data)
	if err != nil {
		return opErr("send", err)
	}
	return opErr("send", c.finishSend(ctx, p, nil))
}

// Recv receives the next message from src (or AnySource) with tag (or
// AnyTag), in a new slice.
func (c *Comm) Recv(ctx context.Context, src, tag int) ([]byte, Status, error) {
	return c.recv(ctx, src, tag, nil)
}

// RecvInto receives into buf and returns the filled part. A message longer
// than buf is consumed and reported with ErrTruncated.
func (c *Comm) RecvInto(ctx context.Context, buf []byte, src, tag int) ([]byte, Status, error) {
	if buf == nil {
		buf = []byte{}
	}
	return c.recv(ctx, src, tag, buf)
}

func (c *Comm) recv(ctx context.Context, src, tag int, buf []byte) ([]byte, Status, error) {
	if err := c.checkRecv("recv", src, tag); err != nil {
		return nil, Status{}, err
	}
	if src == ProcNull {
		if buf != nil {
			return buf[:0], nullStatus, nil
		}
		return []byte{}, nullStatus, nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	r := c.postRecv(p2pCtx(c.id), src, userTag(tag))
	data, m, err := c.finishRecv(ctx, p2pCtx(c.id), r, buf, true, nil)
	return data, c.status(m, len(data)), opErr("recv", err)
}

func (c *Comm) status(m *inMsg, n int) Status {
	if m == nil {
		return Status{}
	}
	return Status{Source: c.index[m.src], Tag: int(m.tag), Len: n}
}

// Request is a non-blocking operation started by Isend or Irecv.
type Request struct {
	done chan struct{}
	data []byte
	st   Status
	err  error
}

// Wait waits for the operation and returns its status (for a receive) and
// error. Waiting on ctx only bounds this wait; the operation itself runs
// under the context it was started with.
func (r *Request) Wait(ctx context.Context) (Status, error) {
	select {
	case <-r.done:
		return r.st, r.err
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// Test reports whether the operation has completed, and if so its status
// and error.
func (r *Request) Test() (bool, Status, error) {
	select {
	case <-r.done:
		return true, r.st, r.err
	default:
		return false, Status{}, nil
	}
}

// Data returns the received payload of a completed Irecv.
func (r *Request) Data() []byte {
	select {
	case <-r.done:
		return r.data
	default:
		return nil
	}
}

func doneRequest(err error) *Request {
	r := &Request{done: make(chan struct{}), err: err}
	close(r.done)
	return r
}

// Isend starts sending data to dst. The message is ordered with respect to
// other sends from this goroutine as if Send had been called now; data
// must not be modified until the request completes.
func (c *Comm) Isend(ctx context.Context, dst, tag int, data []byte) *Request {
	if err := c.check("isend"); err != nil {
		return doneRequest(err)
	}
	if err := c.checkPeer("isend", "dst", dst, false); err != nil {
		return doneRequest(err)
	}
	if err := checkTag("isend", tag, false); err != nil {
		return doneRequest(err)
	}
	if dst == ProcNull {
		return doneRequest(nil)
	}
	p, err := c.startSend(ctx, dst, p2pCtx(c.id), int32(tag), 0, data)
	if err != nil || !p.rndv {
		return doneRequest(opErr("isend", err))
	}
	r := &Request{done: make(chan struct{})}
	c.w.wg.Add(1)
	go func() {
		defer c.w.wg.Done()
		defer close(r.done)
		ctx, cancel := c.withTimeout(ctx)
		defer cancel()
		r.err = opErr("isend", c.finishSend(ctx, p, nil))
	}()
	return r
}

// Irecv starts receiving a message from src (or AnySource) with tag (or
// AnyTag). It is matched, in order, as if Recv had been called now.
func (c *Comm) Irecv(ctx context.Context, src, tag int) *Request {
	if err := c.checkRecv("irecv", src, tag); err != nil {
		return doneRequest(err)
	}
	if src == ProcNull {
		r := doneRequest(nil)
		r.data, r.st = []byte{}, nullStatus
		return r
	}
	rr := c.postRecv(p2pCtx(c.id), src, userTag(tag))
	r := &Request{done: make(chan struct{})}
	c.w.wg.Add(1)
	go func() {
		defer c.w.wg.Done()
		defer close(r.done)
		ctx, cancel := c.withTimeout(ctx)
		defer cancel()
		data, m, err := c.finishRecv(ctx, p2pCtx(c.id), rr, nil, true, nil)
		r.data, r.st, r.err = data, c.status(m, len(data)), opErr("irecv", err)
	}()
	return r
}

// Sendrecv sends to dst and receives from src at once, so that a ring or
// a halo exchange cannot deadlock.
func (c *Comm) Sendrecv(ctx context.Context, send []byte, dst, sendTag int, src, recvTag int) ([]byte, Status, error) {
	return c.sendrecv(ctx, send, dst, sendTag, nil, src, recvTag)
}

// SendrecvInto is Sendrecv receiving into buf, as RecvInto.
func (c *Comm) SendrecvInto(ctx context.Context, send []byte, dst, sendTag int, buf []byte, src, recvTag int) ([]byte, Status, error) {
	if buf == nil {
		buf = []byte{}
	}
	return c.sendrecv(ctx, send, dst, sendTag, buf, src, recvTag)
}

func (c *Comm) sendrecv(ctx context.Context, send []byte, dst, sendTag int, buf []byte, src, recvTag int) ([]byte, Status, error) {
	// Both halves' arguments are checked before either starts, so that a
	// bad destination cannot leave the receive waiting.
	for _, err := range []error{
		c.check("sendrecv"),
		c.checkPeer("sendrecv", "dst", dst, false),
		checkTag("sendrecv", sendTag, false),
		c.checkRecv("sendrecv", src, recvTag),
	} {
		if err != nil {
			return nil, Status{}, err
		}
	}
	sr := c.Isend(ctx, dst, sendTag, send)
	data, st, rerr := c.recv(ctx, src, recvTag, buf)
	_, serr := sr.Wait(context.Background())
	if rerr != nil {
		return nil, st, rerr
	}
	return data, st, serr
}

// Probe waits until a message from src (or AnySource) with tag (or AnyTag)
// can be received and returns its status without receiving it.
func (c *Comm) Probe(ctx context.Context, src, tag int) (Status, error) {
	if err := c.checkRecv("probe", src, tag); err != nil {
		return Status{}, err
	}
	if src == ProcNull {
		return nullStatus, nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	g := anySource
	if src != AnySource {
		g = c.group[src]
	}
	r := c.w.post(p2pCtx(c.id), g, userTag(tag), -1, true)
	var watch *Comm
	if g == anySource {
		watch = c
	}
	if err := c.w.await(ctx, r.done, g, watch); err != nil {
		c.w.unpost(p2pCtx(c.id), r)
		return Status{}, opErr("probe", err)
	}
	if r.err != nil {
		return Status{}, opErr("probe", r.err)
	}
	return c.status(r.msg, msgLen(r.msg)), nil
}

// Iprobe reports whether a message from src (or AnySource) with tag (or
// AnyTag) can be received now, and its status.
func (c *Comm) Iprobe(src, tag int) (bool, Status, error) {
	if err := c.checkRecv("iprobe", src, tag); err != nil {
		return false, Status{}, err
	}
	if src == ProcNull {
		return true, nullStatus, nil
	}
	g := anySource
	if src != AnySource {
		g = c.group[src]
	}
	probe := &recvReq{src: g, tag: userTag(tag), useq: -1}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.queue(p2pCtx(c.id)).unexpected {
		if matches(probe, m) {
			return true, c.status(m, msgLen(m)), nil
		}
	}
	return false, Status{}, nil
}

func msgLen(m *inMsg) int {
	if m.rndv {
		return int(m.size)
	}
	return len(m.data)
}

// now returns the time since the world's epoch, in seconds, for timelines.
func (w *world) now() float64 { return time.Since(w.epoch).Seconds() }
