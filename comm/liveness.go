package comm

// Liveness: the control messages between ranks, the failure of a peer
// (markGone fails everything that waits on it), heartbeats, and leaving
// the world gracefully or not.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// control is a msgpack control message between ranks.
type control struct {
	Kind   string `msgpack:"kind"`
	Rank   int    `msgpack:"rank,omitempty"`
	Comm   uint32 `msgpack:"comm,omitempty"`
	Reason string `msgpack:"reason,omitempty"`
	// Port and Nonce ("pulse"): where the sender receives pulses, on
	// the IP address its link to the receiver has, and the nonce they
	// must carry (transport.Pulses).
	Port  int    `msgpack:"port,omitempty"`
	Nonce []byte `msgpack:"nonce,omitempty"`
	// Tag, Op and Root ("call"): the collective call the sender waits
	// in, its collective and its root plus one (0: not rooted).
	Tag  int32  `msgpack:"tag,omitempty"`
	Op   uint16 `msgpack:"op,omitempty"`
	Root int    `msgpack:"root,omitempty"`
}

func (w *world) protocolError(peer int, msg string) {
	w.log.Warn("comm: protocol error", "peer", peer, "err", msg)
	w.markFailed(peer, &failure{msg: "protocol error: " + msg, cause: ErrProtocol}, true)
}

// linkDown handles the end of a link.
func (w *world) linkDown(peer int, err error) {
	w.mu.Lock()
	closing, graceful := w.closing, w.closeRecv[peer]
	w.mu.Unlock()
	if closing || graceful {
		w.markClosed(peer)
		return
	}
	// What this peer reported before its link ended comes first: it may
	// have left because of that failure (reported).
	w.mu.Lock()
	var pending []chan struct{}
	for ch := range w.reports {
		pending = append(pending, ch)
	}
	w.mu.Unlock()
	for _, ch := range pending {
		<-ch // bounded by reportWait
	}
	w.markFailed(peer, &failure{msg: linkLost, cause: err}, true)
}

// linkLost is the reason a failure noticed by a link's end starts with.
const linkLost = "link lost (the process died or the network failed)"

func (w *world) onControl(peer int, c control) {
	switch c.Kind {
	case "failed":
		switch {
		case c.Rank == peer:
			// The rank reports its own failure on its way out.
			w.markFailed(peer, &failure{msg: "failed: " + c.Reason}, false)
		case c.Rank >= 0 && c.Rank < w.size && c.Rank != w.rank:
			why := &failure{msg: fmt.Sprintf("reported failed by rank %d: %s", peer, c.Reason)}
			if strings.HasPrefix(c.Reason, linkLost) {
				w.reported(peer, c.Rank, why)
			} else {
				w.markFailed(c.Rank, why, true)
			}
		}
	case "pulse":
		w.setPulsePeer(peer, c)
	case "call":
		if target := w.commByID(c.Comm); target != nil {
			target.checkCall(peer, c)
		}
	case "abort", "concurrent":
		cause := ErrMismatch
		if c.Kind == "concurrent" {
			cause = ErrConcurrent
		}
		if target := w.commByID(c.Comm); target != nil {
			target.breakWith(&RankError{Rank: peer, Err: fmt.Errorf("%w: %s", cause, c.Reason)})
		}
	default:
		w.log.Warn("comm: unknown control message", "peer", peer, "kind", c.Kind)
	}
}

// commByID returns this rank's communicator with that id, or nil.
func (w *world) commByID(id uint32) *Comm {
	w.mu.Lock()
	defer w.mu.Unlock()
	for x := range w.comms {
		if x.id == id {
			return x
		}
	}
	return nil
}

// A report of a failure is passed on (markFailed with notify) before
// anything here fails because of it: this rank may exit on that error,
// and the ranks that see its links close before the reporter's notice
// reaches them would blame it. Each rank passes a failure on once.

