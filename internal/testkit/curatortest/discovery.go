package curatortest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DiscoveryProgram is CuratorDiscovery.java: a ServiceDiscovery with its
// ServiceCaches and ServiceProviders (curator-x-discovery).
const DiscoveryProgram Program = "CuratorDiscovery"

// DiscoveryPayload is the payload class of a CuratorDiscovery program.
type DiscoveryPayload string

// The payload classes of StartDiscovery.
const (
	// SpringPayload reads and writes Spring Cloud Zookeeper's payload, a
	// ZookeeperInstance, with JsonInstanceSerializer<ZookeeperInstance> as
	// Spring configures it: an instance whose payload is not one fails to
	// read.
	SpringPayload DiscoveryPayload = "spring"
	// ObjectPayload reads any JSON payload (JsonInstanceSerializer<Object>);
	// the program registers {"k": <id>}.
	ObjectPayload DiscoveryPayload = "object"
)

// Discovery drives a CuratorDiscovery program: one Curator client with one
// ServiceDiscovery on one base path. Its commands run one at a time.
type Discovery struct {
	*Process
	// Base is the base path (full server path).
	Base string
}

// JavaInstance is an instance as the Java side read it.
type JavaInstance struct {
	// Instance is the instance as Curator's serializer writes it after
	// reading it.
	Instance json.RawMessage `json:"instance"`
	// PayloadClass is the Java class of the payload read ("" for none).
	PayloadClass string `json:"payloadClass"`
	// Spring holds the ZookeeperInstance's fields when the payload is one.
	Spring *struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata"`
	} `json:"spring"`
}

// StartDiscovery starts a CuratorDiscovery program on the full server path
// base with the given payload class and waits until its Curator client is
// connected (READY). It fails the test on error, so it must be called from
// the test's goroutine.
func StartDiscovery(t testing.TB, servers []string, base string, payload DiscoveryPayload, opts ...Option) *Discovery {
	t.Helper()
	c := buildConfig(t, opts)
	p := Start(t, DiscoveryProgram, strings.Join(servers, ","), base, string(payload), msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Discovery{Process: p, Base: base}
}

// Register registers an instance built with ServiceInstance.builder():
// name, id (no white space), address 127.0.0.1, port, type (Curator's name,
// e.g. "DYNAMIC"), URI spec {scheme}://{address}:{port}, and the program's
// payload: ZookeeperInstance(id, name, {zone: z-<id>}) or {"k": id}.
func (d *Discovery) Register(ctx context.Context, name, id string, port int, typ string) error {
	_, err := d.Call(ctx, fmt.Sprintf("register %s %s %d %s", name, id, port, typ), "REGISTERED")
	return err
}

// Update gives the registered instance id a new port (updateService).
func (d *Discovery) Update(ctx context.Context, id string, port int) error {
	_, err := d.Call(ctx, fmt.Sprintf("update %s %d", id, port), "UPDATED")
	return err
}

// Unregister unregisters the instance id (unregisterService).
func (d *Discovery) Unregister(ctx context.Context, id string) error {
	_, err := d.Call(ctx, "unregister "+id, "UNREGISTERED")
	return err
}

// Names runs queryForNames.
func (d *Discovery) Names(ctx context.Context) ([]string, error) {
	l, err := d.Call(ctx, "names", "NAMES")
	if err != nil {
		return nil, err
	}
	return l.Fields()[1:], nil
}

// Query runs queryForInstances(name).
func (d *Discovery) Query(ctx context.Context, name string) ([]JavaInstance, error) {
	l, err := d.Call(ctx, "query "+name, "INSTANCES")
	if err != nil {
		return nil, err
	}
	return d.instances(l)
}

// StartCache starts a ServiceCache of name (one per name) and waits until
// its start returned (its first load done). Its listener prints
// "CHANGED <name>" at every cacheChanged.
func (d *Discovery) StartCache(ctx context.Context, name string) error {
	_, err := d.Call(ctx, "cache "+name, "CACHE")
	return err
}

// Cached returns the ServiceCache's getInstances.
func (d *Discovery) Cached(ctx context.Context, name string) ([]JavaInstance, error) {
	l, err := d.Call(ctx, "cached "+name, "CACHED")
	if err != nil {
		return nil, err
	}
	return d.instances(l)
}

// StartProvider starts a ServiceProvider of name (one per name).
func (d *Discovery) StartProvider(ctx context.Context, name string) error {
	_, err := d.Call(ctx, "provider "+name, "PROVIDER")
	return err
}

// Pick runs the provider's getInstance: the instance's id, "" for none.
func (d *Discovery) Pick(ctx context.Context, name string) (string, error) {
	l, err := d.Call(ctx, "pick "+name, "PICKED")
	if err != nil {
		return "", err
	}
	f := l.Fields()
	if len(f) != 2 {
		return "", fmt.Errorf("curatortest: %s: bad line %q", d.name, l.Text)
	}
	if f[1] == "-" {
		return "", nil
	}
	return f[1], nil
}

// Bench starts a new ServiceCache of name and reports how long its start
// (the first load) took, how much heap it added (after garbage
// collections), and how many instances it holds. Its changes print
// "CHANGED bench:<name>" lines (WaitChanged).
func (d *Discovery) Bench(ctx context.Context, name string) (load time.Duration, heap int64, n int, err error) {
	l, err := d.Call(ctx, "bench "+name, "BENCH")
	if err != nil {
		return 0, 0, 0, err
	}
	f := l.Fields()
	if len(f) != 4 {
		return 0, 0, 0, fmt.Errorf("curatortest: %s: bad line %q", d.name, l.Text)
	}
	ns, err1 := strconv.ParseInt(f[1], 10, 64)
	heap, err2 := strconv.ParseInt(f[2], 10, 64)
	n, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, fmt.Errorf("curatortest: %s: bad line %q", d.name, l.Text)
	}
	return time.Duration(ns), heap, n, nil
}

// WaitChanged waits for the next "CHANGED <label>" line (a cache's
// cacheChanged; label is the name given to StartCache, or "bench:<name>")
// and returns when the Go side read it.
func (d *Discovery) WaitChanged(ctx context.Context, label string) (time.Time, error) {
	l, err := d.Expect(ctx, "CHANGED "+label)
	return l.At, err
}

// SessionID returns the Curator client's ZooKeeper session id.
func (d *Discovery) SessionID(ctx context.Context) (int64, error) {
	l, err := d.Call(ctx, "session", "SESSION")
	if err != nil {
		return 0, err
	}
	f := l.Fields()
	if len(f) != 2 {
		return 0, fmt.Errorf("curatortest: %s: bad line %q", d.name, l.Text)
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	return int64(id), err
}

// Close closes the caches, the providers and the ServiceDiscovery, which
// unregisters every instance it registered.
func (d *Discovery) Close(ctx context.Context) error {
	_, err := d.Call(ctx, "close", "CLOSED")
	return err
}

func (d *Discovery) instances(l Line) ([]JavaInstance, error) {
	_, rest, _ := strings.Cut(l.Text, " ")
	var out []JavaInstance
	if err := json.Unmarshal([]byte(rest), &out); err != nil {
		return nil, fmt.Errorf("curatortest: %s: bad line %q: %w", d.name, l.Text, err)
	}
	return out, nil
}
