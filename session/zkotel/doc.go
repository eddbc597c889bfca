// Package zkotel records what zkrecipes sessions and recipes do as
// OpenTelemetry metrics and spans. It is a module of its own, so that the
// library's core packages depend on no OpenTelemetry module (and keep their
// older minimum Go version); a service opts in by requiring this module:
//
//	hooks, err := zkotel.Hooks(zkotel.WithMeterProvider(mp), zkotel.WithTracerProvider(tp))
//	...
//	sess, err := session.Connect(ctx, servers, session.WithHooks(hooks))
//
// and, optionally, naming its recipes (mutex.WithName("orders"), ...).
// Prometheus users register OpenTelemetry's Prometheus exporter as the meter
// provider's reader and serve its registry (see the example).
//
// # Metrics
//
// Durations are in seconds. An acquire of n semaphore leases (AcquireN)
// counts as n acquires; a leader's campaign is one acquire, however many
// attempts it takes. Attributes are bounded: the recipe's kind
// (zkrecipes.kind: mutex, rwlock.read, rwlock.write, semaphore, leader) and
// the name given with its package's WithName (zkrecipes.name, "" if none),
// never its path, which would make a series per key. The request.duration,
// acquire.duration, acquire.handoff.duration and lease.duration histograms
// reach the meter in batches: 128 measurements, at most a second after the
// first of them, and at every collection, which includes every measurement
// whose hook returned before it began (unless views drop all of the
// adapter's gauges, whose callback does that: then within the second).
//
//	zkrecipes.session.transitions        counter     zkrecipes.state (Connected, Suspended, Reconnected, Lost, Closed)
//	zkrecipes.session.suspended.duration histogram   zkrecipes.outcome: reconnected (the time to reconnect), lost, closed
//	zkrecipes.session.pending_deletes    gauge       the guaranteed-delete backlog, summed over open sessions
//	zkrecipes.session.watches            gauge       watches set and not yet fired, summed over open sessions
//	zkrecipes.session.suspended.age      gauge       how long the longest-suspended open session has been suspended now (0: none)
//	zkrecipes.session.timeout            gauge       the shortest negotiated session timeout among the open sessions
//	zkrecipes.request.duration           histogram   zkrecipes.op (getData, create, multi, ping, ...), error.type (NONODE, CONNECTIONLOSS, ...; absent on success)
//	zkrecipes.request.retries            counter     error.type
//	zkrecipes.acquire.duration           histogram   kind, name, zkrecipes.outcome: acquired, busy, canceled, deadline, error
//	zkrecipes.acquire.handoff.duration   histogram   kind, name: from the deletion notice of the node waited on to the grant (a leader's part of a failover)
//	zkrecipes.lease.duration             histogram   kind, name, zkrecipes.outcome: released, deleted, suspended, lost, closed, error (a leader's term length)
//	zkrecipes.lease.loss.delay           histogram   kind, name, outcome (suspended, lost): from the last answer heard to the holder told
//	zkrecipes.lease.active               updown      kind, name: leases this process holds
//	zkrecipes.semaphore.max              gauge       name: a semaphore's fixed maximum
//	zkrecipes.leader.changes             counter     name, zkrecipes.outcome: gained, lost
//
// # Spans
//
// "zkrecipes.acquire <kind>" covers each acquire, from its call to its
// return, as a child of the acquire's ctx (attributes: kind, name, path,
// outcome, handoff; an error status for an outcome "error").
// "zkrecipes.lease <kind>" covers each lease from its grant to its end, and is
// recorded when it ends (attributes: kind, name, path, cause, held time,
// loss delay; an error status unless released or closed).
//
// # Cost
//
// Each hook records into instruments made once, with attribute sets cached
// per combination. The histograms of requests, acquires, handoffs and lease
// durations are recorded in batches, which costs several times less than one
// at a time between a recipe's own work: a contended lock runs 1 to 5 %
// slower with an SDK meter (docs/performance.md). With a no-op tracer
// provider (package trace/noop, the trace package's older one, or the global
// provider while none is set) the adapter starts no span, and allocates
// nothing for spans; hooks made on the global provider start spans once a
// provider is set with otel.SetTracerProvider. Any other provider is asked
// for every span, whether it samples them or not.
package zkotel
