package zksession

import (
	"fmt"

	"go.uber.org/zap"
)

// zkLogger routes go-zookeeper's Printf logging into zap at debug level.
type zkLogger struct{ lg *zap.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	if l.lg.Core().Enabled(zap.DebugLevel) {
		l.lg.Debug("zk: " + fmt.Sprintf(format, args...))
	}
}

// hexID formats a session id as the server logs do.
func hexID(id int64) zap.Field { return zap.String("session_id", fmtID(id)) }

func fmtID(id int64) string { return fmt.Sprintf("0x%x", id) }