// reported takes another rank's report (from reporter) that rank x failed
// because its link to the reporter was lost. x may have died because it
// noticed another rank's failure: its notice saying so is then on its
// link to this rank, ahead of the link's end. So while x's link to this
// rank is up, the report waits (up to reportWait) for it to end; a stopped
// x's link does not end, and x is failed after the wait. A link that ends
// meanwhile (linkDown) waits for the pending reports first.
//
// Once x's link ended, the report still comes after the reports that x
// sent before its end and those this rank was given before it (each
// reporter sends its notices in the order it noticed the failures): x's
// notice that rank y's link was lost is itself a pending report, waiting
// for y's link, and if the report about x were recorded first, x would be
// blamed for y's failure.
func (w *world) reported(reporter, x int, why error) {
	done := make(chan struct{})
	w.mu.Lock()
	w.reportSeq++
	seq := w.reportSeq
	w.reports[done] = report{from: reporter, about: x, seq: seq}
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.reports, done)
			w.mu.Unlock()
			close(done)
		}()
		// Phase one: x's link (up to reportWait).
		start := time.Now()
		t := time.NewTimer(reportWait)
		defer t.Stop()
		select {
		case <-w.linkEnd[x]:
		case <-t.C:
		case <-w.failCh[x]:
			return
		case <-w.quit:
			return
		}
		// Phase two: the reports that come first, until twice reportWait
		// from the start. Each of them is done by then (its phase one
		// took at most reportWait, and it started no later than this
		// one, or came from x before x's link ended), unless it waits for
		// this one in turn (two ranks that reported each other). The
		// reports about the reporter are not waited for: it was alive when
		// it sent this report, so their failure came after this one.
		t.Reset(2*reportWait - time.Since(start))
		w.mu.Lock()
		var first []chan struct{}
		for ch, r := range w.reports {
			if ch != done && r.about != reporter && (r.seq < seq || r.from == x) {
				first = append(first, ch)
			}
		}
		w.mu.Unlock()
	wait:
		for _, ch := range first {
			select {
			case <-ch:
			case <-t.C:
				break wait
			case <-w.failCh[x]:
				return
			case <-w.quit:
				return
			}
		}
		w.markFailed(x, why, true)
	}()
}

// A report is a failure another rank reported, not yet recorded here.
type report struct {
	from, about int    // the reporter, and the rank it reported failed
	seq         uint64 // the order in which this rank was given the reports
}

// reportWait bounds how long a reported failure waits for the failed
// rank's own link to end, and then how long it waits for the reports
// that come first (reported).
const reportWait = 200 * time.Millisecond

func (w *world) onClose(peer int) {
	w.mu.Lock()
	w.closeRecv[peer] = true
	w.mu.Unlock()
	w.markClosed(peer)
}

// markFailed records that peer is gone and fails everything that waits
// on it. With notify, the other ranks are told. A graceful close (the peer
// said goodbye) fails only what waits on that peer itself; a failure also
// fails wildcard receives and breaks every communicator holding the peer.
func (w *world) markFailed(peer int, why error, notify bool) {
	w.markGone(peer, why, notify, false)
}

// markClosed records a peer's graceful goodbye.
func (w *world) markClosed(peer int) {
	w.markGone(peer, &failure{msg: "closed its communicator"}, false, true)
}

