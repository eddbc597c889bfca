package engine

import (
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// refusedMulti is zksession.Refused for a transaction: it names the operation
// of ops that failed it (the first one with an error in res) and its path.
// Other errors, and a transaction whose failed operation is unknown, are
// returned as they are.
func refusedMulti(ops []any, res []zk.MultiResponse, err error) error {
	i := failedOp(res)
	if err == nil || i < 0 || i >= len(ops) {
		return err
	}
	switch op := ops[i].(type) {
	case *zk.CreateRequest:
		return zksession.Refused("create", op.Path, err)
	case *zk.SetDataRequest:
		return zksession.Refused("set", op.Path, err)
	case *zk.DeleteRequest:
		return zksession.Refused("delete", op.Path, err)
	case *zk.CheckVersionRequest:
		return zksession.Refused("check", op.Path, err)
	}
	return err
}
