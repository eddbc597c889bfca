package zksession

import (
	"context"
	"log/slog"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithSlog sets the logger to l: every line the Session and its recipes log
// goes to l's handler, at the corresponding level (zap's debug, info, warn,
// error; its panic and fatal levels, which the library never uses, as error),
// with the zap logger's name as the attribute "logger".
func WithSlog(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return badOption("nil slog logger")
		}
		c.logger = zap.New(slogCore{h: l.Handler()})
		return nil
	}
}

// slogCore is a zapcore.Core that hands every entry to a slog.Handler.
type slogCore struct{ h slog.Handler }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	return slogCore{h: c.h.WithAttrs(slogAttrs(fs))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(slogAttrs(fs)...)
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

// slogAttrs converts zap fields to slog attributes, sorted by key.
func slogAttrs(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	as := make([]slog.Attr, len(keys))
	for i, k := range keys {
		as[i] = slog.Any(k, enc.Fields[k])
	}
	return as
}
