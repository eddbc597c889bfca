package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// SpringClass is the Java class that Spring Cloud Zookeeper's payload names
// in its "@class" field: Curator's JsonInstanceSerializer writes it, and a
// Spring reader needs it to accept the payload.
const SpringClass = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"

// SpringBasePath is Spring Cloud Zookeeper's default base path
// (spring.cloud.zookeeper.discovery.root).
const SpringBasePath = "/services"

// SpringInstance is the payload Spring Cloud Zookeeper registers with every
// instance (its ZookeeperInstance). An Instance that Spring's discovery
// client should list has it as Payload, Name as the service's name.
type SpringInstance struct {
	// ID is Spring's instance id (by default the application's name, a
	// colon and its port).
	ID string
	// Name is the service's name.
	Name string
	// Metadata is the instance's metadata
	// (spring.cloud.zookeeper.discovery.metadata); nil is none.
	Metadata map[string]string
}

// springWire is the payload's JSON, fields in Jackson's order.
type springWire struct {
	Class    string            `json:"@class"`
	ID       *string           `json:"id"`
	Name     *string           `json:"name"`
	Metadata map[string]string `json:"metadata"`
}

// Payload returns s as the payload JSON that Spring writes, with
// "@class": SpringClass first, for Instance.Payload. Nil Metadata is
// written as {} (Spring's default).
func (s SpringInstance) Payload() json.RawMessage {
	w := springWire{Class: SpringClass, ID: &s.ID, Name: &s.Name, Metadata: s.Metadata}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	b, err := json.Marshal(w)
	if err != nil { // strings and a map of strings always marshal
		panic(fmt.Sprintf("discovery: marshaling a Spring payload: %v", err))
	}
	return b
}

// ParseSpring reads a payload that Spring Cloud Zookeeper wrote. Unknown
// fields are ignored and a missing "@class" is accepted; a payload that is
// not a JSON object (null included), names another "@class", or holds
// metadata that is not an object of strings gives an error matching
// ErrBadData.
func ParseSpring(payload json.RawMessage) (SpringInstance, error) {
	var w struct {
		Class    *string           `json:"@class"`
		ID       *string           `json:"id"`
		Name     *string           `json:"name"`
		Metadata map[string]string `json:"metadata"`
	}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' {
		return SpringInstance{}, fmt.Errorf("%w: a Spring payload is a JSON object", ErrBadData)
	}
	if err := json.Unmarshal(p, &w); err != nil {
		return SpringInstance{}, fmt.Errorf("%w: Spring payload: %v", ErrBadData, err)
	}
	if w.Class != nil && *w.Class != SpringClass {
		return SpringInstance{}, fmt.Errorf("%w: payload of class %q, not %s", ErrBadData, *w.Class, SpringClass)
	}
	var s SpringInstance
	if w.ID != nil {
		s.ID = *w.ID
	}
	if w.Name != nil {
		s.Name = *w.Name
	}
	s.Metadata = w.Metadata
	return s, nil
}

// SpringStatusKey is the metadata key under which Spring Cloud Zookeeper
// keeps an instance's status ("UP", "OUT_OF_SERVICE", ...), set through its
// service-registry endpoint.
const SpringStatusKey = "instance_status"

// InService reports whether the instance may be handed out: it is not
// Disabled and, when its payload is Spring Cloud Zookeeper's, its status
// (metadata SpringStatusKey) is "UP" or unset, as Spring's own clients take
// it. A Provider picks, and the gRPC resolver gives, only instances in
// service.
func (in Instance) InService() bool {
	if in.Disabled {
		return false
	}
	if len(in.Payload) == 0 || !bytes.Contains(in.Payload, []byte(SpringStatusKey)) {
		return true // no status: nothing to parse
	}
	sp, err := ParseSpring(in.Payload)
	if err != nil {
		return true // not Spring's payload
	}
	st, ok := sp.Metadata[SpringStatusKey]
	return !ok || st == "" || strings.EqualFold(st, "UP")
}
