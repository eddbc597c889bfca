package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/recipes/group"
	"github.com/zkrecipes/zkrecipes/session"
)

// maxData is the largest instance JSON accepted: ZooKeeper's packet limit
// is 1 MiB, requests included (as package group).
const maxData = 512 << 10

// cleanupTimeout bounds how long Close waits for the node's deletion; a
// deletion that takes longer goes on in the session's background queue.
const cleanupTimeout = 5 * time.Second

// nodeKeeper keeps the node of a Registration: a group.Node for the
// ephemeral types, a persistent for the others.
type nodeKeeper interface {
	Wait(ctx context.Context) error
	SetData(ctx context.Context, data []byte) error
	Path() string
	Close() error
}

// Registration keeps one instance registered at <base>/<name>/<id>, as
// Curator's ServiceDiscovery.registerService does, and keeps it there: the
// node is created again after someone else deleted it, and a Dynamic or
// DynamicSequential instance's node after a session loss, as soon as the
// next session is connected. Close unregisters it. See the package
// documentation for the nodes and what a loss means.
//
// A Registration is safe for concurrent use.
type Registration struct {
	path string // the instance's path as given: base/name/id
	node nodeKeeper

	mu   sync.Mutex
	inst Instance
}

// Register validates inst and starts keeping it registered under base on
// sess; it does no I/O itself (Wait blocks until the node exists). An empty
// ID gets a random UUID and a zero RegistrationTime the current time, as
// Curator's ServiceInstanceBuilder does. Name and ID must be non-empty path
// segments ZooKeeper accepts (no '/', not "." or ".."); Port and SSLPort
// within 0 to 65535; Payload nil or JSON; URISpec a template that parses;
// the instance's JSON at most 512 KiB. Options: WithLogger. A nil session,
// a bad base path, a bad instance or a bad option gives an error matching
// session.ErrBadArgument, and starts nothing.
//
// A Dynamic instance's node is named <id>; when another session holds that
// name, the registration waits until that node is gone (its session ended
// or it was deleted), then creates its own.
func Register(sess *session.Session, base string, inst Instance, opts ...Option) (*Registration, error) {
	r, err := newRegistration(sess, base, inst, opts)
	if err != nil {
		return nil, engine.NewError(recipe, path.Join(base, inst.Name, inst.ID), err)
	}
	return r, nil
}

func newRegistration(sess *session.Session, base string, inst Instance, opts []Option) (*Registration, error) {
	if inst.ID == "" {
		inst.ID = engine.NewUUID()
	}
	if inst.RegistrationTime.IsZero() {
		inst.RegistrationTime = time.Now()
	}
	inst.RegistrationTime = time.UnixMilli(inst.RegistrationTime.UnixMilli())
	zs, sp, _, err := servicePath(sess, base, inst.Name)
	if err != nil {
		return nil, err
	}
	if err := checkSegment(sp, "instance id", inst.ID); err != nil {
		return nil, err
	}
	data, err := checkInstance(inst)
	if err != nil {
		return nil, err
	}
	cfg, err := buildConfig(forRegister, opts)
	if err != nil {
		return nil, err
	}
	p := path.Join(sp, inst.ID)
	full, err := zs.Path(p)
	if err != nil {
		return nil, err
	}
	lg := cfg.lg
	if lg == nil {
		lg = zs.Logger()
	}
	lg = lg.Named(recipe)
	r := &Registration{path: p, inst: inst}
	switch inst.Type {
	case Dynamic, DynamicSequential:
		mode := group.Ephemeral
		if inst.Type == DynamicSequential {
			mode = group.ProtectedEphemeralSequential
		}
		n, err := group.NewNode(sess, p, mode, data, group.WithLogger(lg))
		if err != nil {
			return nil, unwrapGroup(err)
		}
		if err := n.Start(); err != nil {
			return nil, unwrapGroup(err)
		}
		r.node = groupNode{n}
	default:
		r.node = newPersistent(zs, p, full, data, lg.With(zap.String("path", full)))
	}
	return r, nil
}

// checkInstance checks what Register and Update accept beyond the names,
// and returns the instance's JSON.
func checkInstance(inst Instance) ([]byte, error) {
	switch inst.Type {
	case Dynamic, Static, Permanent, DynamicSequential:
	default:
		return nil, fmt.Errorf("%w: service type %v", session.ErrBadArgument, inst.Type)
	}
	for _, p := range [...]struct {
		what string
		v    int
	}{{"port", inst.Port}, {"ssl port", inst.SSLPort}} {
		if p.v < 0 || p.v > 65535 {
			return nil, fmt.Errorf("%w: %s %d", session.ErrBadArgument, p.what, p.v)
		}
	}
	if _, err := parseURISpec(inst.URISpec); err != nil {
		return nil, fmt.Errorf("%w: %v", session.ErrBadArgument, err)
	}
	if inst.Payload != nil && !json.Valid(inst.Payload) {
		return nil, fmt.Errorf("%w: payload is not JSON", session.ErrBadArgument)
	}
	data, err := inst.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", session.ErrBadArgument, err)
	}
	if len(data) > maxData {
		return nil, fmt.Errorf("%w: instance JSON of %d bytes (at most %d)", session.ErrBadArgument, len(data), maxData)
	}
	return data, nil
}

