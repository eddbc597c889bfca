package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
)

// queryTimeout bounds the reads of holders and leader.
const queryTimeout = 30 * time.Second

// participantJSON is a participant as --json prints it.
type participantJSON struct {
	ID        string `json:"id"`
	Node      string `json:"node"`
	Kind      string `json:"kind"`
	SessionID string `json:"session_id"`
	Token     int64  `json:"token"`
	Holds     bool   `json:"holds"`
}

func toJSON(p recipes.Participant) participantJSON {
	return participantJSON{p.ID, p.Node, p.Kind, fmt.Sprintf("0x%x", p.SessionID), p.Token, p.Holds}
}

func participantText(p recipes.Participant) string {
	state := "waits"
	if p.Holds {
		state = "holds"
	}
	return fmt.Sprintf("%s\t%s\t%s\tsession 0x%x\ttoken %d", state, p.ID, p.Node, p.SessionID, p.Token)
}

// query runs holders, leader and observe.
func (a *app) query(kind string, args []string) (err error) {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	var c connFlags
	c.register(fs)
	asJSON := fs.Bool("json", false, "")
	var n int
	if kind == "holders" {
		fs.IntVar(&n, "n", 0, "")
	}
	err = parseFlags(fs, args, a.getenv)
	if errors.Is(err, flag.ErrHelp) {
		return a.help([]string{kind})
	}
	if err != nil {
		return err
	}
	a.verbose = c.verbose
	switch {
	case fs.NArg() == 0:
		return usagef("no PATH")
	case fs.NArg() > 1:
		return usagef("one PATH only, got %q after it (flags go before PATH)", fs.Arg(1))
	case n < 0:
		return usagef("-n %d: must not be negative", n)
	}
	if err := c.check(); err != nil {
		return err
	}
	path := fs.Arg(0)
	if err := checkPath(path); err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if kind == "observe" {
		sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer stop()
		ctx = sctx
	}
	sess, err := a.connect(ctx, &c)
	if err != nil {
		if kind == "observe" && ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = exitWith(exitFailure, cerr)
		}
	}()
	switch kind {
	case "holders":
		err = a.holders(ctx, sess, path, n, *asJSON)
	case "leader":
		err = a.leader(ctx, sess, path, *asJSON)
	default:
		err = a.observe(ctx, sess, path, *asJSON)
	}
	if errors.Is(err, session.ErrBadArgument) {
		return usageError{err.Error()}
	}
	return err
}

func (a *app) holders(ctx context.Context, sess *session.Session, path string, n int, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var ps []recipes.Participant
	if n == 0 {
		m, err := mutex.New(sess, path)
		if err != nil {
			return err
		}
		ps, err = m.Participants(ctx)
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else {
		var err error
		if ps, err = semaphoreQueue(ctx, sess, path, n); err != nil {
			return err
		}
	}
	if asJSON {
		out := make([]participantJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, toJSON(p))
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	for _, p := range ps {
		fmt.Fprintln(a.stdout, participantText(p))
	}
	return nil
}

// semaphoreQueue lists the participants of the semaphore path of n leases in
// queue order: its lease nodes (the holders, then a Curator acquirer that
// waits with its lease node), then the acquirers queued on its mutex
// <path>/locks, all waiting (the first of them holds the mutex, not a lease;
// a Curator acquirer that holds it and waits with a lease node is listed
// once). The two directories are read one after the other: an acquirer that
// takes its lease in between is missed, never listed twice.
func semaphoreQueue(ctx context.Context, sess *session.Session, path string, n int) ([]recipes.Participant, error) {
	s, err := semaphore.New(sess, path, n)
	if err != nil {
		return nil, err
	}
	ps, err := s.Participants(ctx)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	m, err := mutex.New(sess, path+"/locks") // checkPath: never "/"
	if err != nil {
		return nil, err
	}
	queued, err := m.Participants(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	for _, q := range queued {
		if q.Holds && slices.ContainsFunc(ps, func(p recipes.Participant) bool {
			return !p.Holds && p.SessionID == q.SessionID && p.ID == q.ID
		}) {
			continue // the same Curator acquirer as its waiting lease node
		}
		q.Holds = false
		ps = append(ps, q)
	}
	return ps, nil
}

func (a *app) leader(ctx context.Context, sess *session.Session, path string, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	p, ok, err := leader.Leader(ctx, sess, path)
	if err != nil {
		return err
	}
	if asJSON {
		var v any // null when nobody leads
		if ok {
			v = toJSON(p)
		}
		if err := json.NewEncoder(a.stdout).Encode(v); err != nil {
			return err
		}
	} else if ok {
		fmt.Fprintln(a.stdout, participantText(p))
	}
	if !ok {
		return exitWith(1, nil)
	}
	return nil
}

// observeJSON is one change of leader as observe --json prints it.
type observeJSON struct {
	Time   string           `json:"time"`
	Leader *participantJSON `json:"leader"`
}

func (a *app) observe(ctx context.Context, sess *session.Session, path string, asJSON bool) error {
	ch, err := leader.Observe(ctx, sess, path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(a.stdout)
	for p := range ch {
		now := time.Now().UTC().Format(time.RFC3339Nano)
		switch {
		case asJSON:
			v := observeJSON{Time: now}
			if p.Node != "" {
				j := toJSON(p)
				v.Leader = &j
			}
			if err := enc.Encode(v); err != nil {
				return err
			}
		case p.Node == "":
			fmt.Fprintf(a.stdout, "%s\tnobody leads\n", now)
		default:
			fmt.Fprintf(a.stdout, "%s\t%s\n", now, participantText(p))
		}
	}
	return nil
}
