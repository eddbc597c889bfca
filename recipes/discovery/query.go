package discovery

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/engine"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
)

// recipe names the package in errors.
const recipe = "discovery"

// checkSegment checks that s is a usable node name below dir (a path as
// the caller gave it): non-empty, no '/', not "." or "..", nothing
// ZooKeeper rejects. what names it in the error.
func checkSegment(dir, what, s string) error {
	if s == "" || strings.Contains(s, "/") {
		return fmt.Errorf("%w: %s %q: want a non-empty path segment", session.ErrBadArgument, what, s)
	}
	if err := zksession.ValidatePath(path.Join(dir, "x") + "/" + s); err != nil {
		reason := err.Error()
		var pe *zksession.PathError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return fmt.Errorf("%w: %s %q: %s", session.ErrBadArgument, what, s, reason)
	}
	return nil
}

// servicePath checks base and name and returns the session and the
// service's path as given (base/name) and on the server.
func servicePath(sess *session.Session, base, name string) (*zksession.Session, string, string, error) {
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, "", "", err
	}
	if _, err := zs.Path(base); err != nil {
		return nil, "", "", err
	}
	if err := checkSegment(base, "service name", name); err != nil {
		return nil, "", "", err
	}
	p := path.Join(base, name)
	full, err := zs.Path(p)
	if err != nil {
		return nil, "", "", err
	}
	return zs, p, full, nil
}

// Names returns the names of the services registered under base (the
// children of base), sorted, as Curator's queryForNames; none when base
// does not exist. It blocks on one request, within ctx, waiting for the
// connection while it is down. Errors: ctx's, session.ErrClosed, ZooKeeper's
// refusals (zk.ErrNoAuth), and session.ErrBadArgument for a nil ctx or
// session or a bad base.
func Names(ctx context.Context, sess *session.Session, base string) ([]string, error) {
	if ctx == nil {
		return nil, engine.NewError(recipe, base, fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	zs, err := zksession.Of(sess)
	if err != nil {
		return nil, engine.NewError(recipe, base, err)
	}
	full, err := zs.Path(base)
	if err != nil {
		return nil, engine.NewError(recipe, base, err)
	}
	kids, err := children(ctx, zs, full)
	if err != nil {
		return nil, engine.NewError(recipe, base, err)
	}
	return kids, nil
}

// children lists the node full, sorted; none when it does not exist.
func children(ctx context.Context, zs *zksession.Session, full string) ([]string, error) {
	var kids []string
	err := zs.RetryAcrossSessions(ctx, func(c *zk.Conn) error {
		k, _, err := c.Children(full)
		if err == nil {
			kids = k
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	sort.Strings(kids)
	return kids, nil
}

// Instances returns the instances of the service name under base, sorted by
// node name, as Curator's queryForInstances: one request for the list and
// one per instance, within ctx. A node gone meanwhile, or whose data does
// not parse as an instance, is left out; none when the service does not
// exist. Errors are Names's, and session.ErrBadArgument for a bad name.
func Instances(ctx context.Context, sess *session.Session, base, name string) ([]Instance, error) {
	if ctx == nil {
		return nil, engine.NewError(recipe, path.Join(base, name), fmt.Errorf("%w: nil context", session.ErrBadArgument))
	}
	zs, p, full, err := servicePath(sess, base, name)
	if err != nil {
		return nil, engine.NewError(recipe, path.Join(base, name), err)
	}
	kids, err := children(ctx, zs, full)
	if err != nil {
		return nil, engine.NewError(recipe, p, err)
	}
	out := make([]Instance, 0, len(kids))
	for _, k := range kids {
		var data []byte
		err := zs.RetryAcrossSessions(ctx, func(c *zk.Conn) error {
			d, _, err := c.Get(full + "/" + k)
			if err == nil {
				data = d
			}
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, engine.NewError(recipe, p, err)
		}
		var in Instance
		if in.UnmarshalJSON(data) != nil {
			continue
		}
		out = append(out, in)
	}
	return out, nil
}
