// Package layers holds the test that keeps the module's import graph
// pointing one way. From the bottom up:
//
//	internal/goid, internal/participant,  runtime helpers; the caches' event queue
//	internal/eventqueue
//	internal/zksession                     the session's implementation
//	session                                the public session
//	recipes                                the vocabulary every recipe shares
//	internal/engine, internal/keeper       the engine behind the recipes; what the
//	                                       keepers of a node that stays share
//	mutex, rwlock, semaphore, leader,      the recipes (never each other)
//	recipes/cache, recipes/group,
//	recipes/barrier, recipes/counter
//	zktest, recipes/discovery              real ZooKeeper for tests and demos; service
//	                                       discovery, built on recipes/cache and recipes/group
//	internal/testkit/...                   test tooling (chaos run, Curator programs)
//	examples/..., cmd/..., internal/tools/...
//
// A package may import only packages below it (test files may import
// anything). The test fails when a package imports one above it, when two
// recipes import each other, and when a package of the module is missing from
// the table, so that the table stays complete.
package layers
