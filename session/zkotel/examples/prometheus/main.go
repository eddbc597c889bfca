// Command prometheus serves zkrecipes metrics to Prometheus: it records them
// with package zkotel on an OpenTelemetry meter provider whose reader is
// OpenTelemetry's Prometheus exporter, and serves the exporter's registry on
// /metrics, while a few workers take turns on a mutex named "report".
//
// It is a module of its own, so that the exporter and the Prometheus client
// stay out of the adapter's module graph. Run it on an embedded ZooKeeper
// (started from the local install, stopped on exit) and scrape it:
//
//	cd session/zkotel/examples/prometheus && go run .
//	curl -s localhost:9464/metrics | grep zkrecipes_acquire_duration
//
// or on your own ensemble with -zk host:port,... Flags: -addr (default
// 127.0.0.1:9464), -workers (default 4), -hold (each hold, default 20ms).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/session/zkotel"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func main() {
	zkAddr := flag.String("zk", "", "ZooKeeper servers, host:port,... (default: an embedded server)")
	addr := flag.String("addr", "127.0.0.1:9464", "address to serve /metrics on")
	workers := flag.Int("workers", 4, "workers taking turns on the mutex, each on its own session")
	hold := flag.Duration("hold", 20*time.Millisecond, "how long each worker holds the mutex")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := mainErr(ctx, *zkAddr, *addr, *workers, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, zkAddr, addr string, workers int, hold time.Duration) error {
	servers := strings.Split(zkAddr, ",")
	if zkAddr == "" {
		srv, err := zktest.StartServer()
		if err != nil {
			return err
		}
		defer srv.Stop()
		servers = srv.Servers()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("serving http://%s/metrics (Ctrl-C to stop)\n", ln.Addr())
	return run(ctx, servers, ln, workers, hold)
}

// run serves /metrics on ln and runs the workers until ctx ends.
func run(ctx context.Context, servers []string, ln net.Listener, workers int, hold time.Duration) error {
	reg := promclient.NewRegistry()
	exp, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	hooks, err := zkotel.Hooks(zkotel.WithMeterProvider(mp))
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- work(ctx, servers, hooks, hold)
		}()
	}
	wg.Wait()
	close(errs)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

// work takes turns on the mutex on a session of its own until ctx ends.
func work(ctx context.Context, servers []string, hooks session.Hooks, hold time.Duration) error {
	sess, err := session.Connect(ctx, servers, session.WithHooks(hooks))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer sess.Close()
	m, err := mutex.New(sess, "/zkrecipes-demo/metrics/report", mutex.WithName("report"))
	if err != nil {
		return err
	}
	defer m.Close()
	for ctx.Err() == nil {
		l, err := m.Lock(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-time.After(hold):
		case <-ctx.Done():
		case <-l.Done():
		}
		if err := l.Release(context.Background()); err != nil {
			return err
		}
	}
	return nil
}
