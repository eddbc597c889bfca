// Package backend is a tiny gRPC service for zkgrpc's tests and example: a
// server answers Name with the name it was started with, so that a client
// can tell which backend answered a call. It is written by hand with a
// grpc.ServiceDesc, without protoc; its messages are protobuf's well-known
// StringValue.
package backend

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FullMethod is the service's one method.
const FullMethod = "/zkgrpc.backend.Backend/Name"

// namer is the interface grpc.ServiceDesc.HandlerType names.
type namer interface {
	backendName() string
}

var desc = grpc.ServiceDesc{
	ServiceName: "zkgrpc.backend.Backend",
	HandlerType: (*namer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Name",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return wrapperspb.String(srv.(namer).backendName()), nil
		},
	}},
	Metadata: "backend",
}

// Server is one backend: a gRPC server on a loopback port. Its methods are
// safe for concurrent use.
type Server struct {
	name string
	lis  net.Listener
	srv  *grpc.Server
	done chan struct{}
	once sync.Once
}

func (s *Server) backendName() string { return s.name }

// Start serves a backend named name on addr ("127.0.0.1:0" for a free port).
func Start(name, addr string) (*Server, error) {
	if name == "" {
		return nil, errors.New("backend: empty name")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{name: name, lis: lis, srv: grpc.NewServer(), done: make(chan struct{})}
	s.srv.RegisterService(&desc, s)
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// Name is the backend's name.
func (s *Server) Name() string { return s.name }

// Addr is the address the backend listens on, host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Host is the host part of Addr.
func (s *Server) Host() string { return s.lis.Addr().(*net.TCPAddr).IP.String() }

// Port is the port part of Addr.
func (s *Server) Port() int { return s.lis.Addr().(*net.TCPAddr).Port }

// PortString is Port as text.
func (s *Server) PortString() string { return strconv.Itoa(s.Port()) }

// Stop closes the listener and every connection at once, as a crash would
// for the clients, and returns when the serving goroutine has exited.
// It is idempotent.
func (s *Server) Stop() {
	s.once.Do(s.srv.Stop)
	<-s.done
}

// Name calls the backend method on cc and returns the name of the backend
// that answered.
func Name(ctx context.Context, cc grpc.ClientConnInterface, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, FullMethod, wrapperspb.String(""), out, opts...); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}
