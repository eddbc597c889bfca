package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// A driver whose Anchor is not "" does not queue its node behind the
// others: the engine places it beside the anchor, a child of the recipe
// directory that the caller holds. The node is created EPHEMERAL, not
// sequential, and named
//
//	_c_<uuid>-<Marker><the anchor's sequence text>
//
// so that it sorts with the anchor, ahead of every node queued after the
// anchor. The create is a multi with a check of the anchor, so it succeeds
// only while the anchor exists; if the anchor is gone the acquire fails with
// an error matching ErrNodeDeleted and nothing is created. Everything else
// (ghost recovery, the wait, the lease, cleanup) is as for a queued node.
//
// This is how a read-write lock's write holder takes the read lock without
// letting a writer queued meanwhile in when it then releases the write lock
// (Curator 5.5+, CURATOR-621). A driver of placed nodes decides on sequences,
// not positions: a placed node has the same sequence as its anchor, and
// which of the two sorts first is left to their names.

// anchorSeq returns the sequence text of a placing driver's anchor (the text
// after its last marker, as the server wrote it), or "" for a driver whose
// nodes are queued.
func anchorSeq(d *Driver) (string, error) {
	anchor := d.Anchor
	if anchor == "" {
		return "", nil
	}
	c, ok := parseChild(anchor, d.Markers)
	if !ok || strings.ContainsAny(anchor, "/\x00") {
		return "", fmt.Errorf("%w: anchor %q has no marker and sequence", ErrBadDriver, anchor)
	}
	return anchor[strings.LastIndex(anchor, c.Marker)+len(c.Marker):], nil
}

// protectedPrefix returns ProtectedPrefix(a.uuid), built at most once for
// a UUID: run builds it with the UUID, other attempts (fixed, counted) set
// only the UUID. Called on the attempt's goroutine only.
func (a *attempt) protectedPrefix() string {
	p := a.prefix
	if len(p) != len(protectedMarker)+len(a.uuid)+1 || p[len(protectedMarker):len(p)-1] != a.uuid {
		p = ProtectedPrefix(a.uuid)
		a.prefix = p
	}
	return p
}

// createOn sends our node's create on c: EPHEMERAL_SEQUENTIAL for a queued
// node, the checked EPHEMERAL create of createPlaced for a placed one.
func (a *attempt) createOn(c *zk.Conn, base string) (string, int64, error) {
	if anchor := a.d.Anchor; anchor != "" {
		return a.e.createPlaced(c, base, a.data, a.e.path+"/"+anchor)
	}
	return a.e.createNode(c, base, a.data, zk.FlagEphemeralSequential)
}

// createPlaced creates the EPHEMERAL node p only if anchor exists: one multi
// of a check of anchor (any version), the create and, as createNode does,
// an empty setData on the recipe directory that returns our czxid (the
// fencing token). Without the setData (plain-create mode) the token is read
// later.
func (e *Engine) createPlaced(conn *zk.Conn, p string, data []byte, anchor string) (string, int64, error) {
	withToken := !e.noMulti.Load()
	ops := []any{
		&zk.CheckVersionRequest{Path: anchor, Version: -1},
		&zk.CreateRequest{Path: p, Data: zksession.NodeData(data), Acl: e.zs.ACL(), Flags: zk.FlagEphemeral},
	}
	if withToken {
		ops = append(ops, &zk.SetDataRequest{Path: e.path, Data: zksession.NodeData(nil), Version: -1})
	}
	res, err := conn.Multi(ops...)
	if len(res) == len(ops) {
		switch {
		case err == nil && withToken && res[2].Stat != nil:
			return res[1].String, res[2].Stat.Mzxid, nil
		case err == nil:
			return res[1].String, 0, nil
		case errors.Is(res[0].Error, zk.ErrNoNode):
			// Not zk.ErrNoNode itself: that would read as a missing
			// directory, which is recreated and the create tried again.
			return "", 0, fmt.Errorf("%w: %s, which our node was to be placed beside, is gone", ErrNodeDeleted, anchor)
		case withToken && errors.Is(res[2].Error, zk.ErrNoAuth) && !errors.Is(res[1].Error, zk.ErrNoAuth):
			if !e.noMulti.Swap(true) {
				e.log().Info("no WRITE permission on the recipe directory: creating nodes with a plain create (one more request per acquire)")
			}
			return e.createPlaced(conn, p, data, anchor)
		}
	}
	return "", 0, refusedMulti(ops, res, err)
}