// groupNode adapts a group.Node: its errors name this package, not group.
type groupNode struct{ n *group.Node }

func (g groupNode) Wait(ctx context.Context) error { return unwrapGroup(g.n.Wait(ctx)) }
func (g groupNode) SetData(ctx context.Context, data []byte) error {
	return unwrapGroup(g.n.SetData(ctx, data))
}
func (g groupNode) Path() string { return g.n.Path() }
func (g groupNode) Close() error { return g.n.Close() }

// unwrapGroup takes off package group's name and path from err, which this
// package names itself.
func unwrapGroup(err error) error {
	var e *engine.Error
	if errors.As(err, &e) && e.Recipe == "group" {
		return e.Err
	}
	return err
}

func (r *Registration) errf(err error) error { return engine.NewError(recipe, r.path, err) }

// Instance returns the instance as registered (its ID and RegistrationTime
// filled in), with the data of the last Update. It does no I/O.
func (r *Registration) Instance() Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inst
}

// Path returns the path of the instance's node (relative to the session's
// namespace) as it exists now, or "" while it does not exist: <base>/<name>/<id>,
// or for a DynamicSequential instance <base>/<name>/_c_<uuid>-<id><seq>. It
// does no I/O.
func (r *Registration) Path() string { return r.node.Path() }

// Wait blocks until the instance's node exists, at once if it does. It
// returns an error matching ctx's when ctx ends first, session.ErrClosed
// after Close or once the session is closed, and the error that stopped the
// registration (a ZooKeeper refusal such as zk.ErrNoAuth). The node may be
// gone again by the time the caller looks. A nil ctx gives
// session.ErrBadArgument. Safe to call concurrently.
func (r *Registration) Wait(ctx context.Context) error {
	if ctx == nil {
		return r.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	return r.errf(r.node.Wait(ctx))
}

// Update replaces the registered instance's data with inst and blocks until
// the node holds it (Curator's updateService). inst must have the
// registration's Name, ID and Type; a zero RegistrationTime keeps the
// registration's. When ctx ends first it returns an error matching ctx's;
// the data is written all the same as soon as it can be, and Instance
// returns it already. That error also matches recipes.ErrUnknownOutcome when
// a write went out meanwhile and its answer has not come (the node may
// already hold the data); it does not when no write was sent (the
// connection was down all along). The write is conditional on the node's
// version as last read, so it never overwrites a change it has not read; a
// write whose answer was lost on a connection that came back is read back
// and sent again as needed, not reported. It returns session.ErrClosed
// after Close, the error that stopped the registration (see Wait), and
// session.ErrBadArgument for a nil ctx or an instance Register would refuse
// or of another Name, ID or Type. Safe to call concurrently.
func (r *Registration) Update(ctx context.Context, inst Instance) error {
	if ctx == nil {
		return r.errf(fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	r.mu.Lock()
	cur := r.inst
	r.mu.Unlock()
	if inst.Name != cur.Name || inst.ID != cur.ID || inst.Type != cur.Type {
		return r.errf(fmt.Errorf("%w: update of %s/%s (%v) with %s/%s (%v): name, id and type stay", session.ErrBadArgument,
			cur.Name, cur.ID, cur.Type, inst.Name, inst.ID, inst.Type))
	}
	if inst.RegistrationTime.IsZero() {
		inst.RegistrationTime = cur.RegistrationTime
	}
	inst.RegistrationTime = time.UnixMilli(inst.RegistrationTime.UnixMilli())
	data, err := checkInstance(inst)
	if err != nil {
		return r.errf(err)
	}
	r.mu.Lock()
	r.inst = inst
	r.mu.Unlock()
	return r.errf(r.node.SetData(ctx, data))
}

// Close unregisters the instance: it stops keeping it, deletes its node
// (whatever its Type, as Curator's unregisterService does; waiting a few
// seconds at most, then in the session's background queue), and returns
// after every goroutine it started has exited. It deletes only the node it
// created or wrote: a node that another session has since created under the
// same name is left alone. A Static or Permanent node outlives a
// Registration closed after its session: with no session left to delete it,
// it stays on the server (close the Registration first). Calls waiting in
// Wait or Update return session.ErrClosed. Idempotent; returns nil.
func (r *Registration) Close() error { return r.node.Close() }
