// Command zkrecipes runs a shell job under a ZooKeeper lock, a semaphore
// lease or leadership, and stops the job's whole process group the moment
// holding it is no longer safe: SIGTERM at once when the lease ends, SIGKILL
// after a grace period short enough that the job is dead before the server
// can expire the session and admit the next holder.
//
//	zkrecipes lock  [flags] PATH -- COMMAND [ARGS...]
//	zkrecipes sem   -n N [flags] PATH -- COMMAND [ARGS...]
//	zkrecipes elect [--requeue] [flags] PATH -- COMMAND [ARGS...]
//	zkrecipes holders [-n N] [--json] PATH
//	zkrecipes leader [--json] PATH
//	zkrecipes observe [--json] PATH
//	zkrecipes services [--base P] [--json] [NAME]
//	zkrecipes help [COMMAND]
//
// Install it with
//
//	go install github.com/zkrecipes/zkrecipes/cmd/zkrecipes@latest
//
// The znodes are Apache Curator's (InterProcessMutex, InterProcessSemaphoreV2,
// LeaderLatch), so Java services on the same paths take part. The job gets its
// fencing token, the path and the participant id in ZKRECIPES_TOKEN,
// ZKRECIPES_PATH and ZKRECIPES_ID. `zkrecipes help` has the flags, the
// environment variables, the exit codes and the timing bound; the README has
// a cron line and a deploy script.
//
// The job commands need Linux: zkrecipes makes itself the child subreaper of
// the job's processes, so that it stops, and waits for, every process the job
// started, in its process group or outside it (setsid, sudo, script, tmux),
// before it releases the lease.
package main
