package zktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// SessionCreds are what it takes to attach to a ZooKeeper session: its id,
// and the password and negotiated timeout that ExpireSession and
// HoldSession need. Proxy.Sessions and Tap.Sessions record them from the
// servers' replies (go-zookeeper has no password accessor).
type SessionCreds struct {
	// ID is the session id, as zk.Conn.SessionID returns it.
	ID       int64
	password []byte
	timeout  time.Duration
}

// hexID returns the session id in hex, as server logs print it.
func (c SessionCreds) hexID() string { return fmt.Sprintf("0x%x", c.ID) }

// ExpireSession ends the session creds at once: it attaches a second raw
// connection to the session with its id and password, sends closeSession and
// waits for the reply, so the server deletes the session's ephemeral nodes
// before it returns. The victim's client learns of it (StateExpired) when it
// reconnects. The servers are tried in order until one answers; when a
// server closes the attach before it answers (the victim's client attached
// again at once), the attach is repeated, up to 5 times. A session
// that is already gone gives nil. ctx bounds the whole call (10 s per server
// without a deadline). A nil ctx gives an error.
func ExpireSession(ctx context.Context, servers []string, creds SessionCreds) error {
	if ctx == nil {
		return fmt.Errorf("zktest: expire session %s: %w: nil context", creds.hexID(), errBadArgument)
	}
	if creds.ID == 0 {
		return errors.New("zktest: expire session: no session id")
	}
	if creds.timeout <= 0 {
		creds.timeout = 10 * time.Second
	}
	var errs []error
	for _, addr := range servers {
		var err error
		// The victim's client, whose connection our attach closed, may
		// attach again at once, and the server then closes ours before it
		// answers closeSession: attach again (a session already closed
		// gives nil then).
		for attempt := 0; attempt < 5; attempt++ {
			if err = expireOn(ctx, addr, creds); err == nil {
				return nil
			}
			if !errors.Is(err, errAttachClosed) || ctx.Err() != nil {
				break
			}
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("zktest: expire session %s: %w", creds.hexID(), errors.Join(errs...))
}

// errAttachClosed marks a closeSession whose connection the server closed
// before it answered.
var errAttachClosed = errors.New("connection closed before the reply")

func expireOn(ctx context.Context, addr string, creds SessionCreds) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(connectRequest(creds)); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	f, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("%s: connect response: %w", addr, err)
	}
	resp, err := parseConnectResponse(f[4:])
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if resp.ID == 0 || resp.timeout == 0 {
		return nil // already expired
	}
	const xid = 1
	req := make([]byte, 12)
	binary.BigEndian.PutUint32(req, 8)
	binary.BigEndian.PutUint32(req[4:], xid)
	op := opCloseSession
	binary.BigEndian.PutUint32(req[8:], uint32(op))
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("%s: close session: %w", addr, err)
	}
	for {
		f, err := readFrame(c)
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return fmt.Errorf("%s: close session reply: %w: %w", addr, errAttachClosed, err)
		}
		if err != nil {
			return fmt.Errorf("%s: close session reply: %w", addr, err)
		}
		if len(f) < 20 {
			return fmt.Errorf("%s: short reply", addr)
		}
		if int32(binary.BigEndian.Uint32(f[4:])) != xid {
			continue // a watch event or the like
		}
		if code := int32(binary.BigEndian.Uint32(f[16:])); code != 0 {
			return fmt.Errorf("%s: close session: server error %d", addr, code)
		}
		return nil
	}
}

// holdSession is HoldSession without the test: ctx bounds the attach. A nil
// ctx gives an error; so does a session already gone.
func holdSession(ctx context.Context, servers []string, creds SessionCreds) (release func(), err error) {
	if ctx == nil {
		return nil, fmt.Errorf("zktest: hold session %s: %w: nil context", creds.hexID(), errBadArgument)
	}
	if creds.ID == 0 {
		return nil, errors.New("zktest: hold session: no session id")
	}
	if creds.timeout <= 0 {
		creds.timeout = 10 * time.Second
	}
	var errs []error
	for _, addr := range servers {
		c, err := attach(ctx, addr, creds)
		if err == nil {
			return keepAlive(c, creds.timeout/3), nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("zktest: hold session %s: %w", creds.hexID(), errors.Join(errs...))
}

// HoldSession attaches to the session creds on the first of servers that
// answers and keeps it alive with pings until release is called, so that the
// server cannot expire it whatever its own client does. The server moves the
// session to this connection and closes the client's. release (idempotent)
// closes the connection without closing the session, which the server then
// expires one timeout later; t.Cleanup calls it at the latest. It fails the
// test if no server lets it attach within 20 s (a session already gone
// cannot be held).
func HoldSession(t TB, servers []string, creds SessionCreds) (release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release, err := holdSession(ctx, servers, creds)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(release)
	return release
}

// attach connects to addr and attaches to the session creds.
func attach(ctx context.Context, addr string, creds SessionCreds) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(connectRequest(creds)); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	f, err := readFrame(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: connect response: %w", addr, err)
	}
	resp, err := parseConnectResponse(f[4:])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	if resp.ID == 0 || resp.timeout == 0 {
		c.Close()
		return nil, fmt.Errorf("%s: the session has expired", addr)
	}
	if !stop() {
		c.Close()
		return nil, ctx.Err()
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// keepAlive pings on c every interval and reads (and drops) what the server
// sends, until the returned function closes c.
func keepAlive(c net.Conn, interval time.Duration) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			if _, err := readFrame(c); err != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		ping := make([]byte, 12)
		binary.BigEndian.PutUint32(ping, 8)
		pingXid := xidPing
		binary.BigEndian.PutUint32(ping[4:], uint32(pingXid))
		binary.BigEndian.PutUint32(ping[8:], uint32(OpPing))
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := c.Write(ping); err != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			c.Close()
			wg.Wait()
		})
	}
}
