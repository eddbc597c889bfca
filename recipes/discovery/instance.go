package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ServiceType is Curator's ServiceType: it says what kind of node holds an
// instance.
type ServiceType int

const (
	// Dynamic (DYNAMIC, the zero value): an ephemeral node, gone with the
	// session that registered it.
	Dynamic ServiceType = iota
	// Static (STATIC): a persistent node.
	Static
	// Permanent (PERMANENT): a persistent node.
	Permanent
	// DynamicSequential (DYNAMIC_SEQUENTIAL): an ephemeral node whose name
	// ends with the server's sequence number.
	DynamicSequential
)

// String returns the name Curator writes, e.g. "DYNAMIC".
func (t ServiceType) String() string {
	switch t {
	case Dynamic:
		return "DYNAMIC"
	case Static:
		return "STATIC"
	case Permanent:
		return "PERMANENT"
	case DynamicSequential:
		return "DYNAMIC_SEQUENTIAL"
	}
	return fmt.Sprintf("ServiceType(%d)", int(t))
}

// ephemeral reports whether t is held by an ephemeral node.
func (t ServiceType) ephemeral() bool { return t == Dynamic || t == DynamicSequential }

// parseServiceType reads Curator's name of a ServiceType.
func parseServiceType(s string) (ServiceType, bool) {
	for t := Dynamic; t <= DynamicSequential; t++ {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// Instance is one instance of a service (Curator's ServiceInstance), as it is
// registered under <base>/<Name>/<ID>. Its JSON (MarshalJSON, UnmarshalJSON)
// is the one Curator's JsonInstanceSerializer reads and writes.
type Instance struct {
	// Name is the service's name: the node below the base path.
	Name string
	// ID identifies the instance within its service: the name of its node.
	// Register gives an empty ID a random UUID, as Curator does.
	ID string
	// Address is the host name or IP address the instance serves on; ""
	// is none (written as null).
	Address string
	// Port is the instance's port; 0 means none (written as null).
	Port int
	// SSLPort is the instance's TLS port; 0 means none (written as null).
	SSLPort int
	// Payload is any JSON value, as Curator's payload; nil is none (null).
	// See SpringInstance for the payload of Spring Cloud Zookeeper. The
	// instances a Cache or a query returns share it: do not modify it.
	Payload json.RawMessage
	// RegistrationTime is when the instance was registered, kept to the
	// millisecond (registrationTimeUTC). Register gives a zero time the
	// current time.
	RegistrationTime time.Time
	// Type says what kind of node holds the instance.
	Type ServiceType
	// URISpec is Curator's UriSpec in its template form, e.g.
	// "{scheme}://{address}:{port}"; "" is none. It is written as its parts.
	URISpec string
	// Disabled marks an instance that a Provider (and Curator's
	// ServiceProvider) never picks. The zero value is enabled, written
	// without "enabled", as Curator writes an enabled instance; a disabled
	// one is written with "enabled": false.
	Disabled bool
}

// uriPart is one part of Curator's UriSpec: literal text, or the name of a
// variable.
type uriPart struct {
	Value    string `json:"value"`
	Variable bool   `json:"variable"`
}

type uriSpec struct {
	Parts []uriPart `json:"parts"`
}

// parseURISpec splits a template into its parts as Curator's UriSpec(String)
// does: text between braces is a variable (trimmed), the rest literal text;
// empty text makes no part.
func parseURISpec(s string) ([]uriPart, error) {
	var parts []uriPart
	inside := false
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '{' && s[i] != '}' {
			continue
		}
		if tok := s[start:i]; tok != "" {
			if inside {
				tok = strings.TrimSpace(tok)
			}
			parts = append(parts, uriPart{Value: tok, Variable: inside})
		}
		start = i + 1
		switch {
		case i == len(s):
		case s[i] == '{' && inside:
			return nil, fmt.Errorf("uri spec %q: { inside a variable", s)
		case s[i] == '}' && !inside:
			return nil, fmt.Errorf("uri spec %q: } without {", s)
		default:
			inside = s[i] == '{'
		}
	}
	if inside {
		return nil, fmt.Errorf("uri spec %q: variable not closed", s)
	}
	return parts, nil
}

// formatURISpec writes parts in template form. Literal braces, which a
// template cannot hold as text, are written as Curator's brace variables
// {[} and {]}, which build to the same URI.
func formatURISpec(parts []uriPart) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Variable {
			b.WriteString("{" + p.Value + "}")
			continue
		}
		for _, r := range p.Value {
			switch r {
			case '{':
				b.WriteString("{[}")
			case '}':
				b.WriteString("{]}")
			default:
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// URI returns URISpec filled in from the instance, as Curator's
// buildUriSpec does: {scheme} is "https" when SSLPort is set, else "http";
// {name}, {id}, {address}, {port}, {ssl-port}, {registration-time-utc} and
// {service-type} (lower case) are the instance's, "" when unset; {[} and {]}
// are braces; an unknown variable is left out. It returns "" when URISpec is
// empty or does not parse.
func (in Instance) URI() string {
	parts, err := parseURISpec(in.URISpec)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if !p.Variable {
			b.WriteString(p.Value)
			continue
		}
		b.WriteString(in.variable(p.Value))
	}
	return b.String()
}

// variable returns the value of a UriSpec variable for the instance.
func (in Instance) variable(name string) string {
	port := func(p int) string {
		if p == 0 {
			return ""
		}
		return strconv.Itoa(p)
	}
	switch name {
	case "scheme":
		if in.SSLPort != 0 {
			return "https"
		}
		return "http"
	case "name":
		return in.Name
	case "id":
		return in.ID
	case "address":
		return in.Address
	case "port":
		return port(in.Port)
	case "ssl-port":
		return port(in.SSLPort)
	case "registration-time-utc":
		return strconv.FormatInt(millis(in.RegistrationTime), 10)
	case "service-type":
		return strings.ToLower(in.Type.String())
	case "[":
		return "{"
	case "]":
		return "}"
	}
	return ""
}

// millis returns t in milliseconds since the epoch; 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// wireOut is the JSON Curator writes, fields in Jackson's order.
type wireOut struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             *string         `json:"address"`
	Port                *int            `json:"port"`
	SSLPort             *int            `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         string          `json:"serviceType"`
	URISpec             *uriSpec        `json:"uriSpec"`
	Enabled             *bool           `json:"enabled,omitempty"`
}

// MarshalJSON returns the instance as Curator 5.4's JsonInstanceSerializer
// writes it by default (its compatible mode, which Spring Cloud Zookeeper
// uses too): name, id, address, port, sslPort, payload,
// registrationTimeUTC, serviceType and uriSpec (its parts), unset fields as
// null. That mode leaves out "enabled", so that clients older than the field
// can read the instance: an enabled instance is written without it, a
// Disabled one with "enabled": false (which those old clients cannot read).
// It fails on a Payload that is not JSON, an unknown Type or a URISpec that
// does not parse.
func (in Instance) MarshalJSON() ([]byte, error) {
	w := wireOut{
		Name:                in.Name,
		ID:                  in.ID,
		RegistrationTimeUTC: millis(in.RegistrationTime),
		ServiceType:         in.Type.String(),
	}
	if in.Disabled {
		w.Enabled = new(bool)
	}
	if _, ok := parseServiceType(w.ServiceType); !ok {
		return nil, fmt.Errorf("discovery: unknown service type %d", int(in.Type))
	}
	if in.Address != "" {
		w.Address = &in.Address
	}
	if in.Port != 0 {
		w.Port = &in.Port
	}
	if in.SSLPort != 0 {
		w.SSLPort = &in.SSLPort
	}
	if len(in.Payload) > 0 {
		if !json.Valid(in.Payload) {
			return nil, fmt.Errorf("discovery: payload is not JSON")
		}
		w.Payload = in.Payload
	}
	if in.URISpec != "" {
		parts, err := parseURISpec(in.URISpec)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		w.URISpec = &uriSpec{Parts: parts}
		if w.URISpec.Parts == nil {
			w.URISpec.Parts = []uriPart{}
		}
	}
	return json.Marshal(w)
}

// wireIn is the JSON read: every field may be missing or null.
type wireIn struct {
	Name                *string         `json:"name"`
	ID                  *string         `json:"id"`
	Address             *string         `json:"address"`
	Port                json.RawMessage `json:"port"`
	SSLPort             json.RawMessage `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC json.RawMessage `json:"registrationTimeUTC"`
	ServiceType         *string         `json:"serviceType"`
	URISpec             *uriSpec        `json:"uriSpec"`
	Enabled             json.RawMessage `json:"enabled"`
}

var null = []byte("null")

// UnmarshalJSON reads an instance as Curator's JsonInstanceSerializer
// writes it, as leniently as Curator's Jackson reads it: unknown fields are
// ignored; a missing or null port, sslPort or address is unset; a missing
// or null serviceType is DYNAMIC; a missing "enabled" is true (null, as
// Jackson reads it, false); the payload is any JSON value, kept as it is.
// Data that is not such an object gives an error matching ErrBadData.
func (in *Instance) UnmarshalJSON(data []byte) error {
	var w wireIn
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrBadData, err)
	}
	if bytes.Equal(bytes.TrimSpace(data), null) {
		return fmt.Errorf("%w: null instead of an instance", ErrBadData)
	}
	var out Instance
	if w.Name != nil {
		out.Name = *w.Name
	}
	if w.ID != nil {
		out.ID = *w.ID
	}
	if w.Address != nil {
		out.Address = *w.Address
	}
	var err error
	if out.Port, err = readInt(w.Port, "port"); err != nil {
		return err
	}
	if out.SSLPort, err = readInt(w.SSLPort, "sslPort"); err != nil {
		return err
	}
	if len(w.Payload) > 0 && !bytes.Equal(w.Payload, null) {
		out.Payload = w.Payload
	}
	ms, err := readInt(w.RegistrationTimeUTC, "registrationTimeUTC")
	if err != nil {
		return err
	}
	if ms != 0 {
		out.RegistrationTime = time.UnixMilli(int64(ms))
	}
	if w.ServiceType != nil {
		t, ok := parseServiceType(*w.ServiceType)
		if !ok {
			return fmt.Errorf("%w: unknown serviceType %q", ErrBadData, *w.ServiceType)
		}
		out.Type = t
	}
	if w.URISpec != nil {
		out.URISpec = formatURISpec(w.URISpec.Parts)
	}
	switch {
	case len(w.Enabled) == 0:
	case bytes.Equal(w.Enabled, []byte("true")):
	case bytes.Equal(w.Enabled, []byte("false")), bytes.Equal(w.Enabled, null):
		out.Disabled = true
	default:
		return fmt.Errorf("%w: enabled: %s", ErrBadData, w.Enabled)
	}
	*in = out
	return nil
}

// readInt reads a JSON number, a string holding one (Jackson coerces
// those), or null or nothing as 0.
func readInt(raw json.RawMessage, field string) (int, error) {
	if len(raw) == 0 || bytes.Equal(raw, null) {
		return 0, nil
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %s: %v", ErrBadData, field, err)
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %s is not an integer", ErrBadData, field, raw)
	}
	return int(n), nil
}
