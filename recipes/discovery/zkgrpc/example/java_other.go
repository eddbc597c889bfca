//go:build !linux

package main

import (
	"context"
	"errors"
)

// javaInstallCommand says what the Java side needs elsewhere than on Linux.
const javaInstallCommand = "(the example starts the Curator program on Linux only)"

// javaInstance is a running Curator program; only Linux runs one.
type javaInstance struct {
	pid  int
	path string
}

func startJava(context.Context, []string, string, string, string, string, int) (*javaInstance, error) {
	return nil, errors.New("the Curator program is started on Linux only")
}

func (*javaInstance) stop() error { return nil }
