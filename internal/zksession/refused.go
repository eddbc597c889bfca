package zksession

import (
	"errors"
	"path"

	"github.com/go-zookeeper/zk"
)

// OpError is a ZooKeeper request that failed: the operation, the full server
// path it was sent for, and the error, which errors.Is still matches
// (zk.ErrNoAuth, zk.ErrInvalidACL, ...). The Session and the recipes return
// it (wrapped in their own errors) when ZooKeeper refuses a request for good,
// so that the message names the node whose ACL to look at; find it with
// errors.As.
type OpError struct {
	// Op is the operation: "create", "delete", "read", "watch", "list",
	// "set" or "check" (a version check in a transaction).
	Op string
	// Path is the full server path of the request (for a sequential create,
	// the path before the server's sequence suffix).
	Path string
	// Err is the error.
	Err error
}

// ACLPath returns the node whose ACL ZooKeeper checked: the parent of Path
// for a create or a delete (ZooKeeper checks CREATE and DELETE on the
// parent), Path itself for every other operation.
func (e *OpError) ACLPath() string {
	if e.Op == "create" || e.Op == "delete" {
		return path.Dir(e.Path)
	}
	return e.Path
}

// Error returns "<op> <path>: <error>"; for zk.ErrNoAuth it names the ACL
// that refused, "create <path>: refused by the ACL of <parent>: zk: not
// authenticated" or "read <path>: refused by its ACL: zk: not authenticated".
func (e *OpError) Error() string {
	msg := e.Op + " " + e.Path + ": "
	if errors.Is(e.Err, zk.ErrNoAuth) {
		if p := e.ACLPath(); p != e.Path {
			msg += "refused by the ACL of " + p + ": "
		} else {
			msg += "refused by its ACL: "
		}
	}
	if e.Err == nil {
		return msg + "<nil>"
	}
	return msg + e.Err.Error()
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// Refused returns err as an *OpError of op on the full server path p when
// err is a refusal that retrying cannot cure: the ACL refuses the session's
// credentials (zk.ErrNoAuth, zk.ErrAuthFailed) or the request is invalid
// (zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrBadArguments,
// zk.ErrNoChildrenForEphemerals, zk.ErrAPIError). Any other error (nil,
// connection and session errors, ctx's error, a missing node, ...) and one
// that already carries an *OpError are returned as they are. Recipes wrap
// the results of their requests with it.
func Refused(op, p string, err error) error {
	if err == nil || !refusal(err) {
		return err
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Path: p, Err: err}
}

// refusal reports the errors Refused wraps.
func refusal(err error) bool {
	for _, r := range [...]error{zk.ErrNoAuth, zk.ErrAuthFailed, zk.ErrInvalidACL, zk.ErrInvalidFlags,
		zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals, zk.ErrAPIError} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// Permanent reports whether err is one that sending the same request again
// cannot cure: a refusal (see Refused), an invalid path, a reply too large
// for the client's buffer, or a programming error caught below (a bad
// argument, an epoch of another Session). A recipe that repeats its work on
// its own (a leader's campaign, a node kept in place) stops on it.
func Permanent(err error) bool {
	if refusal(err) {
		return true
	}
	for _, p := range [...]error{zk.ErrInvalidPath, zk.ErrShortBuffer, ErrBadArgument, ErrBadEpoch} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
