package curatortest

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// GroupProgram is CuratorGroup.java: a GroupMember, and on demand a
// PersistentNode (EPHEMERAL_SEQUENTIAL with protection).
const GroupProgram Program = "CuratorGroup"

// Group drives a CuratorGroup program: one Curator client with one
// GroupMember on one full server path.
type Group struct {
	*Process
	// Path is the group path (full server path).
	Path string
	// ID is the member id.
	ID string
}

// StartGroup starts a CuratorGroup member with the given id and data (no
// white space; "" is empty data) of the group at the full server path and
// waits until its Curator client is connected (READY). The member has not
// joined: call Start. It fails the test on error, so it must be called from
// the test's goroutine.
func StartGroup(t testing.TB, servers []string, path, id, data string, opts ...Option) *Group {
	t.Helper()
	if id == "" || strings.ContainsAny(id, " \t\r\n") || strings.ContainsAny(data, " \t\r\n") {
		t.Fatalf("curatortest: group member %q, data %q: want a non-empty id and data without white space", id, data)
	}
	c := buildConfig(t, opts)
	p := Start(t, GroupProgram, strings.Join(servers, ","), path, id, dashIfEmpty(data), msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Group{Process: p, Path: path, ID: id}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Start joins the group (GroupMember.start) and waits for STARTED; Curator
// creates the member's node in the background.
func (g *Group) Start(ctx context.Context) error {
	_, err := g.Call(ctx, "start", "STARTED")
	return err
}

// Members asks GroupMember.getCurrentMembers: every member's id and data as
// the Java side sees them.
func (g *Group) Members(ctx context.Context) (map[string]string, error) {
	l, err := g.Call(ctx, "members", "MEMBERS")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for _, f := range l.Fields()[1:] {
		id, data, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("curatortest: %s: bad line %q", g.name, l.Text)
		}
		out[id] = data
	}
	return out, nil
}

// SetData sets this member's data (GroupMember.setThisData; no white space,
// "" is empty); Curator writes it in the background.
func (g *Group) SetData(ctx context.Context, data string) error {
	_, err := g.Call(ctx, "setdata "+dashIfEmpty(data), "SET")
	return err
}

// Close leaves the group (GroupMember.close deletes the member's node).
func (g *Group) Close(ctx context.Context) error {
	_, err := g.Call(ctx, "close", "CLOSED")
	return err
}

// NodeMode is the CreateMode and protection of a PersistentNode.
type NodeMode string

// The modes of StartNode.
const (
	// NodeEphemeral is CreateMode.EPHEMERAL without protection.
	NodeEphemeral NodeMode = "eph"
	// NodeProtectedEphemeral is CreateMode.EPHEMERAL with protection.
	NodeProtectedEphemeral NodeMode = "peph"
	// NodeProtectedSequential is CreateMode.EPHEMERAL_SEQUENTIAL with
	// protection.
	NodeProtectedSequential NodeMode = "pseq"
)

// StartNode starts a PersistentNode in the given mode on the full server
// path base with data (no white space), waits for its initial create and
// returns its actual path. One node at a time: CloseNode before the next.
func (g *Group) StartNode(ctx context.Context, mode NodeMode, base, data string) (string, error) {
	l, err := g.Call(ctx, "node "+string(mode)+" "+base+" "+dashIfEmpty(data), "NODE")
	if err != nil {
		return "", err
	}
	f := l.Fields()
	if len(f) != 2 {
		return "", fmt.Errorf("curatortest: %s: bad line %q", g.name, l.Text)
	}
	return f[1], nil
}

// CloseNode closes the PersistentNode (it deletes its node).
func (g *Group) CloseNode(ctx context.Context) error {
	_, err := g.Call(ctx, "nodeclose", "NODECLOSED")
	return err
}
