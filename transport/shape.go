package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"
)

// ShapeConfig describes an emulated link: its rate, its one-way delay and
// its loss. The zero value is an unshaped link.
//
// Loss on a reliable link: the link still delivers every message, intact
// and in order, as TCP would; a lost segment costs what repairing it costs.
// Each message is cut into segments of MTU bytes; each segment is lost with
// probability Loss, drawn from a generator seeded with Seed, so a run
// repeats exactly. A message with k lost segments occupies the link for k
// more segment times (the retransmissions) and arrives RTO later (one loss
// recovery round), and, the link being ordered, so does everything behind
// it.
type ShapeConfig struct {
	// Rate is the link's rate in bytes per second; 0 means unlimited.
	Rate float64
	// Delay is the one-way propagation delay.
	Delay time.Duration
	// Loss is the probability, in [0, 1), that a segment is lost.
	Loss float64
	// Seed seeds the loss draws.
	Seed uint64
	// MTU is the segment size for loss draws. 0 means 1500.
	MTU int
	// RTO is the extra delay of a message that lost segments. 0 means one
	// round trip, 2*Delay, and at least 1 ms.
	RTO time.Duration
	// Window bounds the bytes queued on the link, sent but not yet
	// delivered; Send blocks beyond it. 0 means DefaultSendWindow, or one
	// bandwidth-delay product if that is larger.
	Window int
}

func (s ShapeConfig) validate() error {
	if s.Rate < 0 || s.Delay < 0 || s.Loss < 0 || s.Loss >= 1 || s.MTU < 0 || s.RTO < 0 || s.Window < 0 {
		return fmt.Errorf("%w: shape %+v", ErrBadConfig, s)
	}
	return nil
}

func (s ShapeConfig) isZero() bool { return s.Rate == 0 && s.Delay == 0 && s.Loss == 0 }

func (s ShapeConfig) window() int {
	if s.Window > 0 {
		return s.Window
	}
	w := DefaultSendWindow
	if s.Rate > 0 {
		// a round trip's worth of bytes, so a delayed link can stay full
		if bdp := int(s.Rate * 2 * s.Delay.Seconds()); bdp > w {
			w = bdp
		}
	}
	return w
}

// pacer computes when each message leaves and arrives on a shaped link.
// Messages are serialised in the order they are scheduled: concurrent
// messages share the rate.
type pacer struct {
	mu         sync.Mutex
	s          ShapeConfig
	rng        *rand.Rand
	busyUntil  time.Time
	lastArrive time.Time
}

func newPacer(s ShapeConfig, stream uint64) *pacer {
	if s.MTU == 0 {
		s.MTU = 1500
	}
	if s.RTO == 0 {
		s.RTO = max(2*s.Delay, time.Millisecond)
	}
	return &pacer{s: s, rng: rand.New(rand.NewPCG(s.Seed, stream))}
}

func (p *pacer) txTime(n int) time.Duration {
	if p.s.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(n) / p.s.Rate * float64(time.Second))
}

// schedule reserves the link for a message of n payload bytes sent at now.
// It returns when its last byte leaves (depart) and when it arrives.
func (p *pacer) schedule(now time.Time, n int) (depart, arrive time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := n + HeaderSize
	lost := 0
	if p.s.Loss > 0 {
		for seg := 0; seg < size; seg += p.s.MTU {
			if p.rng.Float64() < p.s.Loss {
				lost++
			}
		}
	}
	start := now
	if p.busyUntil.After(start) {
		start = p.busyUntil
	}
	depart = start.Add(p.txTime(size + lost*min(p.s.MTU, size)))
	p.busyUntil = depart
	arrive = depart.Add(p.s.Delay)
	if lost > 0 {
		arrive = arrive.Add(p.s.RTO)
	}
	if arrive.Before(p.lastArrive) {
		arrive = p.lastArrive // ordered delivery: no overtaking
	}
	p.lastArrive = arrive
	return depart, arrive
}

// sleepUntil waits until t, ctx's end or quit. It returns nil at t.
func sleepUntil(ctx context.Context, t time.Time, quit <-chan struct{}) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-quit:
		return ErrClosed
	}
}

// spinWindow is how much of an emulated delay is spun rather than slept:
// when a process is idle, Go's timers fire at least about a millisecond
// late (the netpoller waits in whole milliseconds), which would turn an
// emulated 100 us delay into 1.1 ms.
const spinWindow = time.Millisecond

// spinUntil is sleepUntil, precise to a few microseconds: it sleeps until
// spinWindow before t, then yields in a loop until t. It costs a CPU for
// up to spinWindow per call.
func spinUntil(ctx context.Context, t time.Time, quit <-chan struct{}) error {
	if err := sleepUntil(ctx, t.Add(-spinWindow), quit); err != nil {
		return err
	}
	for time.Now().Before(t) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-quit:
			return ErrClosed
		default:
		}
		runtime.Gosched()
	}
	return nil
}

// Shape wraps a link so that what it sends is paced at s.Rate, arrives
// s.Delay later and suffers s.Loss (repaired, see ShapeConfig). Send
// returns once the message has left the emulated link (after its
// transmission time), and the message reaches the inner link after the
// delay, so a 10 MB message at 10 MB/s takes about one second plus the
// delay, and concurrent messages share the rate. Shape shapes the direction
// out of this end: wrap both ends for a symmetric link. Recv and the other
// methods pass through. Messages not yet handed to the inner link when
// Close is called are dropped.
func Shape(l Link, s ShapeConfig) (Link, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	sl := &shapedLink{Link: l, pacer: newPacer(s, uint64(l.Peer())), window: s.window(),
		notify: make(chan struct{}), c: newCloser()}
	sl.ctx, sl.cancel = context.WithCancel(context.Background())
	sl.wg.Add(1)
	go sl.run()
	return sl, nil
}

