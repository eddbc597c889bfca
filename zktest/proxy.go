package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Request is a client request seen by a Proxy hook.
type Request struct {
	xid int32 // the request's id; the reply carries the same xid
	// Op is the operation code (OpCreate, OpDelete, ...; OpName names any).
	Op int32
	// Path is the request's path for operations whose body starts with one
	// (for OpMulti: the first operation's path), else "".
	Path string
}

// Action tells a Proxy what to do with a request (see Proxy.OnRequest).
type Action int

const (
	// Forward relays the request normally.
	Forward Action = iota
	// SwallowReply relays the request, drops the server's reply to it and
	// then closes the connection: the operation happens on the server but the
	// client sees a connection error (the ghost-node case).
	SwallowReply
	// DropRequest does not relay the request and closes the connection: the
	// client sees a connection error and nothing happened on the server.
	DropRequest
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case Forward:
		return "Forward"
	case SwallowReply:
		return "SwallowReply"
	case DropRequest:
		return "DropRequest"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Proxy is a TCP fault proxy on 127.0.0.1 between ZooKeeper clients and one or
// more upstream servers. Each client connection is relayed to an upstream
// chosen round-robin, skipping those that refuse. It understands ZooKeeper's
// framing, so it can hook requests and record session credentials; streams
// that are not framed (four-letter words, TLS) are relayed raw: through a
// TLS connection Cut, Partition, Heal, Refuse and SetLatency work as over
// plaintext, but OnRequest hooks and Sessions see nothing. It is safe for
// concurrent use.
type Proxy struct {
	ln        net.Listener
	upstreams []string
	latency   atomic.Int64
	wg        sync.WaitGroup

	mu          sync.Mutex
	links       map[*link]struct{}
	partitioned bool
	refuse      bool
	closed      bool
	next        int
	hook        func(Request) Action
	sessions    []SessionCreds
	newSessions bool
}

// NewProxy starts a proxy on 127.0.0.1 and a free port in front of
// upstreams ("host:port"). Close it when done.
func NewProxy(upstreams ...string) (*Proxy, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("zktest: proxy needs at least one upstream")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zktest: proxy: %w", err)
	}
	p := &Proxy{ln: ln, upstreams: append([]string(nil), upstreams...), links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// NewProxyT is NewProxy for a test: it fails the test on error and closes the
// proxy in t.Cleanup.
func NewProxyT(t TB, upstreams ...string) *Proxy {
	t.Helper()
	p, err := NewProxy(upstreams...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Servers returns []string{p.Addr()}, ready for zk.Connect.
func (p *Proxy) Servers() []string { return []string{p.Addr()} }

// Cut closes every current connection (both sides); new connections are
// accepted as usual. A client sees Disconnected and reconnects to the same
// session.
func (p *Proxy) Cut() {
	for _, l := range p.snapshot() {
		l.close()
	}
}

// Partition makes the proxy a black hole: current connections stay open but
// nothing is relayed either way, and new connections are accepted but never
// relayed (no upstream connection is made: a half-open socket would stall a
// ZooKeeper server's election listener). Held past the session timeout, the
// server expires the client's session. Heal ends it.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.partitioned = true
	links := p.snapshotLocked()
	for _, l := range links {
		l.silent.Store(true)
	}
	p.mu.Unlock()
}

// Heal ends a partition and a refusal. Connections that were silenced are
// closed, so clients notice at once and reconnect.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.partitioned = false
	p.refuse = false
	var silent []*link
	for l := range p.links {
		if l.silent.Load() {
			silent = append(silent, l)
		}
	}
	p.mu.Unlock()
	for _, l := range silent {
		l.close()
	}
}

// Refuse, when on, closes new connections as soon as they are accepted
// (current connections are left alone: combine with Cut to drop them).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// ForceNewSessions, when on, makes every connection opened through the proxy
// from now on ask the server for a new session, whatever session the client
// asks to resume (the proxy zeroes the ConnectRequest's session id and
// password). The client then finds its session replaced, as after an expiry,
// while the server keeps the old session (and its ephemeral nodes) until it
// expires it: what a client sees when a member answers that its session is
// gone before the ensemble has deleted the session's nodes.
func (p *Proxy) ForceNewSessions(on bool) {
	p.mu.Lock()
	p.newSessions = on
	p.mu.Unlock()
}

// SetLatency delays every chunk relayed in either direction by d, keeping
// order (0 removes the delay). It applies to data read after the call.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// OnRequest installs hook, called for every client request after the
// handshake (pings, watch resets and auth packets included) on the proxy's
// goroutines; nil removes it. The hook must be quick and safe for concurrent
// use; its Action decides the request's fate.
func (p *Proxy) OnRequest(hook func(Request) Action) {
	p.mu.Lock()
	p.hook = hook
	p.mu.Unlock()
}

// Sessions returns the credentials of the sessions established through the
// proxy (from the servers' ConnectResponses), oldest first, one entry per
// session id.
func (p *Proxy) Sessions() []SessionCreds {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]SessionCreds, len(p.sessions))
	copy(out, p.sessions)
	return out
}

// Conns returns the number of client connections currently open through the
// proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if !already {
		_ = p.ln.Close()
	}
	p.Cut()
	p.wg.Wait()
	return nil
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

func (p *Proxy) snapshotLocked() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