func (w *world) markGone(peer int, why error, notify, graceful bool) {
	w.mu.Lock()
	if w.failing[peer] || w.failed[peer] != nil {
		w.mu.Unlock()
		return
	}
	w.failing[peer] = true
	closing := w.closing
	prev, mine := w.failOrder, make(chan struct{})
	w.failOrder = mine
	w.mu.Unlock()
	defer close(mine)
	if notify && !closing {
		// Tell the other ranks before anything that waits on the peer
		// learns of its failure: the error may reach user code that
		// exits at once (log.Fatal), and a peer that saw this rank's
		// links close before the notice would blame this rank. Bounded
		// by noticeWait; until then the peer counts as alive here.
		w.log.Warn("comm: rank failed", "rank", peer, "reason", why.Error())
		others := make([]int, 0, w.size)
		for p := range w.size {
			if p != peer {
				others = append(others, p)
			}
		}
		w.tellWait(others, control{Kind: "failed", Rank: peer, Reason: why.Error()}, noticeWait)
	}
	if prev != nil {
		<-prev // bounded: the markGone before this one waits at most noticeWait
	}
	w.mu.Lock()
	w.failed[peer] = why
	w.graceful[peer] = graceful
	close(w.failCh[peer])
	rerr := &RankError{Op: "", Rank: peer, Err: why}
	// On a communicator an earlier failure broke, what fails now fails
	// with that earlier failure: a rank that noticed it may have left
	// since, and this failure may be that rank's.
	errOn := func(c *Comm) error {
		if c != nil {
			if e := c.brokenErr(); e != nil {
				return e
			}
		}
		return rerr
	}
	for ctxID, q := range w.queues {
		c := w.commOfCtx(ctxID)
		// Receives and probes from the peer fail; from any source too
		// when the peer failed and belongs to the communicator.
		fail := func(list []*recvReq) []*recvReq {
			keep := list[:0]
			for _, r := range list {
				if r.src == peer || !graceful && r.src == anySource && c != nil && c.hasWorldRank(peer) {
					r.err = errOn(c)
					close(r.done)
					continue
				}
				keep = append(keep, r)
			}
			return keep
		}
		q.posted, q.probes = fail(q.posted), fail(q.probes)
	}
	for k, s := range w.slots {
		if k.peer == peer && !s.done {
			s.err, s.done = errOn(w.commOfCtx(k.ctx)), true
			close(s.ch)
		}
	}
	if !graceful {
		for c := range w.comms {
			if c.hasWorldRank(peer) {
				c.breakWith(rerr)
			}
		}
	}
	w.mu.Unlock()
	if !graceful && peer < len(w.links) && w.links[peer] != nil {
		// Close the failed peer's link, so that a write blocked on a full
		// socket or a read waiting for the rest of a message returns.
		l := w.links[peer]
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			l.Close()
		}()
	}
}

// noticeWait bounds how long markGone waits for its "failed" notices to
// be handed to the other ranks' links before it fails what waits on the
// failed peer. Only a failure waits; a link busy with a large message
// may hold its notice longer (it still goes, in the background).
const noticeWait = 200 * time.Millisecond

// failFatal is this rank's way out when its process is about to die (a
// panic): it tells every live peer that this rank failed, and why, waiting
// up to a second for the notices to leave, so that the peers blame this
// rank with the right cause and not the goodbye of a graceful close; then
// it shuts the world down.
func (w *world) failFatal(why string) {
	w.log.Error("comm: this rank is failing", "rank", w.rank, "reason", why)
	// From now on links that end are not failures of their peers: the
	// peers close them because this rank failed.
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	msg := control{Kind: "failed", Rank: w.rank, Reason: why}
	var wg sync.WaitGroup
	for p, l := range w.links {
		if l == nil || p == w.rank || w.isFailed(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			transport.SendControl(ctx, l, transport.Header{}, msg)
		}()
	}
	wg.Wait()
	w.shutdown()
}

// tell sends a control message to the ranks in to (world ranks), each in
// a goroutine of its own with a second to go out; it skips this rank and
// the ranks that failed.
func (w *world) tell(to []int, msg control) {
	w.tellWait(to, msg, 0)
}

