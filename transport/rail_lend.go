// Receive lending: a rail whose reader goroutine has handed a Recv caller a
// message is lent to the Recv callers, who then read it themselves; this
// file holds the lending, the callers' reads and giving the rail back.

package transport

import "context"

// stoppableLink is a link whose wait for the next frame can be abandoned
// without losing framing (the stream links: TCP, TLS and reliable UDP;
// mem links). A RailSet lends such a rail to its Recv callers, which then
// read it themselves (see readLent).
type stoppableLink interface {
	// recvStoppable is Recv(context.Background()), except that stopRecv,
	// called by another goroutine while it waits for a frame to begin,
	// makes it return errRecvStopped having consumed nothing. Once a
	// frame has begun, it is read whole. A stopRecv that finds no
	// recvStoppable waiting is kept: a later recvStoppable that has no
	// frame begun returns errRecvStopped at once, so callers must take
	// errRecvStopped for a spurious wake-up.
	recvStoppable() (Message, error)
	// stopRecv does not block: a RailSet calls it with its mu held (it
	// takes the link's own locks only).
	stopRecv()
}

// Reading. Each rail has a reader goroutine (readLoop), which reads its
// frames and hands the messages they complete to the Recv callers. A
// hand-off from one goroutine to another costs more than the rest of a
// small message's way through the rail layer: with an idle CPU, waking
// the Recv caller makes the runtime wake a second thread too. So once the
// reader goroutine of a rail has handed a waiting Recv caller a message,
// it lends the rail to the Recv callers and waits: from then on, a Recv
// caller with nothing to return reads that rail itself (readLent), as it
// would a plain link. Only links whose wait for a frame can be stopped
// (stoppableLink) are lent, at most one rail at a time, and never while a
// part's data frame is due (the callers read headers and inline parts,
// never a large part's bytes, so a Recv's ctx is obeyed within one small
// frame). A Recv caller reading the lent rail is stopped when a message
// becomes ready through another rail (advanceLocked; this also covers
// another rail being lent instead) or its ctx ends, and fails when the
// rail goes down or the RailSet closes (the link is closed). While nobody
// calls Recv, the lent rail is not read, as a plain link is not; anyone
// else who needs its frames gets the rail back to its reader goroutine
// (unlendLocked): a Send that waits for acknowledgements or room, a part
// header announcing bytes to follow, the last Recv caller leaving while a
// Send waits, and the tick if nobody read the rail for a whole tick
// (tickLocked), so that a peer waiting for an acknowledgement, or a rail
// that failed, is never left unattended for long.

// readLent reads and handles one frame of the lent rail r in the Recv
// caller's goroutine. mu is held on entry and exit, not in between. The
// RailSet is not closed on entry (Close waits for readLent to return).
func (rs *RailSet) readLent(ctx context.Context, r *rail) {
	r.callerIn = true
	rs.lentReads++
	rs.wg.Add(1)
	defer rs.wg.Done()
	rs.mu.Unlock()
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, r.sl.stopRecv)
	}
	m, err := r.sl.recvStoppable()
	if stop != nil {
		stop()
	}
	if err == nil {
		err = rs.onFrame(r, &m)
	}
	if err != nil && err != errRecvStopped {
		rs.readFailed(r, err)
	}
	rs.mu.Lock()
	r.callerIn = false
	switch {
	case !r.alive:
		rs.readerGoneLocked(r)
	case !r.lent:
		signal(r.lendWake) // another rail was lent meanwhile
	case r.awaitData:
		// The part's bytes follow: the reader goroutine reads them.
		rs.unlendLocked()
	}
}

// leaveRecvLocked is called when a Recv caller returns: if the lent rail is
// left unread while someone waits for progress, they get it.
func (rs *RailSet) leaveRecvLocked() {
	r := rs.lent
	if r == nil || r.callerIn {
		return
	}
	switch {
	case rs.sendWait > 0:
		rs.unlendLocked()
	case rs.recvCallers > 0:
		rs.recvChangedLocked()
	default:
		rs.watchLocked() // the rail goes back to its reader if unread for long
	}
}

// lendLocked lends rail r to the Recv callers, if it can be: its reader
// goroutine has just handed a Recv caller a message. If another rail is
// lent, r takes its place once the messages keep coming on r.
func (rs *RailSet) lendLocked(r *rail) {
	if r.sl == nil || !r.alive || r.awaitData || rs.sendWait > 0 {
		return
	}
	if l := rs.lent; l != nil {
		if rs.lendMisses++; rs.lendMisses < railLendMisses {
			return
		}
		// l's reader goroutine resumes once the Recv caller reading it,
		// if any, is done with its frame (advanceLocked, our caller, has
		// stopped that caller's wait for one).
		l.lent = false
		if !l.callerIn {
			signal(l.lendWake)
		}
	}
	r.lent, rs.lent, rs.lendMisses = true, r, 0
	rs.lentReads++ // a lease starts (see tickLocked)
}

// unlendLocked gives the lent rail back to its reader goroutine, unless a
// Recv caller is reading it (readLent does, if needed, when it is done).
func (rs *RailSet) unlendLocked() {
	r := rs.lent
	if r == nil || r.callerIn {
		return
	}
	r.lent, rs.lent = false, nil
	signal(r.lendWake)
}

// signal wakes the goroutine that waits on ch (of capacity 1).
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
