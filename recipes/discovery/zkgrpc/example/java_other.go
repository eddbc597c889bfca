//go:build !linux

package main

import (
	"context"
	"errors"
)

// javaInstance is a running Curator program; only Linux runs one.
type javaInstance struct {
	pid  int
	path string
}

func startJava(context.Context, []string, string, string, string, string, int) (*javaInstance, error) {
	return nil, errors.New("the Curator program is started on Linux only")
}

func (*javaInstance) stop() error { return nil }
