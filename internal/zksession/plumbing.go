package zksession

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// The methods in this file are what the recipes engine and the recipe
// packages need of a Session beyond its public API: epochs bound to
// operations, the retry loop, ephemeral creates checked against their
// session, durable deletes and sweeps, shared watches and the lease context
// of the loss policy. All are safe for concurrent use.

// GuaranteedDelete queues the deletion of the ephemeral node path (full
// server path) owned by ep's session, with version (-1 for any). One
// background goroutine deletes it as soon as the connection is up on that
// session id, retrying connection-level errors across disconnects. Once the
// connection has a different session id (after a Lost), it deletes the node
// while the node is still owned by ep's session (the server removes a lost
// session's ephemerals only when it expires it, which can be seconds after a
// member told the client it had expired), and is finished once the node is
// gone or owned by another session; after a local-timer Lost the same id may
// come back, and then the plain delete happens. A missing node counts as deleted; any other failure is logged at
// error level and dropped. Close lets the queue drain for at most 2 s, then
// logs and drops what is left. The returned channel is closed when the item
// is finished: deleted, found missing, or dropped. Never blocks; safe for
// concurrent use.
func (s *Session) GuaranteedDelete(ep *Epoch, path string, version int32) <-chan struct{} {
	return s.guaranteedDelete(ep, path, version)
}

// GuaranteedDeleteIfData queues the deletion of the node path while its data
// equals data, whoever owns it: the durable cleanup of a node with a fixed
// name, which by now may be someone else's (data must be unique to one
// create, e.g. carry a UUID). The delete is conditional on the version read
// with the data, and is sent only while go-zookeeper is connected on the
// session it read on (see the recipes engine's fixed-node locks). It runs on
// any session, like GuaranteedSweep, and is finished once the node is gone or
// carries other data. The returned channel is closed when it is finished or
// dropped. Never blocks; safe for concurrent use.
func (s *Session) GuaranteedDeleteIfData(ep *Epoch, path string, data []byte) <-chan struct{} {
	return s.guaranteedDeleteIfData(ep, path, data)
}

// GuaranteedDeleteOwned queues the deletion of the ephemeral node path (full
// server path) that ep's session created as czxid (the node's Czxid): the
// durable cleanup of a node whose name another session may take once it is
// gone. Once the connection is up, on any session, the background goroutine
// reads the node and deletes it, at the version read, only while its Czxid
// is czxid and its ephemeral owner is ep's session; it is finished once the
// node is gone or is another node. The delete is sent only while connected
// on the session it read on. ZooKeeper cannot make a delete conditional on
// a node's owner: a node that another session deleted and created again
// under the same name between the read and the delete, with the same
// version, is deleted all the same. Other failures and Close are handled as
// for GuaranteedDelete. The returned channel is closed when the item is
// finished or dropped. Never blocks; safe for concurrent use.
func (s *Session) GuaranteedDeleteOwned(ep *Epoch, path string, czxid int64) <-chan struct{} {
	return s.guaranteedDeleteOwned(ep, path, czxid)
}

// GuaranteedSweep queues the deletion of every child of the directory dir
// (full server path) whose name starts with prefix, whoever owns it: the
// durable cleanup after a create whose outcome is unknown (its reply was
// lost, or its caller gave up while it was in flight). prefix must identify
// nodes of one caller only, such as a protected name's "_c_<uuid>-". The
// background goroutine lists dir once the connection is up (on any session:
// a create that go-zookeeper re-sent on a new session landed there) and
// deletes what matches, retrying connection-level errors across disconnects
// until one listing and its deletes have succeeded, or Close. Queue it only
// once the create has returned: a request still in flight could land after
// the sweep. The returned channel is closed when the sweep is finished or
// dropped. Never blocks; safe for concurrent use.
func (s *Session) GuaranteedSweep(ep *Epoch, dir, prefix string) <-chan struct{} {
	return s.guaranteedSweep(ep, dir, prefix)
}

