package main

import (
	"fmt"
	"strings"
)

const helpOverview = `zkrecipes runs a shell job under a ZooKeeper lock, semaphore lease or
leadership, and stops the job the moment holding it is no longer safe.

Usage:
  zkrecipes lock  [flags] PATH -- COMMAND [ARGS...]   run COMMAND holding the lock PATH
  zkrecipes sem   -n N [flags] PATH -- COMMAND...     run COMMAND holding one of N leases
  zkrecipes elect [flags] PATH -- COMMAND...          run COMMAND while leader of PATH
  zkrecipes holders [-n N] [--json] PATH              who holds or waits for a lock (-n: semaphore)
  zkrecipes leader [--json] PATH                      who leads PATH (exit 1: nobody)
  zkrecipes observe [--json] PATH                     print each change of leader until interrupted
  zkrecipes services [--base P] [--json] [NAME]       services registered for discovery, or NAME's instances
  zkrecipes help [COMMAND]                            this text, or a command's

Flags go before PATH. The znodes are Apache Curator's: lock is an
InterProcessMutex, sem an InterProcessSemaphoreV2, elect a LeaderLatch, so
Java services on the same path take part.

The job runs in its own process group, in the background of a terminal: a
job that reads from the terminal is stopped (SIGTTIN), so give it its input
from a file or /dev/null. When the lease ends for any reason
(the connection to ZooKeeper is still down two thirds of the session
timeout after the last answered request, the session is lost, someone
deletes the node), the whole group gets SIGTERM and SIGCONT at once and
SIGKILL after --grace; the job is then dead before the server can expire
the session and admit the next holder (see zkrecipes help lock). A
disconnect mended before then (a server restarting) stops nothing.
zkrecipes is the subreaper of every process the job starts: processes that
left the group (setsid, sudo with use_pty, script, tmux, systemd-run --scope)
get the same signals, and the lease is released only when no process of the
job is left. SIGINT, SIGTERM and SIGHUP sent to zkrecipes go to the job's group. The
lease is released after the job has exited; processes it left running, in
its group or outside it, are stopped first (SIGTERM, SIGKILL after --grace).

` + helpExit + helpConnection

const helpExit = `Exit codes:
  the job's own    the job ran and exited (128+N: killed by signal N)
  2                bad usage: a flag, an argument or an environment variable
  69               no connection to ZooKeeper
  70               other failure (ZooKeeper refused a request, e.g. by ACL), or a
                   process of the job outlived SIGKILL by 5s (uninterruptible
                   sleep): zkrecipes then exits without releasing the lease or
                   closing its session, and the node goes when the session expires
  75               not acquired: --try found it taken, or --timeout passed
  79               the lease ended while the job ran; the job was stopped
  126, 127         COMMAND cannot be executed, or was not found
  128+N            interrupted by signal N before the job started
A job may exit with 75 or 79 itself: zkrecipes's own come with a line on
stderr that says why.
`

const helpConnection = `
Connection flags (every command; the variable is used when the flag is absent):
  --servers LIST           host:port,... (ZKRECIPES_SERVERS; default 127.0.0.1:2181)
  --session-timeout D      session timeout asked of the server (ZKRECIPES_SESSION_TIMEOUT; default 10s)
  --connect-timeout D      give up connecting after D (ZKRECIPES_CONNECT_TIMEOUT; default 15s)
  --namespace P            chroot of every path (ZKRECIPES_NAMESPACE)
  --tls-ca FILE            CA of the servers' certificates, PEM (ZKRECIPES_TLS_CA)
  --tls-cert FILE          client certificate, PEM (ZKRECIPES_TLS_CERT)
  --tls-key FILE           its key, PEM (ZKRECIPES_TLS_KEY)
  --tls-server-name NAME   name the servers' certificates carry (ZKRECIPES_TLS_SERVER_NAME)
  --auth USER:PASSWORD     digest credentials (ZKRECIPES_AUTH; prefer the variable: flags show in ps)
  -v                       log each step, with times, on stderr
`

const helpJob = `
Job flags:
  --id ID        participant id stored in the node (default host:pid, which
                 names the process even when several run on one host; the
                 library's and Curator's default is the local IP address, so
                 give --id to match an IP-named convention)
  --grace D      time between SIGTERM and SIGKILL once the lease ends
                 (default a fifth of the session timeout; at most a quarter)

The job gets these variables:
  ZKRECIPES_TOKEN   fencing token: the node's czxid, larger for every later holder
  ZKRECIPES_PATH    PATH as given
  ZKRECIPES_ID      the participant id
  ZKRECIPES_NODE    the name of the node that holds

Stopping in time. Let T be the session timeout the server grants. The client
gives up on a silent connection at most 2T/3 after the server last heard from
it, and the lease ends right then; the server can expire the session, and let
the next holder in, no sooner than T after it last heard from it. So from the
end of the lease the job has T/3: SIGTERM at once, SIGKILL after --grace,
which must be at most T/4 (checked against --session-timeout, and lowered
if the server grants less), leaving T/12 for SIGKILL to take effect. Give a
round trip to the servers well under T/3. Processes that leave the job's
process group (setsid, sudo with use_pty, script, tmux, systemd-run --scope)
are stopped with it. Not covered: a node deleted by someone else, or a
session killed on the server, ends the lease without warning (the job still
gets SIGTERM at once); what another daemon starts on the job's behalf
(systemd-run without --scope, the container of docker run) is not below
zkrecipes and is not stopped; a process in uninterruptible sleep cannot be
killed (zkrecipes then exits 70 and leaves the node to the session's
expiry); if zkrecipes itself is killed with SIGKILL, nothing stops the job.
Fence the guarded resource with ZKRECIPES_TOKEN where two writers must never
meet.
`

