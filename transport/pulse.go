package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Pulses: liveness on a side channel (docs/liveness.md).
//
// A heartbeat sent on a link waits behind whatever the link is sending: a
// rank in the middle of a 1 GiB message over a congested TCP flow cannot
// say that it is alive until the message has gone, and a congested flow
// can go seconds without a byte (retransmission back-off). A pulse is a
// small datagram, sent from its own UDP socket, that nothing queues in
// front of: a live process is heard every heartbeat whatever its links
// carry, and a stopped one is not heard at all (its kernel may still
// deliver and acknowledge its streams, but it sends no pulse).
//
// A pulse proves the job secret, names its sender and receiver, and
// carries a counter that only grows and the receiver's nonce, so that
// without the secret nobody can make a pulse that counts (a dead rank
// cannot be kept alive), and a recorded pulse counts once at most, in
// this world only. Pulses only ever add life: a forged, replayed or lost
// pulse cannot fail a rank (a flood that overflows the socket's buffer
// can hide real pulses; the links' own heartbeats and bytes still count).
//
// The datagram (pulseLen bytes, integers big-endian):
//
//	 0  4  magic "HCPL"
//	 4  1  Version
//	 5  3  zero
//	 8  8  job id
//	16  4  sender's rank
//	20  4  receiver's rank
//	24  8  counter (per sender and receiver, from 1, only grows)
//	32 32  HMAC-SHA256(key, receiver's nonce | bytes 0-31)
//
// key = HMAC-SHA256(secret, "hetcomm/1 pulse key"). The receiver's nonce
// (PulseNonceSize random bytes, fresh in every process) reaches its peers
// over their authenticated links, with the port, before any pulse.

var pulseMagic = [4]byte{'H', 'C', 'P', 'L'}

const (
	pulseLen = 64
	// PulseNonceSize is the size of a pulse receiver's nonce.
	PulseNonceSize = 16
)

// PulseConfig configures a Pulses socket.
type PulseConfig struct {
	// JobID and Rank identify this process, as in Config.
	JobID uint64
	Rank  int
	// Size is the number of ranks: pulses from ranks outside [0, Size)
	// are dropped.
	Size int
	// Secret is the job secret (at least MinSecretLen bytes).
	Secret []byte
	// OnPulse is called, from the socket's reader, for every pulse that
	// proves the secret, was sent to this rank by rank src, and is newer
	// than every pulse accepted from src before. It must not block.
	OnPulse func(src int)
}

// Pulses sends and receives pulses on one UDP socket.
type Pulses struct {
	conn  *net.UDPConn
	cfg   PulseConfig
	key   []byte
	nonce [PulseNonceSize]byte

	mu    sync.Mutex // guards peers
	peers map[int]*pulsePeer

	last     []uint64 // by sender: the newest counter accepted (reader only)
	accepted atomic.Uint64
	rejected atomic.Uint64
	wg       sync.WaitGroup
	once     sync.Once
}

// pulseDest is where pulses to one rank go: to each of its addresses
// in turn.
type pulseDest struct {
	addrs []*net.UDPAddr
	nonce [PulseNonceSize]byte
}

// pulsePeer is the sending side's state for one rank.
type pulsePeer struct {
	dest    atomic.Pointer[pulseDest]
	counter atomic.Uint64
	mac     sync.Mutex // guards buf (Send may run concurrently for one peer)
	buf     [pulseLen]byte
}

// ListenPulses opens a pulse socket on addr ("host:port"; port 0 picks
// one) and starts its reader.
func ListenPulses(addr string, cfg PulseConfig) (*Pulses, error) {
	if len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: pulses: secret of %d bytes, need at least %d", ErrBadConfig, len(cfg.Secret), MinSecretLen)
	}
	if cfg.Size <= 0 || cfg.Rank < 0 || cfg.Rank >= cfg.Size || cfg.OnPulse == nil {
		return nil, fmt.Errorf("%w: pulses: rank %d of %d, OnPulse set: %v", ErrBadConfig, cfg.Rank, cfg.Size, cfg.OnPulse != nil)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: pulses: %w", err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("transport: pulses: %w", err)
	}
	m := hmac.New(sha256.New, cfg.Secret)
	m.Write([]byte("hetcomm/1 pulse key"))
	p := &Pulses{conn: conn, cfg: cfg, key: m.Sum(nil), peers: map[int]*pulsePeer{}, last: make([]uint64, cfg.Size)}
	if _, err := rand.Read(p.nonce[:]); err != nil {
		conn.Close()
		return nil, fmt.Errorf("transport: pulses: %w", err)
	}
	p.wg.Add(1)
	go p.readLoop()
	return p, nil
}

// Addr is the socket's local address.
func (p *Pulses) Addr() *net.UDPAddr { return p.conn.LocalAddr().(*net.UDPAddr) }

// Nonce is this receiver's nonce, which its peers' pulses must carry
// (PulseNonceSize bytes).
func (p *Pulses) Nonce() []byte { return p.nonce[:] }

// Accepted and Rejected count the datagrams received that counted and
// that did not (wrong size, job, rank or MAC, replayed, reordered).
func (p *Pulses) Accepted() uint64 { return p.accepted.Load() }
func (p *Pulses) Rejected() uint64 { return p.rejected.Load() }

