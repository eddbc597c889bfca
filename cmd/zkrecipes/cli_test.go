package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Bad input exits 2 with one line on stderr that names what is wrong, before
// anything connects (the servers given do not exist).
func TestUsageErrors(t *testing.T) {
	dead := []string{"--servers", deadAddr(t), "--connect-timeout", "1s"}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", nil, nil, "no command"},
		{"unknown command", nil, []string{"lick", "/a"}, `unknown command "lick"`},
		{"no path", nil, args([]string{"lock"}, dead), "no PATH"},
		{"no --", nil, args([]string{"lock"}, dead, []string{"/a", "true"}), "want -- between PATH"},
		{"flag after path", nil, args([]string{"lock"}, dead, []string{"/a", "--try", "--", "true"}), "flags go before PATH"},
		{"no job", nil, args([]string{"lock"}, dead, []string{"/a", "--"}), "no command after --"},
		{"relative path", nil, args([]string{"lock"}, dead, []string{"a", "--", "true"}), `PATH "a"`},
		{"trailing slash", nil, args([]string{"lock"}, dead, []string{"/a/", "--", "true"}), `PATH "/a/": trailing '/'`},
		{"empty segment", nil, args([]string{"sem", "-n", "2"}, dead, []string{"/a//b", "--", "true"}), `PATH "/a//b": empty segment`},
		{"dot segment", nil, args([]string{"elect"}, dead, []string{"/a/../b", "--", "true"}), `PATH "/a/../b": ".." segment`},
		{"query trailing slash", nil, args([]string{"holders"}, dead, []string{"/a/"}), `PATH "/a/": trailing '/'`},
		{"query root", nil, args([]string{"leader"}, dead, []string{"/"}), `PATH "/"`},
		{"bad timeout", nil, args([]string{"lock", "--timeout", "soon"}, dead, []string{"/a", "--", "true"}), "-timeout: not a duration such as 1.5s or 500ms"},
		{"bad grace", nil, args([]string{"lock", "--grace", "1"}, dead, []string{"/a", "--", "true"}), "-grace: not a duration such as 1.5s or 500ms"},
		{"bad session timeout", nil, args([]string{"holders", "--session-timeout", "10"}, dead, []string{"/a"}), "-session-timeout: not a duration such as 1.5s or 500ms"},
		{"unknown flag", nil, args([]string{"lock", "--bogus"}, dead, []string{"/a", "--", "true"}), "-bogus"},
		{"grace too long", nil, args([]string{"lock", "--session-timeout", "4s", "--grace", "1500ms"}, dead, []string{"/a", "--", "true"}),
			"--grace 1.5s is too long for --session-timeout 4s: at most 1s"},
		{"negative grace", nil, args([]string{"lock", "--grace", "-1s"}, dead, []string{"/a", "--", "true"}), "--grace -1s"},
		{"try and timeout", nil, args([]string{"lock", "--try", "--timeout", "1s"}, dead, []string{"/a", "--", "true"}), "--try and --timeout"},
		{"sem without n", nil, args([]string{"sem"}, dead, []string{"/a", "--", "true"}), "-n 0"},
		{"bad env timeout", []string{"ZKRECIPES_SESSION_TIMEOUT=soon"}, args([]string{"lock"}, dead, []string{"/a", "--", "true"}), `ZKRECIPES_SESSION_TIMEOUT="soon": not a duration such as 1.5s or 500ms`},
		{"bad env connect timeout", []string{"ZKRECIPES_CONNECT_TIMEOUT=5"}, args([]string{"lock"}, []string{"--servers", deadAddr(t)}, []string{"/a", "--", "true"}),
			`ZKRECIPES_CONNECT_TIMEOUT="5": not a duration such as 1.5s or 500ms`},
		{"bad auth", []string{"ZKRECIPES_AUTH=nopassword"}, args([]string{"lock"}, dead, []string{"/a", "--", "true"}), "want user:password"},
		{"cert without key", nil, args([]string{"holders", "--tls-cert", "c.pem"}, dead, []string{"/a"}), "--tls-cert and --tls-key go together"},
		{"missing ca file", nil, args([]string{"leader", "--tls-ca", "/nonexistent/ca.pem"}, dead, []string{"/a"}), "--tls-ca: open /nonexistent/ca.pem"},
		{"two paths", nil, args([]string{"leader"}, dead, []string{"/a", "/b"}), "one PATH only"},
		{"help of nothing", nil, []string{"help", "frob"}, `no command "frob"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.env, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q: want one line containing %q", stderr, tc.want)
			}
			if n := strings.Count(stderr, "(see zkrecipes help"); n != 1 {
				t.Errorf("stderr %q points to the help %d times, want once", stderr, n)
			}
			if stdout != "" {
				t.Errorf("stdout %q: want nothing", stdout)
			}
		})
	}
}

// help and help COMMAND print, on stdout with exit 0, what a user needs
// without the README: commands, exit codes, variables, the timing bound.
func TestHelp(t *testing.T) {
	code, out, _ := runCmd(t, nil, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"zkrecipes lock", "zkrecipes sem", "zkrecipes elect", "holders", "observe",
		"75 ", "79 ", "69 ", "ZKRECIPES_SERVERS", "--tls-ca", "--auth"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, c := range []string{"lock", "sem", "elect"} {
		code, out, _ := runCmd(t, nil, "help", c)
		if code != 0 {
			t.Fatalf("help %s: exit %d", c, code)
		}
		for _, want := range []string{"Usage: zkrecipes " + c, "ZKRECIPES_TOKEN", "ZKRECIPES_PATH", "ZKRECIPES_ID",
			"--grace", "T/4", "a fifth of the session timeout", "at most a quarter", "host:pid", "local IP",
			"79 ", "--servers", "ZKRECIPES_SESSION_TIMEOUT"} {
			if !strings.Contains(out, want) {
				t.Errorf("help %s lacks %q", c, want)
			}
		}
	}
	// What the job commands' help owes the user since they stop every
	// process of the job: which programs leave its group, and that a job's
	// own code may look like zkrecipes's.
	for _, argv := range [][]string{{"help"}, {"help", "lock"}} {
		c := strings.Join(argv, " ")
		_, out, _ := runCmd(t, nil, argv...)
		for _, want := range []string{"setsid", "sudo", "script", "tmux", "systemd-run", "75 or 79"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", c, want)
			}
		}
		if n := strings.Count(out, "SIGTTIN"); n > 1 {
			t.Errorf("%s warns of SIGTTIN %d times", c, n)
		}
	}
	code, out, _ = runCmd(t, nil, "lock", "-h")
	if code != 0 || !strings.Contains(out, "Usage: zkrecipes lock") {
		t.Errorf("lock -h: exit %d, stdout %q", code, out)
	}
}

// With no server answering, the command exits 69 within --connect-timeout,
// naming the address.
func TestNoConnection(t *testing.T) {
	addr := deadAddr(t)
	for _, cmd := range [][]string{{"lock", "/a", "--", "true"}, {"leader", "/a"}} {
		t0 := time.Now()
		code, _, stderr := runCmd(t, nil, args([]string{cmd[0], "--servers", addr, "--connect-timeout", "2s"}, cmd[1:])...)
		took := time.Since(t0)
		if code != exitNoConnection {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", cmd[0], code, exitNoConnection, stderr)
		}
		if !strings.Contains(stderr, addr) {
			t.Errorf("%s: stderr does not name %s:\n%s", cmd[0], addr, stderr)
		}
		if took > 2*time.Second+15*time.Second {
			t.Errorf("%s took %v with --connect-timeout 2s", cmd[0], took)
		}
	}
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
