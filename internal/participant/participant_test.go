package participant

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		want error // nil: valid
	}{
		{"ip", "10.0.0.7", nil},
		{"host", "worker-1.example.com", nil},
		{"unicode", "wörker-λ-✓", nil},
		{"space", " ", nil},
		{"max", strings.Repeat("x", MaxLen), nil},
		{"max multibyte", strings.Repeat("é", MaxLen/2), nil},
		{"empty", "", ErrEmpty},
		{"one over", strings.Repeat("x", MaxLen+1), ErrTooLong},
		{"2 MiB", strings.Repeat("x", 2<<20), ErrTooLong},
		{"bad utf8", "\xff", ErrUTF8},
		{"truncated rune", "ab\xe2\x82", ErrUTF8},
		{"surrogate", "\xed\xa0\x80", ErrUTF8},
		{"nul only", "\x00", ErrNUL},
		{"nul inside", "a\x00b", ErrNUL},
		{"nul at end", "abc\x00", ErrNUL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.id)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "participant id ") {
				t.Errorf("message %q does not start with %q", err, "participant id ")
			}
		})
	}
}

func ipNet(s string) net.Addr {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

func ipAddr(s string) net.Addr { return &net.IPAddr{IP: net.ParseIP(s)} }

type otherAddr struct{}

func (otherAddr) Network() string { return "unix" }
func (otherAddr) String() string  { return "/tmp/sock" }

func TestPickAddr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []net.Addr
		want  string
	}{
		{"none", nil, ""},
		{"ipv4", []net.Addr{ipNet("192.168.1.20/24")}, "192.168.1.20"},
		{"first ipv4", []net.Addr{ipNet("10.0.0.1/8"), ipNet("10.0.0.2/8")}, "10.0.0.1"},
		{"ipv4 before ipv6", []net.Addr{ipNet("2001:db8::1/64"), ipNet("10.1.2.3/16")}, "10.1.2.3"},
		{"ipv6 only", []net.Addr{ipNet("2001:db8::1/64"), ipNet("2001:db8::2/64")}, "2001:db8::1"},
		{"ipv4-mapped is ipv4", []net.Addr{ipAddr("::ffff:10.9.8.7")}, "10.9.8.7"},
		{"IPAddr", []net.Addr{ipAddr("172.16.0.5")}, "172.16.0.5"},
		{"loopback skipped", []net.Addr{ipNet("127.0.0.1/8"), ipNet("::1/128")}, ""},
		{"link-local skipped", []net.Addr{ipNet("169.254.3.4/16"), ipNet("fe80::1/64")}, ""},
		{"link-local then global v6", []net.Addr{ipNet("fe80::1/64"), ipNet("2001:db8::9/64")}, "2001:db8::9"},
		{"unspecified skipped", []net.Addr{ipNet("0.0.0.0/0"), ipNet("::/0")}, ""},
		{"multicast skipped", []net.Addr{ipAddr("224.0.0.1"), ipAddr("ff02::1")}, ""},
		{"other kinds skipped", []net.Addr{otherAddr{}, ipNet("10.0.0.3/8")}, "10.0.0.3"},
		{"nil IP skipped", []net.Addr{&net.IPAddr{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickAddr(tc.addrs); got != tc.want {
				t.Errorf("pickAddr = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocalIDFallbacks(t *testing.T) {
	errBoom := errors.New("boom")
	addrs := func(as []net.Addr, err error) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) { return as, err }
	}
	host := func(h string, err error) func() (string, error) {
		return func() (string, error) { return h, err }
	}
	for _, tc := range []struct {
		name     string
		addrs    func() ([]net.Addr, error)
		hostname func() (string, error)
		want     string
	}{
		{"address", addrs([]net.Addr{ipNet("10.2.3.4/8")}, nil), host("h1", nil), "10.2.3.4"},
		{"no address: host name", addrs(nil, nil), host("h1", nil), "h1"},
		{"only loopback: host name", addrs([]net.Addr{ipNet("127.0.0.1/8")}, nil), host("h1", nil), "h1"},
		{"interfaces fail: host name", addrs(nil, errBoom), host("h1", nil), "h1"},
		{"host name fails", addrs(nil, nil), host("", errBoom), Fallback},
		{"empty host name", addrs(nil, nil), host("", nil), Fallback},
		{"invalid host name", addrs(nil, nil), host("a\x00b", nil), Fallback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := localID(tc.addrs, tc.hostname); got != tc.want {
				t.Errorf("localID = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocalIDIsValid(t *testing.T) {
	id := LocalID()
	if err := Validate(id); err != nil {
		t.Fatalf("LocalID() = %q: %v", id, err)
	}
	t.Logf("LocalID() = %q", id)
}
