package zktest_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// hostLookup is the shape of net.Resolver's LookupHost, which Resolver has.
type hostLookup interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

var (
	_ hostLookup = (*zktest.Resolver)(nil)
	_ hostLookup = (*net.Resolver)(nil)
)

func TestResolver(t *testing.T) {
	ctx := context.Background()
	var r zktest.Resolver
	r.Set("zk-1.test", "127.0.0.7", "127.0.0.8:2181")
	for _, name := range []string{"zk-1.test", "ZK-1.Test", "zk-1.test."} {
		got, err := r.LookupHost(ctx, name)
		if err != nil || !reflect.DeepEqual(got, []string{"127.0.0.7", "127.0.0.8"}) {
			t.Fatalf("LookupHost(%q) = %q, %v; want the addresses set", name, got, err)
		}
	}
	for _, ip := range []string{"127.0.0.9", "::1", "fe80::1%lo"} {
		if got, err := r.LookupHost(ctx, ip); err != nil || !reflect.DeepEqual(got, []string{ip}) {
			t.Fatalf("LookupHost(%q) = %q, %v; want the literal itself", ip, got, err)
		}
	}

	// An unknown name fails as the system resolver's would.
	_, err := r.LookupHost(ctx, "zk-2.test")
	var dns *net.DNSError
	if !errors.As(err, &dns) || !dns.IsNotFound || dns.Err != "no such host" || dns.Name != "zk-2.test" {
		t.Fatalf("LookupHost(unknown) = %v (%#v), want a not-found *net.DNSError", err, dns)
	}
	if want := "lookup zk-2.test: no such host"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}

	// Set again replaces; Set with no address removes.
	r.Set("zk-1.test", "127.0.0.10")
	if got, _ := r.LookupHost(ctx, "zk-1.test"); !reflect.DeepEqual(got, []string{"127.0.0.10"}) {
		t.Fatalf("after a second Set: %q", got)
	}
	r.Set("zk-1.test")
	if _, err := r.LookupHost(ctx, "zk-1.test"); !errors.As(err, &dns) || !dns.IsNotFound {
		t.Fatalf("after Set with no address: %v, want not found", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.LookupHost(cctx, "127.0.0.1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("LookupHost with a canceled ctx = %v", err)
	}

	// Safe for concurrent use (run with -race).
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				r.Set("zk-3.test", "127.0.0.11")
				_, _ = r.LookupHost(ctx, "zk-3.test")
			}
		}()
	}
	wg.Wait()
}