// CreateEphemeral creates an ephemeral node at the full server path p bound to
// the epoch ep, with ACL(); flags may add zk.FlagSequence (zk.FlagEphemeral is
// implied). Nil data is written as empty data (NodeData). It returns the
// created path and its Stat.
//
// go-zookeeper queues a request made while the connection is down and may
// send it on a NEW session after the old one expired, where it succeeds (see
// HAZARDS). So after a successful create CreateEphemeral reads the node's
// Stat and accepts it only if its ephemeralOwner is ep.SessionID() and ep is
// still live; otherwise it deletes the node (retrying until it is gone, the
// owning session ends, or Close) and returns an error wrapping
// ErrSessionChanged.
//
// It does not wait for the connection and does not retry (protected-create
// recovery is the caller's job; wrap it in Retry to wait for the connection
// and retry connection errors). It blocks until the outcome is known, ep ends
// (error wrapping ErrLost, or ErrClosed), ctx ends (ctx's error) or Close. If
// it returns before the outcome is known, the request is left to a
// background goroutine of the Session that deletes the node if it is created
// after all, so an abandoned create leaves nothing behind. ZooKeeper errors
// (zk.ErrNodeExists, zk.ErrNoNode for a missing parent, zk.ErrNoAuth, ...)
// are wrapped in an *OpError naming p (and, for zk.ErrNoAuth, the parent
// whose ACL refused the create). It is never retried. Safe for concurrent
// use.
func (s *Session) CreateEphemeral(ctx context.Context, ep *Epoch, p string, data []byte, flags int32) (string, *zk.Stat, error) {
	return s.createEphemeral(ctx, ep, p, data, flags)
}

// Retry runs op with the Session's connection until it succeeds or fails
// permanently, within ctx and within the epoch ep:
//
//   - before each attempt it waits until the connection is up on ep (it never
//     spins while the connection is down);
//   - connection-level errors (zk.ErrConnectionClosed, zk.ErrNoServer,
//     zk.ErrSessionMoved) are retried with the Session's backoff (WithRetry);
//     every other error is permanent and returned as op returned it;
//   - when ep ends it returns an error matching ErrLost (ErrClosed after
//     Close), wrapping the last op error too if there was one; zk.ErrSessionExpired
//     from op is reported the same way;
//   - when ctx ends it returns ctx's error;
//   - when op succeeds but the connection's session id is no longer ep's, or
//     ep ended meanwhile, it returns an error wrapping ErrSessionChanged and
//     ErrLost (ErrClosed after Close).
//
// The last case exists because go-zookeeper keeps a request that was queued
// but not yet sent when the connection dropped, and sends it on the next
// connection, which may belong to a NEW session (see HAZARDS): op may then
// have run on the new session. Retry detects it afterwards, it cannot
// prevent it. Reads are unaffected (the result is discarded), but a write op
// must be safe to run on another session: make it conditional (a version, an
// owner or data check that only our own node passes), and check
// conn.State() == zk.StateHasSession && conn.SessionID() == ep.SessionID()
// right before sending it, which narrows the window to a request queued just
// as the connection drops.
//
// ctx is the only bound: go-zookeeper has no per-call context, so each
// attempt runs on a goroutine of the Session (Close waits for it) and Retry
// stops waiting for it as soon as ctx ends, returning ctx's error whatever
// the network does. The abandoned attempt completes or fails later and its
// result is discarded: op must therefore not write to memory that the caller
// reads after Retry returned an error (assign to the caller's local
// variables, or return through them only on success), and a write op whose
// late success matters must be undone by other means (see Call's late
// function, CreateEphemeral and GuaranteedSweep). Safe for concurrent use.
func (s *Session) Retry(ctx context.Context, ep *Epoch, op func(conn *zk.Conn) error) error {
	return s.retry(ctx, ep, op, nil)
}

// RetryAcrossSessions is Retry for an operation that does not depend on
// the session (a write to a persistent node, conditional so that a repeat
// applies at most once, or a read): it waits for a live epoch within ctx,
// runs op with Retry, and after a session loss goes on on the next session.
// An op that succeeded on another session than the one it was bound to
// (ErrSessionChanged) succeeded. Errors: ctx's, ErrClosed, and op's.
func (s *Session) RetryAcrossSessions(ctx context.Context, op func(conn *zk.Conn) error) error {
	return s.retryAcrossSessions(ctx, op, nil)
}

