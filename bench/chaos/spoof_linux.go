package chaos

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// udpSockets returns the local addresses of the IPv4 UDP sockets that
// process pid holds, from /proc.
func udpSockets(pid int) ([]netip.AddrPort, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"udp", "udp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[0] == "sl" || !inodes[fields[9]] {
				continue
			}
			if ap, ok := parseProcAddr(fields[1]); ok {
				out = append(out, ap)
			}
		}
		f.Close()
	}
	return out, nil
}

// parseProcAddr reads an address of /proc/net/udp{,6} ("0100007F:1F90",
// the address in the kernel's byte order, which is little-endian words
// here), keeping IPv4 and IPv4-mapped ones.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw)%4 != 0 {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	var a netip.Addr
	switch len(raw) {
	case 4:
		a = netip.AddrFrom4([4]byte(raw))
	case 16:
		a = netip.AddrFrom16([16]byte(raw)).Unmap()
	}
	if !a.Is4() || a.IsUnspecified() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, uint16(port)), true
}

// rawSender writes IPv4 UDP datagrams with any source address (needs
// CAP_NET_RAW).
type rawSender struct{ fd int }

func newRawSender() (*rawSender, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return nil, err
	}
	return &rawSender{fd}, nil
}

func (s *rawSender) send(b []byte, from, to netip.AddrPort) error {
	pkt := make([]byte, 28+len(b))
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[8] = 64
	pkt[9] = unix.IPPROTO_UDP
	src, dst := from.Addr().As4(), to.Addr().As4()
	copy(pkt[12:], src[:])
	copy(pkt[16:], dst[:])
	binary.BigEndian.PutUint16(pkt[20:], from.Port())
	binary.BigEndian.PutUint16(pkt[22:], to.Port())
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(b)))
	copy(pkt[28:], b)
	err := unix.Sendto(s.fd, pkt, 0, &unix.SockaddrInet4{Addr: dst})
	if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
		return nil
	}
	return err
}

func (s *rawSender) Close() error { return unix.Close(s.fd) }

// rudpPacket builds a reliable-UDP packet (docs/rudp.md, "Wire format") of
// type typ to connection dst, with payload and random timestamps, and no
// MAC.
func rudpPacket(r *rand.Rand, typ byte, dst uint64, payload []byte) []byte {
	b := make([]byte, 36+len(payload))
	b[0], b[1] = 1, typ
	binary.BigEndian.PutUint64(b[4:], dst)
	for o := 12; o < 32; o += 4 {
		binary.BigEndian.PutUint32(b[o:], r.Uint32())
	}
	binary.BigEndian.PutUint16(b[32:], uint16(len(payload)))
	copy(b[36:], payload)
	return b
}

// unsignedSYN is the datagram of issue 17: a SYN with a fresh connection
// id and no MAC.
func unsignedSYN(r *rand.Rand) []byte {
	body := make([]byte, 12)
	binary.BigEndian.PutUint64(body, r.Uint64()|1)
	binary.BigEndian.PutUint16(body[8:], 1400)
	b := rudpPacket(r, 1, 0, body)
	binary.BigEndian.PutUint32(b[20:], 100) // a window
	return b
}

// forgedSYN claims a MAC (flag AUTH) that is 16 random bytes.
func forgedSYN(r *rand.Rand) []byte {
	body := make([]byte, 28)
	binary.BigEndian.PutUint64(body, r.Uint64()|1)
	binary.BigEndian.PutUint16(body[8:], 1400)
	for i := 12; i < 28; i++ {
		body[i] = byte(r.Uint32())
	}
	b := rudpPacket(r, 1, 0, body)
	b[2] = 0x08
	return b
}

// attack sends, from the sockets of the ranks' processes, first the SYN
// of the issue from every socket of rank 2 (or the last rank) to every
// socket of rank 1, then total datagrams between random pairs of
// sockets of different ranks: unsigned and forged SYNs, RSTs, DATA and
// ACKs with random connection ids, and random bytes. It returns how many
// it sent.
func attack(pids []int, total int, r *rand.Rand) (int, error) {
	s, err := newRawSender()
	if err != nil {
		return 0, fmt.Errorf("no raw socket (needs root or CAP_NET_RAW): %w", err)
	}
	defer s.Close()
	socks := make([][]netip.AddrPort, len(pids))
	for i, pid := range pids {
		if socks[i], err = udpSockets(pid); err != nil {
			return 0, err
		}
		if len(socks[i]) == 0 {
			return 0, fmt.Errorf("rank %d (pid %d) holds no UDP socket", i, pid)
		}
	}
	from := min(2, len(pids)-1)
	sent := 0
	for _, src := range socks[from] {
		for _, dst := range socks[1] {
			if err := s.send(unsignedSYN(r), src, dst); err != nil {
				return sent, err
			}
			sent++
		}
	}
	for i := range total {
		a := r.IntN(len(pids))
		b := (a + 1 + r.IntN(len(pids)-1)) % len(pids)
		src, dst := socks[a][r.IntN(len(socks[a]))], socks[b][r.IntN(len(socks[b]))]
		var pkt []byte
		switch i % 6 {
		case 0:
			pkt = unsignedSYN(r)
		case 1:
			pkt = forgedSYN(r)
		case 2:
			pkt = rudpPacket(r, 5, r.Uint64()|1, nil)
		case 3:
			pkt = rudpPacket(r, byte(3+r.IntN(2)), r.Uint64()|1, make([]byte, r.IntN(100)))
			if pkt[1] == 4 {
				pkt = rudpPacket(r, 4, r.Uint64()|1, nil)
			}
		default:
			pkt = make([]byte, r.IntN(300))
			for k := range pkt {
				pkt[k] = byte(r.Uint32())
			}
		}
		if err := s.send(pkt, src, dst); err != nil {
			return sent, err
		}
		sent++
		if i%32 == 31 {
			time.Sleep(time.Millisecond)
		}
	}
	return sent, nil
}
