package zktest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// FourLetterWord sends a four-letter command (such as "srvr", "mntr", "conf")
// to addr and returns the whole answer. It blocks until the server closes the
// connection or ctx ends; without a ctx deadline it gives up after 10 s. A nil
// ctx gives an error (so it does for Mntr and WatchNotifications).
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	if ctx == nil {
		return "", fmt.Errorf("zktest: %s %s: %w: nil context", cmd, addr, errBadArgument)
	}
	if len(cmd) != 4 {
		return "", fmt.Errorf("zktest: four-letter word %q is not four letters", cmd)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// srvrStats is the parsed answer to `srvr`.
type srvrStats struct {
	// mode is "standalone", "leader", "follower", "observer", or "" when the
	// server is not serving (for example an ensemble member without quorum).
	mode        string
	zxid        int64
	connections int
	nodeCount   int
	version     string
}

// srvrMode asks addr for `srvr` and returns its Mode, "" when the server
// answers but does not serve yet. Readiness is read from `srvr` rather than
// `ruok`, which answers before the server serves, and parsed here because
// go-zookeeper's FLWSrvr cannot parse Debian's answer.
func srvrMode(ctx context.Context, addr string) (string, error) {
	st, err := srvr(ctx, addr)
	if err != nil {
		return "", err
	}
	return st.mode, nil
}

// srvr asks addr for `srvr` and parses the answer.
func srvr(ctx context.Context, addr string) (*srvrStats, error) {
	out, err := FourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return nil, err
	}
	return parseSrvr(out)
}

func parseSrvr(out string) (*srvrStats, error) {
	st := &srvrStats{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Zookeeper version":
			st.version = v
		case "Mode":
			st.mode = v
		case "Zxid":
			z, err := strconv.ParseInt(strings.TrimPrefix(v, "0x"), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("zktest: srvr: bad Zxid %q", v)
			}
			st.zxid = z
		case "Connections":
			st.connections, _ = strconv.Atoi(v)
		case "Node count":
			st.nodeCount, _ = strconv.Atoi(v)
		}
	}
	return st, nil
}

// Mntr asks addr for `mntr` and returns its key/value pairs (keys such as
// "zk_server_state", "zk_version", "zk_znode_count", "zk_watch_count").
func Mntr(ctx context.Context, addr string) (map[string]string, error) {
	out, err := FourLetterWord(ctx, addr, "mntr")
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("zktest: mntr %s: unexpected answer %q", addr, out)
	}
	return m, nil
}

// watchFiredKeys are mntr summaries whose sums count the watches fired, one
// per watcher notified, by event type.
var watchFiredKeys = []string{
	"zk_sum_node_created_watch_count",
	"zk_sum_node_deleted_watch_count",
	"zk_sum_node_changed_watch_count",
	"zk_sum_node_children_watch_count",
}

// WatchNotifications returns how many watch notifications addr has sent since
// it started: the sum of mntr's zk_sum_node_{created,deleted,changed,children}_watch_count.
// Take the difference of two readings around an action to count the watches
// it fired (a herd-effect test expects about one per lock release). In an
// ensemble each member counts the watches of its own clients.
func WatchNotifications(ctx context.Context, addr string) (int64, error) {
	m, err := Mntr(ctx, addr)
	if err != nil {
		return 0, err
	}
	var sum int64
	found := false
	for _, k := range watchFiredKeys {
		v, ok := m[k]
		if !ok {
			continue
		}
		found = true
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("zktest: mntr %s: bad %s %q", addr, k, v)
		}
		sum += int64(f)
	}
	if !found {
		return 0, fmt.Errorf("zktest: mntr %s: no watch counters (is the server older than 3.6?)", addr)
	}
	return sum, nil
}
