package leader

import (
	"fmt"
	"net"
	"unicode/utf8"

	"go.uber.org/zap"
)

// maxIDLen bounds a participant id: it is stored as node data, and ZooKeeper
// refuses packets over jute.maxbuffer (1 MiB by default).
const maxIDLen = 512 << 10

// Option configures a Latch, a Selector or Run. Options are checked by the
// constructor: an invalid value, or an option that does not apply to the type
// being built, is returned as an error matching ErrBadOption.
type Option func(*config) error

type config struct {
	id         string
	requeue    bool
	requeueSet bool
	logger     *zap.Logger
}

// WithID sets the participant id, written as the data of this participant's
// node (UTF-8) and reported by Participants and Leader. It must be non-empty
// valid UTF-8. The default, as in Curator, is the local IP address as text.
func WithID(id string) Option {
	return func(c *config) error {
		if id == "" || !utf8.ValidString(id) || len(id) > maxIDLen {
			return fmt.Errorf("%w: participant id must be non-empty UTF-8 of at most %d bytes", ErrBadOption, maxIDLen)
		}
		c.id = id
		return nil
	}
}

// WithRequeue says whether to campaign again after a term of leadership ends,
// whatever ended it (the callback or work returned, or leadership was lost).
// It applies to Selector (default false, as Curator's autoRequeue) and Run
// (default true). A Latch always stays in the election until Close, so
// NewLatch rejects this option.
func WithRequeue(on bool) Option {
	return func(c *config) error {
		c.requeue = on
		c.requeueSet = true
		return nil
	}
}

// WithLogger sets the logger. The default is the session's logger. The
// package names it "leader" and adds the election path.
func WithLogger(lg *zap.Logger) Option {
	return func(c *config) error {
		if lg == nil {
			return fmt.Errorf("%w: nil logger", ErrBadOption)
		}
		c.logger = lg
		return nil
	}
}

func buildConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil option", ErrBadOption)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	if c.id == "" {
		c.id = localAddress()
	}
	return c, nil
}

// localAddress returns the first non-loopback unicast address of this host
// (IPv4 preferred) as text, or "127.0.0.1": Curator's default participant id
// is the local address. It reads the interface table; it does no network I/O.
func localAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "127.0.0.1"
	}
	var v6 string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipn.IP
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
			continue
		}
		if ip4 := ip.To4(); ip4 != nil {
			return ip4.String()
		}
		if v6 == "" {
			v6 = ip.String()
		}
	}
	if v6 != "" {
		return v6
	}
	return "127.0.0.1"
}