// SetPeer says where pulses to rank go: its socket's addresses (one
// per rail: the pulses take each in turn, so that one NIC's failure
// loses only its share) and its nonce, as it told over the
// authenticated link. Calling it again replaces them.
func (p *Pulses) SetPeer(rank int, addrs []*net.UDPAddr, nonce []byte) error {
	if rank < 0 || rank >= p.cfg.Size || rank == p.cfg.Rank {
		return fmt.Errorf("%w: pulses: peer rank %d", ErrBadConfig, rank)
	}
	if len(nonce) != PulseNonceSize || len(addrs) == 0 {
		return fmt.Errorf("%w: pulses: peer %d: nonce of %d bytes, %d addresses", ErrMalformed, rank, len(nonce), len(addrs))
	}
	for _, a := range addrs {
		if a == nil || a.Port == 0 {
			return fmt.Errorf("%w: pulses: peer %d: address %v", ErrMalformed, rank, a)
		}
	}
	d := &pulseDest{addrs: append([]*net.UDPAddr(nil), addrs...), nonce: [PulseNonceSize]byte(nonce)}
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.peers[rank]
	if pp == nil {
		pp = &pulsePeer{}
		p.peers[rank] = pp
	}
	pp.dest.Store(d)
	return nil
}

// HasPeer reports whether SetPeer was called for rank.
func (p *Pulses) HasPeer(rank int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[rank] != nil
}

// SetWriteDeadline bounds the wait of the following Sends for room in
// the socket's buffer (net.Conn's SetWriteDeadline).
func (p *Pulses) SetWriteDeadline(t time.Time) error { return p.conn.SetWriteDeadline(t) }

// Send sends one pulse to rank. It waits for room in the socket's buffer
// at most until the write deadline (SetWriteDeadline). Without SetPeer
// for rank it does nothing and returns nil.
func (p *Pulses) Send(rank int) error {
	p.mu.Lock()
	pp := p.peers[rank]
	p.mu.Unlock()
	if pp == nil {
		return nil
	}
	d := pp.dest.Load()
	pp.mac.Lock()
	b := pp.buf[:]
	n := pp.counter.Add(1)
	p.seal(b, p.cfg.Rank, rank, n, d.nonce[:])
	_, err := p.conn.WriteToUDP(b, d.addrs[n%uint64(len(d.addrs))])
	pp.mac.Unlock()
	return err
}

// seal writes a pulse from src to dst into b.
func (p *Pulses) seal(b []byte, src, dst int, counter uint64, nonce []byte) {
	copy(b, pulseMagic[:])
	b[4], b[5], b[6], b[7] = Version, 0, 0, 0
	binary.BigEndian.PutUint64(b[8:], p.cfg.JobID)
	binary.BigEndian.PutUint32(b[16:], uint32(src))
	binary.BigEndian.PutUint32(b[20:], uint32(dst))
	binary.BigEndian.PutUint64(b[24:], counter)
	copy(b[32:], p.mac(nonce, b[:32]))
}

func (p *Pulses) mac(nonce, head []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write(nonce)
	m.Write(head)
	return m.Sum(nil)
}

// open checks a received datagram and returns its sender and counter.
func (p *Pulses) open(b []byte) (src int, counter uint64, ok bool) {
	if len(b) != pulseLen || [4]byte(b[:4]) != pulseMagic || b[4] != Version || b[5]|b[6]|b[7] != 0 {
		return 0, 0, false
	}
	if binary.BigEndian.Uint64(b[8:]) != p.cfg.JobID || binary.BigEndian.Uint32(b[20:]) != uint32(p.cfg.Rank) {
		return 0, 0, false
	}
	s := binary.BigEndian.Uint32(b[16:])
	if s >= uint32(p.cfg.Size) || int(s) == p.cfg.Rank {
		return 0, 0, false
	}
	if !hmac.Equal(p.mac(p.nonce[:], b[:32]), b[32:]) {
		return 0, 0, false
	}
	return int(s), binary.BigEndian.Uint64(b[24:]), true
}

func (p *Pulses) readLoop() {
	defer p.wg.Done()
	buf := make([]byte, pulseLen+1) // one more: a longer datagram shows as too long
	for {
		n, _, err := p.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Not expected on an unconnected socket; do not spin on it.
			time.Sleep(time.Millisecond)
			continue
		}
		src, counter, ok := p.open(buf[:n])
		if !ok || counter <= p.last[src] {
			p.rejected.Add(1)
			continue
		}
		p.last[src] = counter
		p.accepted.Add(1)
		p.cfg.OnPulse(src)
	}
}

// Close closes the socket and waits for its reader. It is idempotent.
func (p *Pulses) Close() error {
	var err error
	p.once.Do(func() {
		err = p.conn.Close()
		p.wg.Wait()
	})
	return err
}

// AddrIPs returns the IP addresses of a link's LocalAddr or RemoteAddr
// (one per rail of a RailSet, without repeats), or none (mem).
func AddrIPs(a net.Addr) []net.IP {
	var ips []net.IP
	add := func(ip net.IP) {
		for _, x := range ips {
			if x.Equal(ip) {
				return
			}
		}
		ips = append(ips, ip)
	}
	switch a := a.(type) {
	case *net.TCPAddr:
		add(a.IP)
	case *net.UDPAddr:
		add(a.IP)
	case RailAddrs:
		for _, x := range a {
			for _, ip := range AddrIPs(x) {
				add(ip)
			}
		}
	case nil:
	default:
		host, _, err := net.SplitHostPort(a.String())
		if ip := net.ParseIP(host); err == nil && ip != nil {
			add(ip)
		}
	}
	return ips
}