func (p *Proxy) recordSession(c SessionCreds) {
	if c.ID == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.sessions {
		if p.sessions[i].ID == c.ID {
			p.sessions[i] = c
			return
		}
	}
	p.sessions = append(p.sessions, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.mu.Lock()
		if p.closed || p.refuse {
			p.mu.Unlock()
			c.Close()
			continue
		}
		l := &link{p: p, client: c, done: make(chan struct{}), swallow: make(map[int32]bool)}
		silent := p.partitioned
		l.silent.Store(silent)
		var upstreams []string
		if !silent {
			for i := range p.upstreams {
				upstreams = append(upstreams, p.upstreams[(p.next+i)%len(p.upstreams)])
			}
			p.next++
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			l.run(upstreams)
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}()
	}
}

// link is one client connection and its upstream connection.
type link struct {
	p      *Proxy
	client net.Conn
	silent atomic.Bool // partitioned: relay nothing
	raw    atomic.Bool // not ZooKeeper framing: relay bytes as they come
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	server  net.Conn
	swallow map[int32]bool
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.mu.Lock()
		if l.server != nil {
			l.server.Close()
		}
		l.mu.Unlock()
	})
}

func (l *link) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// run relays until the link closes.
func (l *link) run(upstreams []string) {
	defer l.close()
	if len(upstreams) == 0 { // accepted during a partition: swallow everything
		_, _ = io.Copy(io.Discard, l.client)
		return
	}
	var srv net.Conn
	for _, u := range upstreams {
		if l.closed() || l.silent.Load() {
			break
		}
		c, err := net.DialTimeout("tcp", u, 2*time.Second)
		if err == nil {
			srv = c
			break
		}
	}
	if srv == nil {
		if l.silent.Load() && !l.closed() {
			_, _ = io.Copy(io.Discard, l.client)
		}
		return
	}
	l.mu.Lock()
	if l.closed() {
		l.mu.Unlock()
		srv.Close()
		return
	}
	l.server = srv
	l.mu.Unlock()

	c2s := make(chan chunk, 256)
	s2c := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); l.read(l.client, c2s, true) }()
	go func() { defer wg.Done(); l.write(srv, c2s) }()
	go func() { defer wg.Done(); l.write(l.client, s2c) }()
	l.read(srv, s2c, false)
	wg.Wait()
}

// chunk is a unit of relayed data; closeLink asks the writer to close the link
// once everything before it has been written.
type chunk struct {
	data      []byte
	due       time.Time
	closeLink bool
}

func (l *link) push(q chan<- chunk, c chunk) bool {
	select {
	case q <- c:
		return true
	case <-l.done:
		return false
	}
}

// read reads frames (or raw chunks) from src and queues them for the writer.
// fromClient selects request parsing (hook) versus reply parsing (session
// credentials, swallowed replies).
func (l *link) read(src net.Conn, q chan<- chunk, fromClient bool) {
	// At the end of the stream the writer closes the link once it has
	// written everything queued before (a server answers a four-letter word
	// and closes at once).
	defer l.push(q, chunk{closeLink: true})
	first := true
	buf := make([]byte, 32<<10)
	for {
		var data []byte
		raw := l.raw.Load()
		if !raw {
			var hdr [4]byte
			if _, err := io.ReadFull(src, hdr[:]); err != nil {
				return
			}
			n := int32(binary.BigEndian.Uint32(hdr[:]))
			if l.raw.Load() || n < 0 || n > maxFrame {
				if !first && !l.raw.Load() {
					return // corrupt stream
				}
				l.raw.Store(true)
				raw = true
				data = append([]byte(nil), hdr[:]...)
			} else {
				data = make([]byte, 4+int(n))
				copy(data, hdr[:])
				if _, err := io.ReadFull(src, data[4:]); err != nil {
					return
				}
			}
		} else {
			n, err := src.Read(buf)
			if n > 0 {
				data = append([]byte(nil), buf[:n]...)
			}
			if err != nil && n == 0 {
				return
			}
		}
		if l.silent.Load() {
			first = false
			continue
		}
		c := chunk{data: data, due: time.Now().Add(time.Duration(l.p.latency.Load()))}
		if !raw && !first {
			if fromClient {
				if req, ok := parseRequest(data); ok {
					l.p.mu.Lock()
					hook := l.p.hook
					l.p.mu.Unlock()
					if hook != nil {
						switch hook(req) {
						case SwallowReply:
							l.mu.Lock()
							l.swallow[req.xid] = true
							l.mu.Unlock()
						case DropRequest:
							l.push(q, chunk{closeLink: true, due: c.due})
							return
						}
					}
				}
			} else if xid, ok := replyXid(data); ok && xid != xidWatchEvent && xid != xidPing {
				l.mu.Lock()
				sw := l.swallow[xid]
				delete(l.swallow, xid)
				l.mu.Unlock()
				if sw {
					l.push(q, chunk{closeLink: true, due: c.due})
					return
				}
			}
		} else if !raw && first && fromClient {
			l.p.mu.Lock()
			fresh := l.p.newSessions
			l.p.mu.Unlock()
			if fresh {
				c.data = newSessionRequest(data)
			}
		} else if !raw && first && !fromClient {
			if creds, err := parseConnectResponse(data[4:]); err == nil {
				l.p.recordSession(creds)
			}
		}
		first = false
		if !l.push(q, c) {
			return
		}
	}
}

// write writes queued chunks to dst when they are due.
func (l *link) write(dst net.Conn, q <-chan chunk) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		var c chunk
		select {
		case c = <-q:
		case <-l.done:
			return
		}
		if d := time.Until(c.due); d > 0 {
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			select {
			case <-t.C:
			case <-l.done:
				return
			}
		}
		if c.closeLink {
			l.close()
			return
		}
		if l.silent.Load() {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			l.close()
			return
		}
	}
}
