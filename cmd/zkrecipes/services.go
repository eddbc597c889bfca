package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
)

// payloadWidth is how much of a payload that is not Spring's the text
// output shows, in bytes of compact JSON.
const payloadWidth = 80

// services runs `zkrecipes services [--base P] [--json] [NAME]`: the names
// of the services registered under the base path, or the instances of one.
func (a *app) services(args []string) (err error) {
	fs := flag.NewFlagSet("services", flag.ContinueOnError)
	var c connFlags
	c.register(fs)
	asJSON := fs.Bool("json", false, "")
	base := fs.String("base", discovery.SpringBasePath, "")
	err = parseFlags(fs, args, a.getenv)
	if errors.Is(err, flag.ErrHelp) {
		return a.help([]string{"services"})
	}
	if err != nil {
		return err
	}
	a.verbose = c.verbose
	if fs.NArg() > 1 {
		return usagef("one NAME only, got %q after it (flags go before NAME)", fs.Arg(1))
	}
	if err := c.check(); err != nil {
		return err
	}
	var pe *zksession.PathError
	if err := zksession.ValidatePath(*base); errors.As(err, &pe) {
		return usagef("--base %q: %s; want an absolute path such as %s", *base, pe.Reason, discovery.SpringBasePath)
	}
	name := fs.Arg(0)
	if fs.NArg() == 1 {
		if err := checkServiceName(*base, name); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	sess, err := a.connect(ctx, &c)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = exitWith(exitFailure, cerr)
		}
	}()
	if fs.NArg() == 0 {
		err = a.serviceNames(ctx, sess, *base, *asJSON)
	} else {
		err = a.serviceInstances(ctx, sess, *base, name, *asJSON)
	}
	if errors.Is(err, session.ErrBadArgument) {
		return usageError{err.Error()}
	}
	return err
}

// checkServiceName refuses a NAME that is not one node name below base.
func checkServiceName(base, name string) error {
	if name == "" || strings.Contains(name, "/") {
		return usagef("NAME %q: want a service's name, one node below --base (no '/')", name)
	}
	var pe *zksession.PathError
	if err := zksession.ValidatePath(strings.TrimSuffix(base, "/") + "/" + name); errors.As(err, &pe) {
		return usagef("NAME %q: %s", name, pe.Reason)
	}
	return nil
}

func (a *app) serviceNames(ctx context.Context, sess *session.Session, base string, asJSON bool) error {
	names, err := discovery.Names(ctx, sess, base)
	if err != nil {
		return err
	}
	if asJSON {
		if names == nil {
			names = []string{}
		}
		return json.NewEncoder(a.stdout).Encode(names)
	}
	for _, n := range names {
		fmt.Fprintln(a.stdout, textField(n))
	}
	return nil
}

func (a *app) serviceInstances(ctx context.Context, sess *session.Session, base, name string, asJSON bool) error {
	insts, err := discovery.Instances(ctx, sess, base, name)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]jsonInstance, len(insts))
		for i, in := range insts {
			out[i] = jsonInstance(in)
		}
		return json.NewEncoder(a.stdout).Encode(out)
	}
	for _, in := range insts {
		fmt.Fprintln(a.stdout, instanceText(in))
	}
	return nil
}

// jsonInstance is an instance as --json prints it: Curator's JSON
// (Instance.MarshalJSON) with "enabled" always written. Curator's default
// serializer, and so MarshalJSON, leaves it out of an enabled instance; a
// script reading the output (jq's select(.enabled)) should not have to know
// that a missing "enabled" means true.
type jsonInstance discovery.Instance

func (j jsonInstance) MarshalJSON() ([]byte, error) {
	in := discovery.Instance(j)
	b, err := in.MarshalJSON()
	if err != nil || in.Disabled {
		return b, err // a disabled instance has "enabled": false
	}
	// An object whose last member is not "enabled": add it before the }.
	return append(b[:len(b)-1], []byte(`,"enabled":true}`)...), nil
}

// instanceText is an instance as the text output shows it, one line:
//
//	ID  ADDRESS  port N  sslPort N  enabled|disabled  registered TIME  PAYLOAD
//
// with "-" for an address, port or time that is not set.
func instanceText(in discovery.Instance) string {
	state := "enabled"
	if in.Disabled {
		state = "disabled"
	}
	registered := "-"
	if !in.RegistrationTime.IsZero() {
		registered = in.RegistrationTime.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return strings.Join([]string{
		textField(in.ID), orDash(textField(in.Address)), "port " + portText(in.Port), "sslPort " + portText(in.SSLPort),
		state, "registered " + registered, payloadSummary(in.Payload),
	}, "\t")
}

func portText(p int) string {
	if p == 0 {
		return "-"
	}
	return strconv.Itoa(p)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// textField is a string from ZooKeeper as a field of a text line: quoted
// when it holds spaces or control characters (a tab or a newline would
// break the line), as it is otherwise.
func textField(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// payloadSummary sums a payload up on one line: "no payload"; a Spring
// Cloud Zookeeper payload as "spring ID metadata {...}"; any other as its
// compact JSON, cut after payloadWidth bytes.
func payloadSummary(p json.RawMessage) string {
	if len(bytes.TrimSpace(p)) == 0 || string(bytes.TrimSpace(p)) == "null" {
		return "no payload"
	}
	var class struct {
		Class string `json:"@class"`
	}
	if json.Unmarshal(p, &class) == nil && class.Class == discovery.SpringClass {
		if s, err := discovery.ParseSpring(p); err == nil {
			md := s.Metadata
			if md == nil {
				md = map[string]string{}
			}
			m, _ := json.Marshal(md) // sorted keys, every control character escaped
			return "spring " + orDash(textField(s.ID)) + " metadata " + string(m)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return "payload (not JSON)"
	}
	s := b.String()
	if len(s) > payloadWidth {
		cut := payloadWidth
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return "payload " + s
}
