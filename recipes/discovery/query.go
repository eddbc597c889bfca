package discovery

import (
	"context"

	"github.com/zkrecipes/zkrecipes/session"
)

// Names returns the names of the services registered under base (the
// children of base), sorted, as Curator's queryForNames; none when base
// does not exist. It blocks on one request, within ctx.
func Names(ctx context.Context, sess *session.Session, base string) ([]string, error) {
	return nil, nil
}

// Instances returns the instances of the service name under base, sorted by
// node name, as Curator's queryForInstances: one request for the list and
// one per instance, within ctx. A node gone meanwhile, or whose data does
// not parse as an instance, is left out; none when the service does not
// exist.
func Instances(ctx context.Context, sess *session.Session, base, name string) ([]Instance, error) {
	return nil, nil
}
