package zkgrpc

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// zkResolver follows one service's discovery cache and gives gRPC its
// addresses. Its goroutine (run) is the only one that calls cc.
type zkResolver struct {
	cc          resolver.ClientConn
	cache       *discovery.Cache
	where       string // <base>/<service>, for messages
	ssl         bool
	lg          *zap.Logger
	loadTimeout time.Duration

	stop  chan struct{}
	wg    sync.WaitGroup
	close sync.Once

	// Owned by run.
	last   []resolver.Endpoint
	pushed bool
}

// ResolveNow does nothing: the cache follows the service through watches,
// so a new read would find what the resolver already gave.
func (r *zkResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close stops the resolver and its cache, and returns when their goroutines
// have exited. gRPC calls it when the client is closed.
func (r *zkResolver) Close() {
	r.close.Do(func() {
		close(r.stop)
		r.wg.Wait()
		_ = r.cache.Close()
	})
}

func (r *zkResolver) run() {
	defer r.wg.Done()
	events := r.cache.Events()
	loaded := r.cache.Initialized()
	late := time.NewTimer(r.loadTimeout)
	defer late.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-late.C:
			// Until the first load, gRPC's calls would wait, whatever their
			// wait-for-ready: tell it that the name does not resolve yet, so
			// that the others fail fast.
			r.cc.ReportError(fmt.Errorf("zkgrpc: %s: not read from ZooKeeper %v after the resolver started; still trying", r.where, r.loadTimeout))
		case <-loaded:
			loaded = nil
			late.Stop()
			r.update()
		case _, ok := <-events:
			if ok {
				ok = r.drain(events)
			}
			if !ok {
				// Events closes before Close only when the session is closed.
				events, loaded = nil, nil
				late.Stop()
				r.cc.ReportError(fmt.Errorf("zkgrpc: %s: the session is closed; keeping the last addresses: %w", r.where, session.ErrClosed))
				continue
			}
			if loaded == nil {
				r.update()
			}
		}
	}
}

// drain takes the events already queued, so that a burst of changes gives
// one update; false when the channel is closed.
func (r *zkResolver) drain(events <-chan discovery.Event) bool {
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return false
			}
		default:
			return true
		}
	}
}

// update gives gRPC the cache's instances, unless they are what it has.
func (r *zkResolver) update() {
	eps := r.endpoints(r.cache.Instances())
	if r.pushed && sameEndpoints(eps, r.last) {
		return
	}
	r.last, r.pushed = eps, true
	addrs := make([]resolver.Address, len(eps))
	for i, ep := range eps {
		addrs[i] = resolver.Address{Addr: ep.Addresses[0].Addr, BalancerAttributes: ep.Attributes}
	}
	if ce := r.lg.Check(zap.DebugLevel, "zkgrpc: update"); ce != nil {
		ce.Write(zap.Int("endpoints", len(eps)))
	}
	// The error says the balancer did not like the state (none for an empty
	// list): a watch-based resolver has nothing better to give, so it is not
	// retried; the next change of the service brings a new state.
	_ = r.cc.UpdateState(resolver.State{Addresses: addrs, Endpoints: eps})
	if len(eps) == 0 {
		r.cc.ReportError(fmt.Errorf("zkgrpc: %s: %w", r.where, discovery.ErrNoInstances))
	}
}

// endpoints turns instances into endpoints: one per address, in the cache's
// order (by node name), leaving out the instances not in service, those without
// an address or the port asked for, and later instances of an address
// already given.
func (r *zkResolver) endpoints(insts []discovery.Instance) []resolver.Endpoint {
	eps := make([]resolver.Endpoint, 0, len(insts))
	seen := make(map[string]bool, len(insts))
	for _, in := range insts {
		port := in.Port
		if r.ssl {
			port = in.SSLPort
		}
		why := ""
		switch {
		case !in.InService():
			why = "not in service"
		case in.Address == "":
			why = "no address"
		case port <= 0 || port > 65535:
			why = "no port"
			if r.ssl {
				why = "no sslPort"
			}
		}
		addr := net.JoinHostPort(in.Address, strconv.Itoa(port))
		if why == "" && seen[addr] {
			why = "address of an earlier instance"
		}
		if why != "" {
			if ce := r.lg.Check(zap.DebugLevel, "zkgrpc: instance left out"); ce != nil {
				ce.Write(zap.String("node", in.ID), zap.String("why", why))
			}
			continue
		}
		seen[addr] = true
		eps = append(eps, resolver.Endpoint{
			Addresses:  []resolver.Address{{Addr: addr}},
			Attributes: instanceAttributes(in),
		})
	}
	return eps
}

// sameEndpoints reports whether a and b give the same addresses, in the same
// order, with equal attributes.
func sameEndpoints(a, b []resolver.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Addresses[0].Addr != b[i].Addresses[0].Addr || !a[i].Attributes.Equal(b[i].Attributes) {
			return false
		}
	}
	return true
}

// instanceAttributes are an endpoint's attributes: the instance, and its
// Spring metadata when its payload is Spring's.
func instanceAttributes(in discovery.Instance) *attributes.Attributes {
	a := attributes.New(instanceKey{}, instanceValue{in})
	if sp, err := discovery.ParseSpring(in.Payload); err == nil {
		a = a.WithValue(springKey{}, springValue{sp.Metadata})
	}
	return a
}