// tellWait is tell, then waits up to wait until every send has returned
// (the message is handed to its link, or the link failed).
func (w *world) tellWait(to []int, msg control, wait time.Duration) {
	var sent sync.WaitGroup
	for _, p := range to {
		l := w.links[p]
		if l == nil || p == w.rank || w.isFailed(p) {
			continue
		}
		w.wg.Add(1)
		sent.Add(1)
		go func() {
			defer w.wg.Done()
			defer sent.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			transport.SendControl(ctx, l, transport.Header{}, msg)
		}()
	}
	if wait <= 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		sent.Wait()
		close(done)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// failedErrLocked is the error of an operation on context ctxID that
// needs peer, which failed (w.mu held): the peer's failure, or, if an
// earlier failure broke the communicator, that one (the peer may have
// left because of it).
func (w *world) failedErrLocked(ctxID uint32, peer int) error {
	if c := w.commOfCtx(ctxID); c != nil {
		if e := c.brokenErr(); e != nil {
			return e
		}
	}
	return &RankError{Rank: peer, Err: w.failed[peer]}
}

func (w *world) isFailed(peer int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed[peer] != nil
}

// commOfCtx finds the communicator of a context id (w.mu held).
func (w *world) commOfCtx(ctxID uint32) *Comm {
	for c := range w.comms {
		if c.id == ctxID>>1 {
			return c
		}
	}
	return nil
}

// Failure detection (docs/liveness.md). A peer is failed when nothing
// of its own reached this rank for FailAfter: no message, no heartbeat,
// no byte of a message under way and no pulse. Pulses are small
// authenticated datagrams on a socket of their own (transport.Pulses),
// which nothing queues in front of: a live peer is heard every
// Heartbeat/pulsesPerHeartbeat even while its link is
// stalled behind a large message on a congested TCP flow, and a stopped
// or hung one (whose kernel may still acknowledge and deliver what its
// sockets hold) is not heard at all. Where no pulse ever arrived from a
// peer (UDP filtered between them; mem links), a message under way from
// it may go without a byte for stallFactor times FailAfter, as a
// congested TCP flow whose retransmission timeouts double (1, 2, 4 s...)
// can, while its sender's heartbeats wait behind it on the same stream.

// pulsesPerHeartbeat: the heartbeat loop ticks this often per Heartbeat;
// at every tick it sends every peer a pulse and checks for silent peers.
// Four pulses a Heartbeat make a run of lost pulses too unlikely to fail
// a live peer: with 20% of datagrams lost, all 20 pulses of FailAfter
// are lost with probability 1e-14 (5 in a row, with one a Heartbeat:
// 2.5e-4, while an idle pair's TCP link can be in retransmission
// back-off for as long: with one a Heartbeat to idle peers, a live rank
// was failed once on a switch8 testbed losing 19% of packets, probably
// so).
const pulsesPerHeartbeat = 4

// stallFactor: where no pulse arrives from a peer, a large message from
// it under way may go without a byte this many times FailAfter before
// its sender counts as silent (20 s by default).
const stallFactor = 4

// pulseSecret derives the pulses' secret from the job secret (which may
// be shorter than transport.MinSecretLen).
func pulseSecret(secret []byte) []byte {
	sum := sha256.Sum256(append([]byte("hetcomm pulse secret\x00"), secret...))
	return sum[:]
}

// startPulses opens the pulse socket, on the IP address of this rank's
// links if they all have the same one, else (several rails, several
// NICs) on every address; on mem links (no IP address) there are none.
// Start calls it before the read loops, which hand the peers' "pulse"
// messages to setPulsePeer.
func (w *world) startPulses() {
	if w.kind == transport.KindMem {
		return
	}
	var ip net.IP
	for _, l := range w.links {
		if l == nil {
			continue
		}
		ips := transport.AddrIPs(l.LocalAddr())
		if len(ips) == 0 {
			return
		}
		for _, a := range ips {
			if ip == nil {
				ip = a
			} else if !ip.Equal(a) {
				ip = net.IPv6unspecified
			}
		}
	}
	if ip == nil {
		return
	}
	bind := net.JoinHostPort(ip.String(), "0")
	if ip.IsUnspecified() {
		bind = ":0"
	}
	p, err := transport.ListenPulses(bind, transport.PulseConfig{JobID: w.job, Rank: w.rank, Size: w.size,
		Secret: pulseSecret(w.boot.Secret), OnPulse: w.onPulse})
	if err != nil {
		w.log.Warn("comm: no pulses; a peer in the middle of a large message gets longer to be declared silent",
			"err", err, "limit", stallFactor*w.cfg.FailAfter)
		return
	}
	w.pulses = p
}

// tellPulseAddr tells every peer where this rank's pulses go.
func (w *world) tellPulseAddr() {
	if w.pulses == nil {
		return
	}
	msg := control{Kind: "pulse", Port: w.pulses.Addr().Port, Nonce: w.pulses.Nonce()}
	w.tell(identity(w.size), msg)
}

// setPulsePeer takes a peer's "pulse" message: its pulses go to the
// port it names on the IP addresses this rank's link to it reaches (one
// per rail), in turn.
func (w *world) setPulsePeer(peer int, c control) {
	if w.pulses == nil {
		return
	}
	var to []*net.UDPAddr
	for _, ip := range transport.AddrIPs(w.links[peer].RemoteAddr()) {
		if !ip.IsUnspecified() && c.Port > 0 && c.Port <= 65535 {
			to = append(to, &net.UDPAddr{IP: ip, Port: c.Port})
		}
	}
	if len(to) == 0 {
		w.log.Warn("comm: cannot send pulses to a peer", "peer", peer, "addr", w.links[peer].RemoteAddr(), "port", c.Port)
		return
	}
	if err := w.pulses.SetPeer(peer, to, c.Nonce); err != nil {
		w.log.Warn("comm: cannot send pulses to a peer", "peer", peer, "err", err)
	}
}

// onPulse is the pulse socket's report of a valid pulse from src.
func (w *world) onPulse(src int) {
	now := time.Now().UnixNano()
	w.lastPulse[src].Store(now)
	w.pulseSeen[src].Store(true)
	w.started[src].Store(true)
	heard(&w.lastRecv[src], now)
}

// heard moves *last forward to t (unix nanos), never back.
func heard(last *atomic.Int64, t int64) {
	for {
		old := last.Load()
		if t <= old || last.CompareAndSwap(old, t) {
			return
		}
	}
}

// heartbeatLoop keeps idle links alive, sends pulses and declares silent
// peers failed. It only ever waits pulseWriteWait for a pulse to leave.
func (w *world) heartbeatLoop() {
	defer w.wg.Done()
	t := time.NewTicker(max(w.cfg.Heartbeat/pulsesPerHeartbeat, time.Microsecond))
	defer t.Stop()
	for tick := 0; ; tick++ {
		var now time.Time
		select {
		case <-w.quit:
			return
		case now = <-t.C:
		}
		full := tick%pulsesPerHeartbeat == 0
		if w.pulses != nil {
			_ = w.pulses.SetWriteDeadline(now.Add(pulseWriteWait))
		}
		for p, l := range w.links {
			if l == nil || w.isFailed(p) {
				continue
			}
			if full && now.UnixNano()-w.lastSend[p].Load() >= int64(w.cfg.Heartbeat) {
				w.wg.Add(1)
				go func(p int, l transport.Link) {
					defer w.wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Heartbeat)
					defer cancel()
					if l.Send(ctx, transport.Header{Type: transport.MsgHeartbeat}, nil) == nil {
						w.lastSend[p].Store(time.Now().UnixNano())
					}
				}(p, l)
			}
			if w.pulses != nil {
				_ = w.pulses.Send(p) // a lost pulse is followed by the next
			}
			if limit := w.silent(p, l, now); limit > 0 {
				w.log.Warn("comm: peer silent", "peer", p, "limit", limit,
					"heard", now.Sub(time.Unix(0, w.lastRecv[p].Load())),
					"pulse", w.sincePulse(p, now), "midMessage", w.busySince[p].Load() != 0)
				w.markFailed(p, &failure{msg: fmt.Sprintf("silent for more than %v", limit)}, true)
			}
		}
	}
}

