package zksession

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// The session's dialer wrapper (wire.go) reads and rewrites go-zookeeper's
// wire traffic: it relies on the layout of its requests and replies, on one
// Write per request, and on which fields go-zookeeper reads (see
// docs/design.md, "The wire layer"). That was verified against the versions
// below only, so Connect refuses a binary built with any other: Go's module
// selection can give a user a newer go-zookeeper than this module asks for,
// and a release that read a reply's zxid (for pings, say) or sent
// SetWatches2 would silently undo what the wrapper guarantees. There is no fallback that rewrites nothing: the loss timer,
// the negotiated timeout and the handshake bound come from the same bytes.

// zkModule is go-zookeeper's module path.
const zkModule = "github.com/go-zookeeper/zk"

// verifiedZK maps each go-zookeeper version the wrapper was verified with to
// the go.sum hash of the published module.
var verifiedZK = map[string]string{
	"v1.0.4": "h1:DPzxraQx7OrPyXq2phlGlNSIyWEsAox0RJmjTseMV6I=",
}

// latestVerified is the version the error tells users to pin.
const latestVerified = "v1.0.4"

// ErrUnverifiedClient is wrapped by Connect's error when the binary was
// built with a go-zookeeper the wire layer was not verified with.
var ErrUnverifiedClient = errors.New("unverified go-zookeeper version")

// ClientBuild is what a binary's build information says about the
// go-zookeeper it was built with.
type ClientBuild struct {
	// Known is false when the binary records no go-zookeeper module: a test
	// binary of a library package (the go command records no dependencies
	// for those), or a build outside the go command.
	Known bool
	// Desc describes the module, e.g. "v1.0.4" or "v1.0.4 replaced by ../zk".
	Desc string
}

// CheckClient reports which go-zookeeper bi records, and an error wrapping
// ErrUnverifiedClient unless it is a verified version of the published
// module (a replace by the same module at a verified version, or a vendored
// copy without a hash, is accepted). A nil bi, or one without go-zookeeper,
// is not known and gives no error: the go command records the module's
// dependencies in every program it builds, so an unknown build is a library
// test binary or a build outside it.
func CheckClient(bi *debug.BuildInfo) (ClientBuild, error) {
	if bi == nil {
		return ClientBuild{}, nil
	}
	var dep *debug.Module
	for _, d := range bi.Deps {
		if d != nil && d.Path == zkModule {
			dep = d
			break
		}
	}
	if dep == nil {
		return ClientBuild{}, nil
	}
	used := dep
	b := ClientBuild{Known: true, Desc: dep.Version}
	if r := dep.Replace; r != nil {
		used = r
		switch {
		case r.Path == zkModule:
			b.Desc = fmt.Sprintf("%s replaced by %s", dep.Version, r.Version)
		case r.Version == "" || r.Version == "(devel)":
			b.Desc = fmt.Sprintf("%s replaced by the directory %s", dep.Version, r.Path)
		default:
			b.Desc = fmt.Sprintf("%s replaced by %s %s", dep.Version, r.Path, r.Version)
		}
	} else if dep.Version == "(devel)" {
		b.Desc = "(devel), a local copy (a go.work workspace module)"
	}
	want, ok := verifiedZK[used.Version]
	switch {
	case used.Path != zkModule || !ok:
	case used.Sum != "" && used.Sum != want:
		b.Desc += fmt.Sprintf(" with hash %s, not the published module's %s", used.Sum, want)
	default:
		return b, nil
	}
	return b, fmt.Errorf("session: %w: this binary was built with %s %s; the session reads and rewrites "+
		"go-zookeeper's wire traffic and was verified only with %s. Pin it in go.mod with "+
		"`require %s %s` or, if another module requires a newer one, "+
		"`replace %s => %s %s`, then run `go mod tidy`",
		ErrUnverifiedClient, zkModule, b.Desc, latestVerified, zkModule, latestVerified,
		zkModule, zkModule, latestVerified)
}