func (s *Session) retryAcrossSessions(ctx context.Context, op func(conn *zk.Conn) error, w *Write) error {
	for {
		ep, err := s.WaitConnected(ctx)
		if err != nil {
			return err
		}
		err = s.retry(ctx, ep, op, w)
		switch {
		case err == nil, errors.Is(err, ErrSessionChanged):
			return nil
		case errors.Is(err, ErrLost) && ctx.Err() == nil:
			continue
		}
		return err
	}
}

// EnsureContainers makes sure the full server path p (as returned by Path)
// exists: the namespace's nodes are created as persistent nodes, every node
// below the namespace (p included) as a container node, all with ACL() and
// empty data (as Curator creates parents, never a null); nodes
// that exist are left as they are. It retries connection-level errors like
// Retry (across epochs: creating parents is idempotent) and creates again
// when the server reaps a container in between. Errors wrap ErrBadArgument for a
// bad p or one outside the namespace, ctx's error, or ErrClosed; a create
// that ZooKeeper refuses (zk.ErrNoAuth when the parent's ACL does not admit
// the session's credentials) fails at once, not retried, with an *OpError
// naming the node it could not create.
func (s *Session) EnsureContainers(ctx context.Context, p string) error {
	return s.ensureContainers(ctx, p, s.ensureOnce)
}

// CreateContainers is EnsureContainers for a caller that has just found p
// missing (a create under it failed with zk.ErrNoNode): it does not ask
// whether p exists, and creates from p upwards until a create succeeds or
// finds its node, then back down, so that a new directory under an existing
// parent (a lock per key under /locks) costs one request.
func (s *Session) CreateContainers(ctx context.Context, p string) error {
	return s.ensureContainers(ctx, p, s.createMissing)
}

// LeaseContext returns the context for a lease taken now. Under Standard it is
// canceled (cause ErrSuspended) when the connection is down at the lease
// deadline, two thirds of the session timeout after the send time of the
// newest answered request, unless the same session is back before it, and at
// Lost or Closed (cause ErrLost or ErrClosed); under EndAtDisconnect at the
// first Suspended, Lost or Closed after the current connected interval
// began. Under both, if the lease context of the interval has ended, it is
// already canceled. Under SessionOnly it is canceled when
// the current epoch ends (cause ErrLost or ErrClosed); if the session is lost
// now it is already canceled. After Close it is canceled with ErrClosed.
// Match the cause with errors.Is(context.Cause(ctx), ErrLost) and so on.
func (s *Session) LeaseContext() context.Context {
	return s.leaseContext()
}

// WaitLease is WaitConnected that also returns LeaseContext() taken at the
// same instant, so the two agree: the context is live when WaitLease returns
// and belongs to the returned epoch.
func (s *Session) WaitLease(ctx context.Context) (*Epoch, context.Context, error) {
	return s.waitLease(ctx)
}

// GetW reads the node at the full server path p and returns its data and
// Stat with a data watch that fires at the node's next change or deletion
// (or with zk.EventNotWatching when the session ends). Watches are shared:
// if the Session already holds an unfired data watch on p, GetW reads the
// node without a watch and subscribes to that one, so go-zookeeper and the
// server keep at most one data watch per node for this Session, however many
// callers wait on it or gave up waiting. A missing node returns
// zk.ErrNoNode and no watch. It blocks on ZooKeeper without a context: run
// it inside Retry, which bounds it by ctx.
func (s *Session) GetW(p string) ([]byte, *zk.Stat, *Watch, error) {
	return s.getW(p)
}

// ChildrenW is GetW for the children of p: it returns the children and a
// shared child watch that fires at the next change of the list.
func (s *Session) ChildrenW(p string) ([]string, *zk.Stat, *Watch, error) {
	return s.childrenW(p)
}

// CreatedZxid returns the czxid of the node that the Session's latest
// successful create of p (the path as given to Create: for a sequential
// node, its prefix) created, or 0 if the Session does not know it. It is
// read from the create's reply, which go-zookeeper does not return, and
// handed out once: a second call for the same create returns 0. Call it
// right after Create returned (the Session keeps the last 4,096 creates).
func (s *Session) CreatedZxid(p string) int64 {
	return s.wire.createdZxid(p)
}

// WatchCount returns how many watch registrations the Session holds in
// go-zookeeper (set and not yet fired, as far as it knows): the number of
// distinct nodes and kinds watched. For tests and monitoring.
func (s *Session) WatchCount() int {
	return s.watchCount()
}
