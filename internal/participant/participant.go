// Package participant holds what the recipes that store a participant id
// (mutex, leader) share about it: the default id and the rules an id must
// follow.
//
// A participant id is written as the data of the participant's node, where
// Curator reads it as UTF-8 text (LeaderLatch.getParticipants, the lock
// nodes' data). Curator's default is the local IP address as text.
package participant

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxLen is the largest participant id in bytes. The id is stored as node
// data, and a ZooKeeper server refuses any packet over jute.maxbuffer (1 MiB
// by default): half of it leaves room for the path, the ACL and the rest of
// the create request, and for a multi that carries the id.
const MaxLen = 512 << 10

// Fallback is the id LocalID returns when the host has neither a usable
// address nor a host name.
const Fallback = "127.0.0.1"

// Reasons for which Validate rejects an id. Callers wrap them in
// session.ErrBadArgument; they stay reachable with errors.Is.
var (
	ErrEmpty   = errors.New("participant id is empty")
	ErrUTF8    = errors.New("participant id is not valid UTF-8")
	ErrTooLong = errors.New("participant id is too long")
	ErrNUL     = errors.New("participant id contains a NUL byte")
)

// Validate reports whether id may be used as a participant id: non-empty,
// valid UTF-8, at most MaxLen bytes and without NUL (which Java and C
// clients may treat as the end of the text). The error wraps one of ErrEmpty,
// ErrUTF8, ErrTooLong, ErrNUL.
func Validate(id string) error {
	switch {
	case id == "":
		return ErrEmpty
	case len(id) > MaxLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, len(id), MaxLen)
	case !utf8.ValidString(id):
		return ErrUTF8
	}
	if i := strings.IndexByte(id, 0); i >= 0 {
		return fmt.Errorf("%w at offset %d", ErrNUL, i)
	}
	return nil
}

// LocalID returns the default participant id, as Curator's: the local IP
// address as text, that is the first IPv4 address, else the first IPv6
// address, of an up, non-loopback interface that is neither loopback,
// link-local, multicast nor unspecified; if there is none, the host name; if
// that fails or is not a valid id, Fallback. It reads the interface table and
// does no network I/O.
func LocalID() string { return localID(upAddrs, os.Hostname) }

// localTTL is how long Local keeps the id it read.
const localTTL = 10 * time.Second

var local struct {
	mu   sync.Mutex
	id   string
	data []byte
	at   time.Time
}

// Local returns LocalID and its bytes, read from the interface table at most
// every localTTL: a service that makes a lock per key would otherwise read
// the table for every one. The bytes are shared: never modify them.
func Local() (string, []byte) {
	local.mu.Lock()
	defer local.mu.Unlock()
	if local.data == nil || time.Since(local.at) > localTTL {
		id := LocalID()
		if id != local.id || local.data == nil {
			local.id, local.data = id, []byte(id)
		}
		local.at = time.Now()
	}
	return local.id, local.data
}

func localID(addrs func() ([]net.Addr, error), hostname func() (string, error)) string {
	if as, err := addrs(); err == nil {
		if ip := pickAddr(as); ip != "" {
			return ip
		}
	}
	if h, err := hostname(); err == nil && Validate(h) == nil {
		return h
	}
	return Fallback
}

// upAddrs returns the addresses of the interfaces that are up and not
// loopback interfaces. An interface whose addresses cannot be read is
// skipped.
func upAddrs() ([]net.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []net.Addr
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		out = append(out, as...)
	}
	return out, nil
}

// pickAddr returns the first usable IPv4 address of addrs as text, else the
// first usable IPv6 address, else "".
func pickAddr(addrs []net.Addr) string {
	var v6 string
	for _, a := range addrs {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		default:
			continue
		}
		if ip == nil || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() ||
			ip.IsMulticast() || ip.IsLinkLocalMulticast() {
			continue
		}
		if ip4 := ip.To4(); ip4 != nil {
			return ip4.String()
		}
		if v6 == "" && len(ip) == net.IPv6len {
			v6 = ip.String()
		}
	}
	return v6
}