// pulseWriteWait bounds a tick's pulses' wait for room in the socket's
// buffer: a pulse that cannot leave at once is lost, another follows.
const pulseWriteWait = 50 * time.Millisecond

// sincePulse describes, for the log, how long ago the last pulse from
// peer came.
func (w *world) sincePulse(peer int, now time.Time) string {
	switch {
	case w.pulses == nil:
		return "no pulses here"
	case !w.pulseSeen[peer].Load():
		return "none ever"
	}
	return now.Sub(time.Unix(0, w.lastPulse[peer].Load())).String()
}

// silent reports whether peer is silent, and after how long a silence:
// nothing of its own (message, heartbeat, pulse, byte of a large message
// as it arrives on links that count them: transport.Progress) came for
// longer than FailAfter; or, while a message from it is under way and
// no pulse ever came from it, no byte for stallFactor times that. On a
// link that does not count (mem, which delivers whole messages) a
// message under way counts as life. A peer that has not been heard from
// at all since this rank started may still be connecting to the others
// (a lost SYN is retried after 1, 3, 7 s): its bound is the start-up
// timeout. Only the heartbeat loop calls it.
func (w *world) silent(peer int, l transport.Link, now time.Time) (limit time.Duration) {
	n, counts := transport.Progress(l)
	if counts && n != w.lastProgress[peer] {
		w.lastProgress[peer] = n
		heard(&w.lastRecv[peer], now.UnixNano())
		return 0
	}
	limit = w.cfg.FailAfter
	if !w.started[peer].Load() && w.boot != nil {
		limit = max(limit, w.boot.Timeout)
	}
	if w.busySince[peer].Load() != 0 {
		if !counts {
			return 0
		}
		if !w.pulseSeen[peer].Load() {
			limit = max(limit, stallFactor*w.cfg.FailAfter)
		}
	}
	if quiet := time.Duration(now.UnixNano() - w.lastRecv[peer].Load()); quiet > limit {
		return limit
	}
	return 0
}

