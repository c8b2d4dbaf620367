package drivertest

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// dnsServer is a DNS server on a loopback UDP port that answers A queries
// for one name with an address the test can change, as a cluster's DNS
// does for a Pod's name when the Pod comes back with another IP. Every
// answer has TTL 0: a resolver asks again for every connection. Other
// names get NXDOMAIN, other types of the name an empty answer. It speaks
// the few bytes of RFC 1035 that a stub resolver's query needs.
type dnsServer struct {
	conn *net.UDPConn
	name string // fully qualified, lower case, with the final dot
	done chan struct{}

	mu      sync.Mutex
	ip      net.IP
	queries int // A queries for name answered
}

// startDNS starts a server that answers name with ip; it stops with the
// test.
func startDNS(t *testing.T, name, ip string) *dnsServer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, name: strings.ToLower(strings.TrimSuffix(name, ".")) + ".", done: make(chan struct{})}
	s.point(ip)
	go s.serve()
	t.Cleanup(func() {
		_ = conn.Close()
		<-s.done
	})
	return s
}

// point changes the name's A record.
func (s *dnsServer) point(ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ip = net.ParseIP(ip).To4()
}

// answered is how many A queries for the name were answered.
func (s *dnsServer) answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// resolver is a Go resolver that asks this server and no other.
func (s *dnsServer) resolver() *net.Resolver {
	addr := s.conn.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
}

func (s *dnsServer) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		if reply, err := s.answer(buf[:n]); err == nil {
			_, _ = s.conn.WriteToUDP(reply, from)
		}
	}
}

// DNS constants (RFC 1035).
const (
	dnsTypeA    = 1
	dnsClassIN  = 1
	dnsNXDomain = 3
)

// answer builds the reply to one query.
func (s *dnsServer) answer(q []byte) ([]byte, error) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil, errors.New("not one question")
	}
	// The question: labels, then type and class.
	name, i := []string{}, 12
	for {
		if i >= len(q) {
			return nil, errors.New("short question")
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(q) {
			return nil, errors.New("bad label")
		}
		name = append(name, strings.ToLower(string(q[i:i+l])))
		i += l
	}
	if i+4 > len(q) {
		return nil, errors.New("short question")
	}
	qtype := binary.BigEndian.Uint16(q[i : i+2])
	question := q[12 : i+4]
	s.mu.Lock()
	ip := s.ip
	match := strings.Join(name, ".")+"." == s.name
	if match && qtype == dnsTypeA {
		s.queries++
	}
	s.mu.Unlock()

	reply := make([]byte, 12, 12+len(question)+16)
	copy(reply[0:2], q[0:2])                                  // id
	flags := uint16(0x8000|0x0400|0x0080) | uint16(q[2]&1)<<8 // QR, AA, RA, and RD as asked
	if !match {
		flags |= dnsNXDomain
	}
	binary.BigEndian.PutUint16(reply[2:4], flags)
	binary.BigEndian.PutUint16(reply[4:6], 1) // one question
	reply = append(reply, question...)
	if match && qtype == dnsTypeA {
		binary.BigEndian.PutUint16(reply[6:8], 1) // one answer
		reply = append(reply, 0xc0, 12)           // the question's name
		reply = binary.BigEndian.AppendUint16(reply, dnsTypeA)
		reply = binary.BigEndian.AppendUint16(reply, dnsClassIN)
		reply = binary.BigEndian.AppendUint32(reply, 0) // TTL
		reply = binary.BigEndian.AppendUint16(reply, 4)
		reply = append(reply, ip...)
	}
	return reply, nil
}