type shapedItem struct {
	h  Header
	p  []byte
	at time.Time
}

// Progress implements ProgressCounter for the link under the shaping.
func (l *shapedLink) Progress() uint64 {
	n, _ := Progress(l.Link)
	return n
}

type shapedLink struct {
	Link
	pacer  *pacer
	window int

	mu     sync.Mutex // guards q, queued, err, notify; taken before pacer.mu
	q      []shapedItem
	queued int
	err    error         // first error of the inner link
	notify chan struct{} // closed and replaced when q or err change

	c      closer
	ctx    context.Context // cancelled by Close, for the inner Send
	cancel context.CancelFunc
	wg     sync.WaitGroup // run
}

var _ Link = (*shapedLink)(nil)

func (l *shapedLink) changed() {
	close(l.notify)
	l.notify = make(chan struct{})
}

func (l *shapedLink) opErr(err error) error {
	return &OpError{Op: "send", Transport: l.Kind(), Peer: l.Peer(), Addr: l.RemoteAddr(), Err: err}
}

func (l *shapedLink) Send(ctx context.Context, h Header, payload []byte) error {
	size := len(payload) + HeaderSize
	l.mu.Lock()
	for {
		if l.c.IsClosed() {
			l.mu.Unlock()
			return l.opErr(ErrClosed)
		}
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return err
		}
		if l.queued == 0 || l.queued+size <= l.window {
			break
		}
		ch := l.notify
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return l.opErr(ctx.Err())
		case <-l.c.Quit:
			return l.opErr(ErrClosed)
		}
		l.mu.Lock()
	}
	if h.Type == 0 {
		l.mu.Unlock()
		return l.opErr(fmt.Errorf("%w: message type 0", ErrMalformed))
	}
	depart, arrive := l.pacer.schedule(time.Now(), len(payload))
	l.q = append(l.q, shapedItem{h: h, p: append([]byte(nil), payload...), at: arrive})
	l.queued += size
	l.changed()
	l.mu.Unlock()
	// The sender waits until its message has left at the emulated rate.
	// Once queued, the message is committed (run delivers it, in order),
	// as a kernel's socket buffer keeps what a write put in it: if ctx
	// ends first, the sender stops waiting and the message still goes.
	// (Closing the link there, as if the message were half on the wire,
	// failed a heartbeat, and the link and its peer with it, whenever a
	// starved goroutine overslept the heartbeat's one-second budget: 256
	// ranks in one process.)
	if err := sleepUntil(ctx, depart, l.c.Quit); err != nil && errors.Is(err, ErrClosed) {
		return l.opErr(err)
	}
	return nil
}

// run hands queued messages to the inner link when they are due.
func (l *shapedLink) run() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(l.q) == 0 {
			ch := l.notify
			l.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-l.c.Quit:
				return
			}
		}
		it := l.q[0]
		l.mu.Unlock()
		wait := sleepUntil
		if l.pacer.s.Delay > 0 {
			wait = spinUntil // latency is what an emulated delay is for
		}
		if wait(l.ctx, it.at, l.c.Quit) != nil {
			return
		}
		err := l.Link.Send(l.ctx, it.h, it.p)
		l.mu.Lock()
		l.q[0] = shapedItem{}
		l.q = l.q[1:]
		l.queued -= len(it.p) + HeaderSize
		if err != nil && l.err == nil {
			l.err = err
		}
		l.changed()
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (l *shapedLink) Close() error {
	l.c.Close(func() {
		l.cancel()
		_ = l.Link.Close()
		l.wg.Wait()
	})
	return nil
}

// ShapeNetwork wraps a network so that every link it dials or accepts is
// shaped by Shape with s (each end shapes what it sends, so both
// directions are shaped). Seeds differ per link end.
func ShapeNetwork(n Network, s ShapeConfig) (Network, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	return shapedNetwork{n, s}, nil
}

type shapedNetwork struct {
	Network
	s ShapeConfig
}

func (n shapedNetwork) shape(l Link, local int) (Link, error) {
	s := n.s
	s.Seed = s.Seed*1_000_003 + uint64(local)
	return Shape(l, s)
}

func (n shapedNetwork) Dial(ctx context.Context, addr string, peer int, cfg Config) (Link, error) {
	l, err := n.Network.Dial(ctx, addr, peer, cfg)
	if err != nil {
		return nil, err
	}
	return n.shape(l, cfg.Rank)
}

func (n shapedNetwork) Listen(addr string, cfg Config) (Listener, error) {
	ln, err := n.Network.Listen(addr, cfg)
	if err != nil {
		return nil, err
	}
	return shapedListener{ln, n, cfg.Rank}, nil
}

type shapedListener struct {
	Listener
	n    shapedNetwork
	rank int
}

func (s shapedListener) Accept(ctx context.Context) (Link, error) {
	l, err := s.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return s.n.shape(l, s.rank)
}

// LossyPacketConn wraps a datagram socket so that each datagram written is
// dropped with probability loss, drawn from a generator seeded with seed.
// It is meant for testing protocols that repair loss (reliable UDP) on
// loopback, where the kernel drops nothing.
func LossyPacketConn(pc net.PacketConn, loss float64, seed uint64) net.PacketConn {
	return &lossyPacketConn{PacketConn: pc, loss: loss, rng: rand.New(rand.NewPCG(seed, 0x10551))}
}

type lossyPacketConn struct {
	net.PacketConn
	mu   sync.Mutex
	loss float64
	rng  *rand.Rand
}

func (c *lossyPacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	c.mu.Lock()
	drop := c.rng.Float64() < c.loss
	c.mu.Unlock()
	if drop {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, addr)
}