// close leaves the world gracefully: it tells every peer, waits (up to the
// bootstrap timeout) until every peer has said the same or failed, then
// closes the links and stops every goroutine.
func (w *world) close() error {
	w.closeOnce.Do(func() {
		w.stopRefresh()
		if w.size > 1 && w.links != nil {
			w.mu.Lock()
			w.closing = true
			w.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), w.boot.Timeout)
			var wg sync.WaitGroup
			for p, l := range w.links {
				if l == nil || w.isFailed(p) {
					continue
				}
				wg.Add(1)
				go func(l transport.Link) {
					defer wg.Done()
					l.Send(ctx, transport.Header{Type: transport.MsgClose}, nil)
				}(l)
			}
			wg.Wait()
			for p := range w.links {
				if p == w.rank {
					continue
				}
				select {
				case <-w.failCh[p]:
				case <-ctx.Done():
				}
			}
			cancel()
		}
		w.shutdown()
	})
	return w.closeErr
}

// shutdown closes everything without ceremony and waits for the
// goroutines.
func (w *world) shutdown() {
	w.stopRefresh()
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	for _, l := range w.listeners {
		l.Close()
	}
	for _, l := range w.links {
		if l != nil {
			l.Close()
		}
	}
	w.wg.Wait()
	if w.pulses != nil {
		w.pulses.Close()
	}
	// Fail whatever still waits.
	w.mu.Lock()
	for _, q := range w.queues {
		for _, r := range append(q.posted, q.probes...) {
			r.err = ErrClosed
			close(r.done)
		}
		q.posted, q.probes = nil, nil
	}
	for _, s := range w.slots {
		if !s.done {
			s.err, s.done = ErrClosed, true
			close(s.ch)
		}
	}
	w.mu.Unlock()
}