var helpCommands = map[string]string{
	"lock": `Usage: zkrecipes lock [flags] PATH -- COMMAND [ARGS...]

Waits for the fair lock PATH (Curator's InterProcessMutex layout: Java
InterProcessMutex holders and other zkrecipes lock commands exclude each
other), runs COMMAND while holding it, releases it after COMMAND (and its
process group) has exited, and exits with COMMAND's exit code.

  --try          do not wait: exit 75 if the lock is taken
  --timeout D    wait at most D (after connecting), then exit 75
` + helpJob + `
Example (cron, at most one backup at a time across hosts):
  */5 * * * * zkrecipes lock --try /cron/backup -- /usr/local/bin/backup
`,
	"sem": `Usage: zkrecipes sem -n N [flags] PATH -- COMMAND [ARGS...]

Waits for one of N leases of the semaphore PATH (Curator's
InterProcessSemaphoreV2 layout: <PATH>/locks and <PATH>/leases), runs COMMAND
while holding it, releases it after COMMAND has exited, and exits with
COMMAND's exit code. Every participant must give the same N.

  -n N           number of leases (required)
  --try          do not wait: exit 75 if every lease is taken
  --timeout D    wait at most D (after connecting), then exit 75
` + helpJob,
	"elect": `Usage: zkrecipes elect [flags] PATH -- COMMAND [ARGS...]

Campaigns for leadership of PATH (Curator's LeaderLatch layout), runs
COMMAND while leading, and leaves the election after COMMAND has exited: exit
code COMMAND's, or 79 if leadership was lost while it ran.

  --requeue      campaign again after COMMAND exits or leadership is lost, until
                 SIGINT, SIGTERM or SIGHUP (forwarded to a running COMMAND, whose
                 exit code is then zkrecipes's)
` + helpJob,
	"holders": `Usage: zkrecipes holders [-n N] [--json] PATH

Lists the participants of the lock PATH in queue order, holder first, then
the waiters, one per line:
  holds|waits  ID  NODE  session 0x...  token N
With -n N, those of the semaphore PATH of N leases: the lease holders, then
the waiters in queue order (a Curator acquirer's waiting -lease- node, then
the acquirers queued in PATH/locks, -lock- nodes).
With --json, one JSON array of {id, node, kind, session_id, token, holds}.
`,
	"leader": `Usage: zkrecipes leader [--json] PATH

Prints the leader of the election PATH (LeaderLatch or LeaderSelector
layout) as holders does; exits 1 when nobody leads (--json prints null).
`,
	"services": `Usage: zkrecipes services [--base P] [--json] [NAME]

Lists the services registered for discovery under --base, one name a line,
or with NAME the instances of that service, in the order of their nodes, one
a line:
  ID  ADDRESS  port N  sslPort N  enabled|disabled  registered TIME  PAYLOAD
The layout is Apache Curator's service discovery (curator-x-discovery),
which Spring Cloud Zookeeper uses: <base>/<NAME>/<node>, each node an
instance in Curator's JSON. "-" stands for an address, port or time that is
not set; TIME is UTC, to the millisecond. PAYLOAD is "no payload", "spring
ID metadata {...}" for a Spring Cloud Zookeeper instance, else "payload" and
its JSON, cut after 80 bytes. A node whose data is not an instance is left
out. No service, or no instance, prints nothing and exits 0.

  --base P    the base path (default /services, Spring Cloud Zookeeper's
              default spring.cloud.zookeeper.discovery.root)
  --json      one JSON array: of the names, or of the instances as Curator
              writes them (name, id, address, port, sslPort, payload,
              registrationTimeUTC, serviceType, uriSpec, enabled)
`,
	"observe": `Usage: zkrecipes observe [--json] PATH

Prints the leader of the election PATH, then each change of leader, each on
one line with its UTC time ("nobody leads" when the election is empty),
until SIGINT, SIGTERM or SIGHUP; then exits 0. With --json, one object a
line: {"time": ..., "leader": {...} or null}.
`,
}

// help prints the overview or a command's help on stdout.
func (a *app) help(args []string) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(a.stdout, helpOverview)
		return nil
	case len(args) > 1:
		return usagef("help takes one command, got %s", strings.Join(args, " "))
	}
	text, ok := helpCommands[args[0]]
	if !ok {
		return usagef("no command %q", args[0])
	}
	fmt.Fprint(a.stdout, text)
	if args[0] == "lock" || args[0] == "sem" || args[0] == "elect" {
		fmt.Fprint(a.stdout, "\n"+helpExit)
	}
	fmt.Fprint(a.stdout, helpConnection)
	return nil
}
